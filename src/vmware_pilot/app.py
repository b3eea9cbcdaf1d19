"""Composition root: builds every service once from Settings. The only module that knows concrete classes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vmware_pilot.adapters.webhook import EventSources, Notifier
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.discovery import (
    CatalogCache,
    FileCache,
    RefreshReport,
    installed_skills,
    refresh_catalog,
    stale_reason,
)
from vmware_pilot.dispatch.protocol import Dispatcher
from vmware_pilot.dispatch.stdio import DispatchOptions, StdioDispatcher
from vmware_pilot.engine import conflicts, windows
from vmware_pilot.engine.context import ServiceContext
from vmware_pilot.engine.decision import decision_of
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.execution.drift_check import drift_check
from vmware_pilot.engine.execution.runner import Runner
from vmware_pilot.engine.secrets import SecretVault
from vmware_pilot.engine.service import PilotService
from vmware_pilot.errors import PilotError, StartupRefused, StoreError
from vmware_pilot.kept import DatabaseTexts, TextSource
from vmware_pilot.policy.model import Policy
from vmware_pilot.policy.source import PolicySource
from vmware_pilot.store import CatalogRow, SqlStore, Store, open_store
from vmware_pilot.templates.registry import TemplateRegistry
from vmware_pilot.twin.rehearse import Rehearser, TwinSettings
from vmware_pilot.twin.shelf import CaptureShelf

__all__ = [
    "CatalogFile",
    "CatalogSource",
    "DbCatalogCache",
    "PilotApp",
    "build_app",
    "catalog_cache",
    "refresh_stale_catalog",
    "shared_store",
    "stdio_dispatcher",
]

_log = logging.getLogger(__name__)

# How long shutdown waits for queued notifications (each attempt has its own timeout).
NOTIFY_DRAIN_SECONDS = 5.0


@dataclass(frozen=True)
class DbCatalogCache:
    """The discovery cache as the database's ``catalog_cache`` row (store/texts.py), used when a
    database URL is set, so `catalog refresh` on one host reaches every replica."""

    row: CatalogRow

    @property
    def where(self) -> str:
        return "database"

    def read(self) -> dict[str, Any]:
        row = self.row.catalog_cache()
        if row is None:
            return {}
        try:
            data = json.loads(row[0])
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def write(self, data: Mapping[str, Any]) -> None:
        self.row.put_catalog_cache(json.dumps(data, ensure_ascii=False, separators=(",", ":")))

    def texts(self) -> DatabaseTexts:
        """The row as a ``kept.TextSource`` (stamped with its time)."""

        def stamped() -> list[tuple[str, str]]:
            stamp = self.row.catalog_stamp()
            return [] if stamp is None else [(CACHE_KEY, stamp)]

        def rows(_: str | None) -> list[tuple[str, str]]:
            row = self.row.catalog_cache()
            return [] if row is None else [(CACHE_KEY, row[0])]

        def put(_: str, text: str, previous: str | None, by: str) -> bool:
            self.row.put_catalog_cache(text)
            return True

        return DatabaseTexts(stamped, rows, put)


# The one key the discovery cache is kept under (``kept.TextSource``).
CACHE_KEY = "catalog"


@dataclass(frozen=True)
class CatalogFile:
    """The discovery cache file as a ``kept.TextSource``: one text, stamped with the file's time
    and size (none while there is no file); a file that cannot be read is logged, and the
    catalog is then the curated one."""

    path: Path
    in_database = False

    @property
    def where(self) -> str:
        return str(self.path)

    def stamps(self) -> list[tuple[str, object]]:
        try:
            stat = self.path.stat()
        except OSError:
            return []
        return [(CACHE_KEY, (stat.st_mtime_ns, stat.st_size))]

    def read(self, key: str) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            _log.warning(
                "skill catalog cache %s cannot be read (%s); using the curated catalog", self.path, exc
            )
            return None

    def read_many(self, keys: Collection[str]) -> dict[str, str]:
        return {k: text for k in keys if (text := self.read(k)) is not None}

    def put(self, key: str, text: str, previous: str | None, by: str) -> bool:
        raise ValueError("the discovery cache file is written by `vmware-pilot catalog refresh`")

    def delete(self, key: str, previous: str | None = None) -> bool:
        raise ValueError("the discovery cache file is written by `vmware-pilot catalog refresh`")


def shared_store(settings: Settings) -> SqlStore | None:
    """With a database URL (several replicas may share it), the process's one store, opened once by
    whoever starts first (the network command before reading tokens, the stdio server before
    refreshing the catalog) and handed to ``build_app``: one connection pool per process. None
    without a URL: ``build_app`` opens the home's SQLite store itself. Raises ``PilotError`` when
    the database cannot be opened."""
    return open_store(settings) if settings.database_url else None


def catalog_cache(settings: Settings, store: SqlStore | None) -> DbCatalogCache | None:
    """The database's catalog cache when a database URL is set (the row of ``store``, the
    process's one store); None: the cache file of the pilot home."""
    if not settings.database_url:
        return None
    if store is None:
        raise StoreError(
            "the catalog cache is in the database, and no store was opened for it",
            hint="Open the store first (app.shared_store) and pass it.",
        )
    return DbCatalogCache(store.catalog)


