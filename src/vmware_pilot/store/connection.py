"""Building the SQLAlchemy engine: SQLite in WAL mode with private files, or PostgreSQL.

SQLite connections run in WAL mode with a busy timeout, foreign keys and full fsync on commit;
write transactions start with ``BEGIN IMMEDIATE`` so concurrent writers queue on the busy timeout
instead of failing mid-transaction. The database file and its ``-wal``/``-shm`` companions are
created 0600 (under umask 077) and re-chmod'ed when found looser.

PostgreSQL (``postgresql+psycopg://``) gets a bounded pool whose connections are tested before
use (pre-ping), so a restarted server costs the calls made while it is down and nothing after;
connect and statement timeouts keep a lost server from hanging a call. ``unavailable`` turns a
driver error into the StoreError a caller sees, with advice for the backend in use.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from vmware_pilot.config import Settings
from vmware_pilot.errors import DatabaseUnavailable, StoreError

__all__ = [
    "AUDIT_ORDER_LOCK",
    "BUSY_TIMEOUT_S",
    "WRITE_OPTION",
    "OutageLog",
    "describe",
    "make_engine",
    "private_umask",
    "secure_sqlite_files",
    "sqlite_path",
    "unavailable",
]

_log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 30.0
# Execution option that makes a SQLite transaction take the write lock at BEGIN.
WRITE_OPTION = "pilot_write"
# PostgreSQL advisory lock held from the audit INSERT to COMMIT (see store/workflows.py, Workflows._append).
AUDIT_ORDER_LOCK = 0x766D_7069_6C6F_7402
_FILE_MODE = 0o600
_SUFFIXES = ("", "-wal", "-shm", "-journal")


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL; None for another database or an in-memory one."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser()


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files created inside are readable by their owner only (the umask is process-wide)."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def secure_sqlite_files(path: Path) -> None:
    """Create the database file 0600 if missing and chmod it and its companions to 0600."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Never open (and close) an existing database file: closing any descriptor of it drops every
    # POSIX lock this process holds on it, SQLite's included. Another process would then take its
    # connection for the last one, checkpoint and remove the WAL under this process's feet (stale
    # reads, lost writes).
    if not path.exists():
        with private_umask():
            fd = os.open(path, os.O_CREAT | os.O_RDWR, _FILE_MODE)
        os.close(fd)
    for suffix in _SUFFIXES:
        companion = path.with_name(path.name + suffix)
        try:
            if companion.stat().st_mode & 0o777 != _FILE_MODE:
                companion.chmod(_FILE_MODE)
        except FileNotFoundError:
            continue
        except OSError as exc:  # not ours to change: say so, do not stop
            _log.warning("cannot make %s private (mode 0600): %s", companion, exc)


