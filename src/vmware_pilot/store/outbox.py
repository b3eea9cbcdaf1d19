"""The notification outbox: webhook events written in the transaction of the workflow change that
announces them, delivered later by one sender at a time across all Pilot processes.

A row is ``pending`` until a sender delivers it (``delivered``) or gives up after the configured
attempts (``dropped``). A sender claims a due row by pushing ``claimed_until`` ahead on the
database's clock (``SELECT … FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite's single writer makes
the claim atomic), so a claim held by a process that died simply expires and another process
delivers the row. Delivery is therefore at least once; the row's ``event_id`` is the event's
``Idempotency-Key``. Rows ``delivered`` or ``dropped`` are deleted once older than the retention
(``prune``); a pending row is never pruned. The body is the event JSON as sent (no secret: signatures are computed at
send time from the secret the sender holds in memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

from vmware_pilot.store.leases import db_clock

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = [
    "Claimed",
    "Outbox",
    "claim",
    "enqueue",
    "finish",
    "oldest_pending_age",
    "prune",
    "retry_later",
    "status_counts",
]


@dataclass(frozen=True, slots=True)
class Claimed:
    event_id: str
    body: bytes
    attempts: int  # attempts made before this one


_INSERT = (
    "INSERT INTO notifications (event_id, workflow_id, body, created_at, next_at, claimed_until, "
    "attempts, status) VALUES (:event_id, :workflow_id, :body, CLOCK, CLOCK, 0, 0, 'pending')"
)

_DUE = (
    "SELECT event_id, body, attempts FROM notifications WHERE status = 'pending' "
    "AND next_at <= CLOCK AND claimed_until <= CLOCK ORDER BY created_at, event_id LIMIT 1"
)
_CLAIM = "UPDATE notifications SET claimed_until = CLOCK + :s WHERE event_id = :id"
_RETRY = (
    "UPDATE notifications SET attempts = :n, next_at = CLOCK + :d, claimed_until = 0 WHERE event_id = :id"
)


def enqueue(conn: Connection, events: Sequence[tuple[str, str, bytes]]) -> None:
    """Insert ``(event_id, workflow_id, body)`` rows in the caller's transaction."""
    if not events:
        return
    query = text(_INSERT.replace("CLOCK", db_clock(conn)))
    conn.execute(query, [{"event_id": e, "workflow_id": w, "body": b.decode()} for e, w, b in events])


def claim(conn: Connection, lease_seconds: float) -> Claimed | None:
    """Claim the oldest due pending row for ``lease_seconds`` (None: nothing due)."""
    clock = db_clock(conn)
    query = _DUE.replace("CLOCK", clock)
    if conn.dialect.name == "postgresql":
        query += " FOR UPDATE SKIP LOCKED"
    row = conn.execute(text(query)).first()
    if row is None:
        return None
    conn.execute(
        text(_CLAIM.replace("CLOCK", clock)),
        {"s": lease_seconds, "id": row.event_id},
    )
    return Claimed(str(row.event_id), str(row.body).encode(), int(row.attempts))


def finish(conn: Connection, event_id: str, status: str, attempts: int) -> None:
    """Mark a claimed row ``delivered`` or ``dropped`` after ``attempts`` attempts in all."""
    conn.execute(
        text("UPDATE notifications SET status = :st, attempts = :n, claimed_until = 0 WHERE event_id = :id"),
        {"st": status, "n": attempts, "id": event_id},
    )


def retry_later(conn: Connection, event_id: str, attempts: int, delay: float) -> None:
    """Release a claimed row for another attempt ``delay`` seconds from now (any process)."""
    conn.execute(
        text(_RETRY.replace("CLOCK", db_clock(conn))),
        {"n": attempts, "d": delay, "id": event_id},
    )


def prune(conn: Connection, older_than: float) -> int:
    """Delete ``delivered`` and ``dropped`` rows created more than ``older_than`` seconds ago (on
    the database's clock); return how many. Pending rows stay, however old."""
    query = "DELETE FROM notifications WHERE status IN ('delivered', 'dropped') AND created_at < CLOCK - :age"
    done = conn.execute(text(query.replace("CLOCK", db_clock(conn))), {"age": older_than})
    return int(done.rowcount)


def status_counts(conn: Connection) -> Mapping[str, int]:
    rows = conn.execute(text("SELECT status, COUNT(*) AS n FROM notifications GROUP BY status"))
    counts: dict[str, Any] = {str(r.status): int(r.n) for r in rows}
    return counts


def oldest_pending_age(conn: Connection) -> float:
    """Seconds (on the database's clock) since the oldest pending row was queued; 0 when none is."""
    query = "SELECT CLOCK - MIN(created_at) FROM notifications WHERE status = 'pending'"
    age = conn.execute(text(query.replace("CLOCK", db_clock(conn)))).scalar()
    return max(0.0, float(age)) if age is not None else 0.0


class Outbox:
    """The notification outbox (this module) over the app's ``Database``; the workflow store
    writes a change's notices in the change's own transaction (``enqueue``)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def enqueue_notices(self, notices: Sequence[tuple[str, str, bytes]]) -> None:
        with self._db.transaction(write=True) as conn:
            enqueue(conn, notices)

    def claim_notice(self, lease_seconds: float) -> Claimed | None:
        with self._db.transaction(write=True) as conn:
            return claim(conn, lease_seconds)

    def finish_notice(self, event_id: str, status: str, attempts: int) -> None:
        with self._db.transaction(write=True) as conn:
            finish(conn, event_id, status, attempts)

    def retry_notice(self, event_id: str, attempts: int, delay: float) -> None:
        with self._db.transaction(write=True) as conn:
            retry_later(conn, event_id, attempts, delay)

    def prune_notices(self, older_than: float) -> int:
        with self._db.transaction(write=True) as conn:
            return prune(conn, older_than)

    def notice_counts(self) -> Mapping[str, int]:
        with self._db.transaction(write=False) as conn:
            return status_counts(conn)
