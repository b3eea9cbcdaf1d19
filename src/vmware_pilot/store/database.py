"""Database: the one database object of a process (the SQLAlchemy engine, its transactions, its clock).

The app owns one (``store.sql.open_store``); every narrow store (workflows, audit, leases, locks,
outbox, tokens, sessions, templates, the policy, the catalog cache, captures) runs its statements
in ``transaction`` of that one object, so a process has one connection pool whatever it uses.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from vmware_pilot.domain.clock import utcnow
from vmware_pilot.errors import DatabaseUnavailable, PilotError
from vmware_pilot.store.connection import WRITE_OPTION, OutageLog, describe, unavailable
from vmware_pilot.store.migrations import SchemaVersion, schema_version

__all__ = ["Database"]

_log = logging.getLogger(__name__)


class Database:
    """One SQLAlchemy engine, the transactions run on it and the database's clock."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # The database clock's lead over this host's, as last read (``now`` falls back on it).
        self._skew = timedelta(0)
        self._outage = OutageLog(_log, describe(engine))
        # One shared connection (an in-memory database) must not interleave transactions of
        # several threads; a pool hands each thread its own connection.
        self._serial: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if isinstance(engine.pool, StaticPool) else contextlib.nullcontext()
        )

    @property
    def shared(self) -> bool:
        """Whether other processes may use this database at once (a server, not a SQLite file)."""
        return self.engine.dialect.name != "sqlite"

    @contextlib.contextmanager
    def transaction(self, *, write: bool, single: bool = False) -> Iterator[Connection]:
        """One transaction. On PostgreSQL a read sees one snapshot (REPEATABLE READ, read only),
        so a load or an audit check never mixes states of several commits. ``single``: one
        read statement, sent in autocommit on PostgreSQL (its own implicit transaction: one round
        trip instead of BEGIN, the statement and COMMIT)."""
        try:
            with self._serial, self.engine.connect() as conn:
                postgresql = self.engine.dialect.name == "postgresql"
                if write:
                    conn.execution_options(**{WRITE_OPTION: True})
                elif single and postgresql:
                    conn.execution_options(isolation_level="AUTOCOMMIT")
                elif postgresql:
                    conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
                with conn.begin():  # in autocommit, SQLAlchemy's bookkeeping only: no BEGIN is sent
                    yield conn
        except (PilotError, IntegrityError):
            raise
        except SQLAlchemyError as exc:
            error = unavailable(self.engine, exc)
            if isinstance(error, DatabaseUnavailable):
                self._outage.failed(error.message)
            raise error from exc
        self._outage.recovered()

    def now(self) -> datetime:
        """The database's clock, aware UTC: every deadline (gate expiry, approvals' times, leases,
        the outbox) is judged on it, so replicas never compare their own clocks. SQLite: this
        host's clock. While PostgreSQL cannot be asked: this host's clock corrected by the lead
        the database's clock had at the last reading."""
        if self.engine.dialect.name != "postgresql":
            return utcnow()
        try:
            with self.transaction(write=False, single=True) as conn:  # a save reads it: one round trip
                value: datetime = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        except DatabaseUnavailable:
            return utcnow() + self._skew
        read = value.astimezone(UTC)
        self._skew = read - utcnow()
        return read

    def schema_version(self) -> SchemaVersion:
        """The schema the database records now (raises ``StoreError`` when unreachable)."""
        with self.transaction(write=False) as conn:
            return schema_version(conn)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
