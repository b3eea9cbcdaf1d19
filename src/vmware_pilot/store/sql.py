"""SqlStore: the narrow stores over one ``Database`` (SQLite by default, or PostgreSQL), as the app owns it.

``open_store`` opens the database (creating and migrating it as needed) and builds each narrow
store over it once: ``workflows`` (store/workflows.py), ``audit`` (store/trail.py), ``leases``,
``locks``, ``outbox``, ``tokens``, ``sessions``, ``captures``, the shared texts ``templates``,
``policy`` and ``catalog`` (store/texts.py), and the MCP tasks ``tasks`` (store/tasks.py). Callers use the narrow store they need; nothing
here forwards their methods.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from vmware_pilot.config import Settings
from vmware_pilot.errors import PilotError, StoreError
from vmware_pilot.store import leases, outbox
from vmware_pilot.store.captures import CaptureRows
from vmware_pilot.store.connection import (
    make_engine,
    private_umask,
    secure_sqlite_files,
    sqlite_path,
    unavailable,
)
from vmware_pilot.store.database import Database
from vmware_pilot.store.leases import Leases
from vmware_pilot.store.locks import Locks
from vmware_pilot.store.migrations import LATEST, migrate, schema_version
from vmware_pilot.store.outbox import Outbox
from vmware_pilot.store.sessions import SessionRows
from vmware_pilot.store.tables import workflows
from vmware_pilot.store.tasks import TaskRows
from vmware_pilot.store.texts import CatalogRow, PolicyRow, TemplateRows
from vmware_pilot.store.tokens import TokenRows
from vmware_pilot.store.trail import AuditTrail
from vmware_pilot.store.workflows import Workflows

__all__ = ["DatabaseState", "SqlStore", "StoreGauges", "database_state", "open_store"]

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StoreGauges:
    """Workflows by state, and the notification outbox's pending rows and the oldest one's age (s)."""

    workflows_by_state: dict[str, int]
    outbox_pending: int
    outbox_oldest_age: float


@dataclasses.dataclass(eq=False)
class SqlStore:
    """The narrow stores over one ``Database`` (``store.protocol.Store`` for the engine)."""

    database: Database
    workflows: Workflows
    audit: AuditTrail
    leases: Leases
    locks: Locks
    outbox: Outbox
    tokens: TokenRows
    sessions: SessionRows
    captures: CaptureRows
    templates: TemplateRows
    policy: PolicyRow
    catalog: CatalogRow
    tasks: TaskRows

    @classmethod
    def over(cls, database: Database) -> SqlStore:
        return cls(
            database,
            Workflows(database),
            AuditTrail(database),
            Leases(database),
            Locks(database),
            Outbox(database),
            TokenRows(database),
            SessionRows(database),
            CaptureRows(database),
            TemplateRows(database),
            PolicyRow(database),
            CatalogRow(database),
            TaskRows(database),
        )

    @property
    def shared(self) -> bool:
        """Whether other processes may use this store at once (a server, not a SQLite file)."""
        return self.database.shared

    def now(self) -> datetime:
        """The database's clock (``Database.now``): every deadline is judged on it."""
        return self.database.now()

    def gauges(self) -> StoreGauges:
        """What the database knows now, for the metrics (one snapshot: every replica reports the same)."""
        with self.database.transaction(write=False) as conn:
            rows = conn.execute(select(workflows.c.state, func.count()).group_by(workflows.c.state))
            by_state = {str(state): int(n) for state, n in rows}
            pending = int(outbox.status_counts(conn).get("pending", 0))
            return StoreGauges(by_state, pending, outbox.oldest_pending_age(conn))

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class DatabaseState:
    """What `vmware-pilot doctor` reads of the database, without creating or migrating it."""

    exists: bool
    version: int  # the migrations applied
    needed: int  # the oldest schema a build must know to use it
    latest: int
    clock_skew: float  # the database's clock minus this host's, in seconds


def database_state(settings: Settings) -> DatabaseState:
    """The schema version and clock of the database ``settings`` name (a SQLite file not created
    yet is reported as such and left uncreated); raises ``StoreError`` when it cannot be reached."""
    url = settings.resolved_database_url
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return DatabaseState(False, 0, 0, LATEST, 0.0)
    engine = make_engine(url, settings)
    try:
        with engine.connect() as conn:
            version = schema_version(conn)
            clock = conn.execute(text(f"SELECT {leases.db_clock(conn)}")).scalar()
            skew = float(clock) - time.time() if clock is not None else 0.0
    except SQLAlchemyError as exc:
        raise unavailable(engine, exc) from exc
    finally:
        engine.dispose()
    return DatabaseState(True, version.applied, version.needed, LATEST, skew)


def open_store(settings: Settings) -> SqlStore:
    """Open (creating and migrating as needed) the store at ``settings.resolved_database_url``.

    The pilot home is created 0700; a SQLite database and its WAL files are kept 0600.
    """
    home = settings.home_path
    url = settings.resolved_database_url
    path = sqlite_path(url)
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path is not None:
            secure_sqlite_files(path)
    except OSError as exc:
        where = "the pilot home" if path is None or path.parent == home else "the database folder"
        raise StoreError(
            f"Cannot open the workflow store: {where} cannot be used ({exc})",
            hint="Point VMWARE_PILOT_HOME (or VMWARE_PILOT_DATABASE_URL) at a folder you can write, "
            "or fix the permissions of the one named.",
        ) from exc
    try:
        home.chmod(0o700)
    except OSError as exc:
        _log.warning("cannot make %s private (mode 0700): %s", home, exc)
    engine = make_engine(url, settings)
    database = Database(engine)
    try:
        with private_umask(), database.transaction(write=True) as conn:
            migrate(conn)
    except (PilotError, IntegrityError) as exc:
        engine.dispose()
        if isinstance(exc, IntegrityError):
            raise unavailable(engine, exc) from exc
        raise
    if path is not None:
        secure_sqlite_files(path)
    return SqlStore.over(database)
