"""The database backends every store and engine test runs on: SQLite (the default) and PostgreSQL.

A test that asks for ``database`` (directly, or through the ``settings`` of tests/store and
tests/engine) runs once per backend. On PostgreSQL each test gets a database of its own on the
session's server (tests/support/pg_server.py), already migrated (``empty_database`` marks the tests that
need it empty), named in ``VMWARE_PILOT_DATABASE_URL`` so that processes the test starts use it too. ``@pytest.mark.backends("sqlite")`` limits a test to the backends
named, for what only one of them has (SQLite's file modes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.pool import NullPool

BACKENDS = ("sqlite", "postgresql")


@dataclass(frozen=True)
class Database:
    """Where one test's store lives; ``settings_url`` is "" for the default SQLite file."""

    backend: str
    settings_url: str
    raw_url: str

    @contextlib.contextmanager
    def raw(self) -> Iterator[Connection]:
        """A connection in autocommit, as someone editing the database behind vmware-pilot's back
        (SQLite: no foreign keys; PostgreSQL: the server's superuser)."""
        engine = create_engine(self.raw_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                yield conn
        finally:
            engine.dispose()

    def drop_append_only(self, conn: Connection) -> None:
        """Remove the triggers that refuse UPDATE and DELETE of audit events (an attacker with
        the database's owner rights can)."""
        if self.backend == "sqlite":
            for name in ("audit_events_no_update", "audit_events_no_delete"):
                conn.execute(text(f"DROP TRIGGER IF EXISTS {name}"))
        else:
            conn.execute(text("ALTER TABLE audit_events DISABLE TRIGGER USER"))

    def stored_bytes(self) -> bytes:
        """Everything the database holds, as bytes to search: the SQLite file and its WAL, or
        every row of every table on PostgreSQL."""
        if self.backend == "sqlite":
            path = Path(self.raw_url.removeprefix("sqlite:///"))
            files = [path, path.with_name(path.name + "-wal")]
            return b"".join(f.read_bytes() for f in files if f.exists())
        with self.raw() as conn:
            tables = conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            ).scalars()
            rows = [
                str(value)
                for table in list(tables)
                for value in conn.execute(text(f'SELECT CAST(t AS text) FROM "{table}" t')).scalars()
            ]
        return "\n".join(rows).encode()


def sqlite_database(home: Path) -> Database:
    return Database("sqlite", "", f"sqlite:///{home / 'pilot.db'}")
