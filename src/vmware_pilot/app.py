"""Composition root: builds every service once from Settings. The only module that knows concrete classes."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import Dispatcher
from vmware_pilot.dispatch.stdio import DispatchOptions, StdioDispatcher
from vmware_pilot.domain.clock import utcnow
from vmware_pilot.engine import gates
from vmware_pilot.engine.notify import Notifier
from vmware_pilot.engine.runner import Runner
from vmware_pilot.engine.secrets import SecretVault
from vmware_pilot.engine.service import PilotService
from vmware_pilot.store.sql import SqlStore, open_store
from vmware_pilot.templates.registry import TemplateRegistry

__all__ = ["CatalogSource", "PilotApp", "build_app", "stdio_dispatcher"]

_log = logging.getLogger(__name__)

# How long shutdown waits for queued notifications (each attempt has its own timeout).
NOTIFY_DRAIN_SECONDS = 5.0


@dataclass
class CatalogSource:
    """Curated + discovered catalog, reloaded when `catalog refresh` rewrites the cache file."""

    cache_path: Path
    _stamp: tuple[int, int] | None = None
    _catalog: Catalog = field(default_factory=Catalog.curated)

    def __call__(self) -> Catalog:
        try:
            stat = self.cache_path.stat()
            stamp: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._catalog = Catalog.load(self.cache_path) if stamp else Catalog.curated()
            self._stamp = stamp
        return self._catalog


@dataclass
class PilotApp:
    settings: Settings
    store: SqlStore
    service: PilotService
    dispatcher: Dispatcher | None = None
    notifier: Notifier | None = None

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


def build_app(settings: Settings, dispatcher: Dispatcher | None = None) -> PilotApp:
    """Wire store, catalog, templates, dispatcher and the service for these settings.

    ``dispatcher`` overrides the one ``settings.dispatch`` selects (embedders and tests).
    Child skill servers inherit this process's environment, which is also where secret
    references ``{"$env": NAME}`` are looked up at dispatch time.
    """
    store = open_store(settings)
    catalog = CatalogSource(settings.catalog_cache_path)
    if dispatcher is None and settings.dispatch == "stdio":
        dispatcher = stdio_dispatcher(settings, catalog)
    templates = TemplateRegistry(settings.resolved_templates_dir, catalog, home=Path.home())
    notifier = (
        Notifier(
            settings.notify_url,
            settings.notify_secret.get_secret_value(),
            outbox=store,
            timeout=settings.notify_timeout,
            attempts=settings.notify_attempts,
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
        SecretVault(refuse_literals=bool(settings.database_url) or store.engine.dialect.name != "sqlite"),
        environ=os.environ,
        events=notifier,
        lease_seconds=settings.lease_seconds,
    )
    service = PilotService(store, catalog, templates, runner, approvals=settings.approvals)
    if notifier is not None:
        notifier.describe = lambda wf: gates.gate_view(wf, runner.catalog, utcnow(), dispatcher is not None)
        notifier.console_url = settings.public_url
    return PilotApp(settings=settings, store=store, service=service, dispatcher=dispatcher, notifier=notifier)