def catalog_texts(settings: Settings, store: SqlStore | None) -> TextSource:
    """The discovery cache as a ``kept.TextSource``: the database's cache row when a database URL
    is set (of ``store``, the process's one store), else the cache file of the pilot home."""
    shared = catalog_cache(settings, store)
    return shared.texts() if shared is not None else CatalogFile(settings.catalog_cache_path)


def read_catalog(cache: TextSource) -> Catalog:
    """Curated + what ``cache`` keeps (curated only while it keeps nothing, or a broken text,
    logged); PilotError when the database cannot be asked."""
    text = cache.read(CACHE_KEY)
    if text is None:
        return Catalog.curated()
    return Catalog.from_text(text, f"in {cache.where}" if cache.in_database else cache.where)


@dataclass
class CatalogSource:
    """Curated + discovered catalog from the discovery cache, one ``kept.TextSource``: the cache
    file (``CatalogFile``), or with a database URL the database's cache row; its stamp is read on
    every use, so a `catalog refresh` is seen at the next."""

    cache: TextSource
    _stamp: object = None
    _catalog: Catalog = field(default_factory=Catalog.curated)
    _stale: bool = False  # the last read from the database failed

    def __call__(self) -> Catalog:
        """The cached catalog while the cache's stamp is unchanged; the last one read (logged)
        when the database cannot be asked, so a lost database does not change the safety rules."""
        try:
            stamp = dict(self.cache.stamps()).get(CACHE_KEY)
            if stamp != self._stamp:
                self._catalog = Catalog.curated() if stamp is None else read_catalog(self.cache)
                self._stamp = stamp
        except PilotError as exc:
            if not self._stale:  # once until a read succeeds, not at every use
                _log.warning(
                    "the skill catalog cache cannot be read from the database (%s); using the last one "
                    "read until it can",
                    exc.message,
                )
            self._stale = True
            return self._catalog
        self._stale = False
        return self._catalog


@dataclass
class PilotApp:
    """What ``build_app`` assembled: the store (``Store``: SQL, or in memory for tests and
    embedders) and the service over it, the dispatcher, the notifier and the policy in force."""

    settings: Settings
    store: Store
    service: PilotService
    dispatcher: Dispatcher | None = None
    notifier: Notifier | None = None
    policies: PolicySource | None = None

    @property
    def sql(self) -> SqlStore:
        """The store as the database it is, for what only a database keeps (console sessions,
        tokens, gauges, the schema); refused for a store in memory."""
        if not isinstance(self.store, SqlStore):
            raise StoreError(
                "this Pilot keeps its workflows in memory: there is no database to ask",
                hint="Start it with a database (VMWARE_PILOT_HOME or VMWARE_PILOT_DATABASE_URL).",
            )
        return self.store

    async def aclose(self) -> None:
        """Release pooled sessions and the store; give queued notifications a bounded time to go out."""
        if self.dispatcher is not None:
            await self.dispatcher.aclose()
        if self.notifier is not None:
            await asyncio.to_thread(self.notifier.close, NOTIFY_DRAIN_SECONDS)
        self.store.close()

    def close(self) -> None:
        if self.notifier is not None:
            self.notifier.close(NOTIFY_DRAIN_SECONDS)
        self.store.close()


def stdio_dispatcher(settings: Settings, catalog: CatalogSource) -> StdioDispatcher:
    """The dispatcher `--dispatch` / VMWARE_PILOT_DISPATCH=stdio selects."""
    options = DispatchOptions(
        call_timeout=settings.dispatch_timeout,
        start_timeout=settings.dispatch_start_timeout,
        idle_seconds=settings.dispatch_idle_seconds,
        pool_size=settings.dispatch_pool_size,
        per_call=settings.dispatch_sessions == "per_call",
        overrides=settings.skill_commands,
    )
    return StdioDispatcher(options, known_skills=lambda: catalog().skills())


def refresh_stale_catalog(settings: Settings, store: SqlStore | None) -> RefreshReport | None:
    """Refresh the skill catalog from the installed skills when its cache is missing or older than
    them (``dispatch.discovery.stale_reason``); None when it is current. With a database URL the
    cache is the row of ``store`` (the process's one store). Blocking (it starts each installed
    skill's server): call it from a worker thread or a command, never an event loop."""
    cache: CatalogCache = catalog_cache(settings, store) or FileCache(settings.catalog_cache_path)
    reason = stale_reason(cache.read(), installed_skills(settings.skill_commands))
    if not reason:
        return None
    _log.info("refreshing the skill catalog from the installed skills: %s", reason)
    report = asyncio.run(refresh_catalog(settings, cache_store=cache))
    for result in report.failed:
        _log.warning("skill catalog: %s: %s", result.skill, result.error)
    return report


