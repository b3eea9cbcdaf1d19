"""Building the SQLAlchemy engine: SQLite in WAL mode with private files, or any other URL.

SQLite connections run in WAL mode with a busy timeout, foreign keys and full fsync on commit;
write transactions start with ``BEGIN IMMEDIATE`` so concurrent writers queue on the busy timeout
instead of failing mid-transaction. The database file and its ``-wal``/``-shm`` companions are
created 0600 (under umask 077) and re-chmod'ed when found looser.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

__all__ = [
    "BUSY_TIMEOUT_S",
    "WRITE_OPTION",
    "make_engine",
    "private_umask",
    "secure_sqlite_files",
    "sqlite_path",
]

_log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 30.0
# Execution option that makes a SQLite transaction take the write lock at BEGIN.
WRITE_OPTION = "pilot_write"
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


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite files are created private and run in WAL mode."""
    backend = make_url(url).get_backend_name()
    kwargs: dict[str, Any] = {}
    if backend == "sqlite":
        kwargs["connect_args"] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
        if sqlite_path(url) is None:
            kwargs["poolclass"] = StaticPool
    engine = create_engine(url, **kwargs)
    if backend == "sqlite":
        _sqlite_events(engine)
    return engine
