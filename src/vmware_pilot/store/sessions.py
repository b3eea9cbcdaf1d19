"""Console sign-in sessions as rows, so every replica sharing the database knows them.

A row is keyed by the SHA-256 of the session's cookie value (the value itself is never stored,
so a copy of the database signs nobody in), holds the signed-in identity as JSON and its expiry
in seconds since the epoch *on the database's clock* (replicas never compare their own clocks).
Signing out deletes the row, which every replica sees at its next request. Rows are kept a
while past their expiry, so a late request can be told its session expired, then purged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, TextClause, text

from vmware_pilot.store.leases import db_clock

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = ["SessionRow", "SessionRows", "close", "find", "key_of", "open_session", "purge"]


def key_of(cookie: str) -> str:
    """The stored key of a cookie value: its SHA-256, hex."""
    return hashlib.sha256(cookie.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A stored session: ``remaining`` seconds until expiry on the database's clock (<= 0: expired)."""

    identity: dict[str, Any]
    remaining: float

    @property
    def expired(self) -> bool:
        return self.remaining <= 0


# CLOCK stands for the database's clock (``db_clock``), as in store/leases.py.
_OPEN = (
    "INSERT INTO console_sessions (session_hash, identity, created_at, expires_at) "
    "VALUES (:key, :identity, CLOCK, CLOCK + :s)"
)
_FIND = "SELECT identity, expires_at - CLOCK AS remaining FROM console_sessions WHERE session_hash = :key"
_PURGE = "DELETE FROM console_sessions WHERE expires_at < CLOCK - :s"


def _sql(conn: Connection, query: str) -> TextClause:
    return text(query.replace("CLOCK", db_clock(conn)))


def open_session(conn: Connection, cookie: str, identity: dict[str, Any], seconds: float) -> None:
    values = {"key": key_of(cookie), "identity": json.dumps(identity, sort_keys=True), "s": seconds}
    conn.execute(_sql(conn, _OPEN), values)


def find(conn: Connection, cookie: str) -> SessionRow | None:
    row = conn.execute(_sql(conn, _FIND), {"key": key_of(cookie)}).first()
    if row is None:
        return None
    try:
        identity = json.loads(row.identity)
    except ValueError:
        return None
    return SessionRow(identity if isinstance(identity, dict) else {}, float(row.remaining))


def close(conn: Connection, cookie: str) -> bool:
    """Delete the session (sign-out); False when there was none."""
    done = conn.execute(
        text("DELETE FROM console_sessions WHERE session_hash = :key"), {"key": key_of(cookie)}
    )
    return done.rowcount == 1


def purge(conn: Connection, older_than: float) -> int:
    """Delete sessions that expired more than ``older_than`` seconds ago; how many."""
    return int(conn.execute(_sql(conn, _PURGE), {"s": older_than}).rowcount or 0)


class SessionRows:
    """Console sign-in sessions (this module) over the app's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def open_session(self, cookie: str, identity: dict[str, Any], seconds: float, keep: float) -> None:
        """Store a session for ``seconds``; sessions expired more than ``keep`` seconds ago go."""
        with self._db.transaction(write=True) as conn:
            purge(conn, keep)
            open_session(conn, cookie, identity, seconds)

    def find_session(self, cookie: str) -> SessionRow | None:
        with self._db.transaction(write=False) as conn:
            return find(conn, cookie)

    def close_session(self, cookie: str) -> bool:
        with self._db.transaction(write=True) as conn:
            return close(conn, cookie)