def _note_unread_files(settings: Settings) -> None:
    """Warn about a templates folder or catalog.json this host still has but no longer reads."""
    from vmware_pilot.templates.custom import template_files

    folder = settings.resolved_templates_dir
    if template_files(folder):
        _log.warning(
            "the templates folder %s is not read while VMWARE_PILOT_DATABASE_URL is set (templates are "
            "rows of the database); bring its files in with `vmware-pilot templates import %s`",
            folder,
            folder,
        )
    if settings.resolved_policies_path.exists():
        _log.warning(
            "the policy file %s is not read while VMWARE_PILOT_DATABASE_URL is set (the policy is a row "
            "of the database); bring it in with `vmware-pilot policy import %s`",
            settings.resolved_policies_path,
            settings.resolved_policies_path,
        )
    if settings.catalog_cache_path.exists():
        _log.warning(
            "%s is not read while VMWARE_PILOT_DATABASE_URL is set (the catalog cache is in the "
            "database); run `vmware-pilot catalog refresh` once with the URL set",
            settings.catalog_cache_path,
        )


def policy_source(settings: Settings, store: SqlStore | None) -> PolicySource:
    """The policy in force for these settings (the file, or with a database URL the database's
    row), checked now: ``StartupRefused`` naming each problem by line when it cannot be used."""
    source = PolicySource(
        settings.resolved_policies_path, store.policy if settings.database_url and store else None
    )
    source.check_at_start()
    return source


def build_app(
    settings: Settings, dispatcher: Dispatcher | None = None, store: Store | None = None
) -> PilotApp:
    """Wire store, catalog, templates, dispatcher and the service for these settings: the one
    place the app is assembled.

    ``dispatcher`` overrides the one ``settings.dispatch`` selects (embedders and tests); ``store``
    is the store already open in this process (one connection pool per process: ``shared_store``),
    or a ``MemoryStore`` (no database URL then), else one is opened.
    Child skill servers inherit this process's environment, which is also where secret
    references ``{"$env": NAME}`` are looked up at dispatch time.
    """
    own = store is None
    store = store if store is not None else open_store(settings)
    sql = store if isinstance(store, SqlStore) else None
    try:
        if settings.database_url and sql is None:
            raise StartupRefused(
                "a database URL is set, and the store given is not that database",
                hint="Pass the store shared_store opened, or unset VMWARE_PILOT_DATABASE_URL.",
            )
        policies = policy_source(settings, sql)
    except StartupRefused:
        if own:
            store.close()
        raise
    catalog = CatalogSource(catalog_texts(settings, sql))
    if dispatcher is None and settings.dispatch == "stdio":
        dispatcher = stdio_dispatcher(settings, catalog)
    # With a database URL (several replicas may share it) custom templates are its rows too.
    if settings.database_url:
        _note_unread_files(settings)
    templates = TemplateRegistry(
        settings.resolved_templates_dir,
        catalog,
        home=Path.home(),
        rows=sql.templates if sql is not None and settings.database_url else None,
    )
    notifier = (
        Notifier(
            settings.notify_url,
            settings.notify_secret.get_secret_value(),
            outbox=store.outbox,
            timeout=settings.notify_timeout,
            attempts=settings.notify_attempts,
            retention=settings.notify_retention_hours * 3600,
        )
        if settings.notify_url
        else None
    )
    runner = Runner(
        store,
        catalog,
        dispatcher,
        # Several Pilots may share any database named by a URL (a server, or a SQLite file on a
        # shared disk): a literal secret would live in one of them only.
        SecretVault(refuse_literals=bool(settings.database_url) or store.shared),
        environ=os.environ,
        events=notifier,
        lease_seconds=settings.lease_seconds,
        checks=[drift_check] if settings.drift_check == "writes" else [],
        policy=policies.current,
        gate_expiry_minutes=settings.gate_expiry_minutes,
    )
    if settings.twin != "off":
        runner.twin = Rehearser(
            TwinSettings(
                mode=settings.twin,
                home=settings.home_path,
                vcsim=settings.twin_vcsim,
                govc=settings.twin_govc,
                timeout=settings.twin_timeout,
                max_age_hours=settings.twin_max_age,
                memory_mb=settings.twin_memory_mb,
                skill_commands=settings.skill_commands,
            ),
            # With a database URL the captures are its rows, as templates and the policy are.
            CaptureShelf(
                settings.home_path, sql.captures if sql is not None and settings.database_url else None
            ),
        )

    def in_force() -> Policy:  # asked each time: the runner's policy may be replaced
        return runner.policy()

    # The policy's pre-write checks (engine/execution/holds.py), first: no read is made for a
    # write the policy holds anyway.
    runner.checks[:0] = [windows.window_check(in_force), conflicts.conflict_check(in_force)]
    service = PilotService(ServiceContext(store, catalog, templates, runner, approvals=settings.approvals))
    if notifier is not None:
        dispatching = dispatcher is not None
        notifier.sources = EventSources(
            describe=lambda wf: gate_records.gate_view(wf, runner.catalog, store.now(), dispatching),
            decide=lambda wf: decision_of(wf, runner.catalog, store.now(), dispatching),
            is_read=runner.is_read,
            console_url=settings.public_url,
        )
        notifier.format = settings.notify_format
    return PilotApp(
        settings=settings,
        store=store,
        service=service,
        dispatcher=dispatcher,
        notifier=notifier,
        policies=policies,
    )