def _sqlite_events(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's BEGIN (below) delimit transactions instead of the driver's own.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = FULL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _postgres_options(settings: Settings) -> dict[str, Any]:
    statement_ms = int(settings.database_statement_timeout * 1000)
    return {
        "pool_size": settings.database_pool_size,
        "max_overflow": settings.database_pool_size,
        "pool_timeout": settings.database_pool_timeout,
        "pool_pre_ping": True,
        "pool_recycle": 1800,
        "connect_args": {
            "connect_timeout": settings.database_connect_timeout,
            "application_name": "vmware-pilot",
            "options": f"-c statement_timeout={statement_ms} -c lock_timeout={statement_ms}",
        },
    }


def make_engine(url: str, settings: Settings | None = None) -> Engine:
    """An engine for ``url``; SQLite files are created private and run in WAL mode.

    A URL that names no usable driver raises StoreError (with the hint), not a traceback.
    """
    try:
        parsed = make_url(url)
        backend = parsed.get_backend_name()
        kwargs: dict[str, Any] = {}
        if backend == "sqlite":
            kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
            if sqlite_path(url) is None:
                kwargs["poolclass"] = StaticPool
        elif backend == "postgresql":
            kwargs = _postgres_options(settings or Settings())
        engine = create_engine(url, **kwargs)
    except (ArgumentError, ImportError) as exc:
        raise StoreError(
            f"VMWARE_PILOT_DATABASE_URL cannot be used: {exc}",
            hint="Use postgresql+psycopg://USER@HOST:PORT/DATABASE, or leave it empty for the "
            "SQLite file pilot.db in the home.",
        ) from None
    if backend == "sqlite":
        _sqlite_events(engine)
    return engine


def describe(engine: Engine) -> str:
    """Which database, for messages (never the password)."""
    url = engine.url
    if url.get_backend_name() == "sqlite":
        return f"SQLite database {url.database or ':memory:'}"
    return f"{url.get_backend_name()} database {url.database} at {url.host or 'localhost'}:{url.port or 5432}"


def unavailable(engine: Engine, exc: SQLAlchemyError) -> StoreError:
    """The error a caller sees when the database failed under a call: what, where, what to do.

    Connection losses and timeouts are DatabaseUnavailable (retryable: nothing was committed);
    anything else is a plain StoreError. The driver's message is kept to one bounded line; the
    URL's password never appears (it is not part of ``describe``).
    """
    reason = " ".join(str(getattr(exc, "orig", None) or exc).split())[:300]
    where = describe(engine)
    if engine.dialect.name == "sqlite":
        if isinstance(exc, OperationalError):
            return DatabaseUnavailable(
                f"The workflow database is unavailable ({where}): {reason}",
                hint="Another process may hold it locked for long; retry. If it persists, check the "
                "database file and VMWARE_PILOT_DATABASE_URL.",
            )
        return StoreError(
            f"The workflow database could not be used ({where}): {reason}",
            hint="Check the database file and VMWARE_PILOT_DATABASE_URL.",
        )
    if isinstance(exc, OperationalError | InterfaceError) or getattr(exc, "connection_invalidated", False):
        return DatabaseUnavailable(
            f"The workflow database is unavailable ({where}): {reason}",
            hint="Nothing was changed; retry in a moment. If it persists, check that the PostgreSQL "
            "server runs and is reachable, and the host, port, user, password and database name in "
            "VMWARE_PILOT_DATABASE_URL (a password belongs in ~/.pgpass or PGPASSWORD).",
        )
    return StoreError(
        f"The workflow database could not be used ({where}): {reason}",
        hint="Check that VMWARE_PILOT_DATABASE_URL names a database this user may create tables in "
        "(GRANT CREATE ON SCHEMA public), and the PostgreSQL server log.",
    )


class OutageLog:
    """One log line when the database becomes unavailable and one when it answers again, however
    many calls fail in between (each caller still gets its retryable error). Nothing is logged
    before the first call that succeeded: a database unusable from the start is reported by
    whoever opened it (a start-up refusal is one ``error:`` line). Thread-safe."""

    def __init__(self, log: logging.Logger, where: str) -> None:
        self._log = log
        self._where = where
        self._guard = threading.Lock()
        self._armed = False  # a call has succeeded
        self._since: float | None = None  # monotonic time of the first failure of this outage
        self._failures = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, message: str) -> None:
        with self._guard:
            if not self._armed:
                return
            self._failures += 1
            if self._since is not None:
                return
            self._since = time.monotonic()
        self._log.error("%s; calls fail with a retryable error until it answers again", message)

    def recovered(self) -> None:
        if self._armed and not self.down:  # the usual case, without taking the lock
            return
        self._armed = True
        with self._guard:
            since, failures = self._since, self._failures
            self._since, self._failures = None, 0
        if since is None:  # another thread logged the recovery
            return
        lasted = time.monotonic() - since
        self._log.warning(
            "the %s answers again after %.0f s unavailable (%d call(s) failed meanwhile)",
            self._where,
            lasted,
            failures,
        )
