"""Object locks: which workflow holds the objects its write steps name, judged in the database.

A row per object (its key, ``engine/conflicts.py`` builds it: kind, target and name) names the
workflow holding it and that workflow's run-lease key. A row is a live lock only while its
workflow is ``awaiting_approval`` (a gate) or ``rolling_back``, or ``running`` or ``pending``
with its run lease unexpired on the database's clock: a run holds its objects from the take
that starts it (still ``pending``) on, and a Pilot that died mid-run holds nothing once its lease
lapsed. A ``pending`` workflow no run walks holds nothing: without dispatch its last steps were
handed to its agent, and Pilot has nothing more to walk. Rows of a workflow are deleted in the
save that ends it (``Workflows.save``); the liveness rule makes any other row that outlived its
holding harmless.

``take`` takes every object of one workflow at once or none (so two workflows never wait for
each other: nothing is held while waiting). Takes are serialized across replicas: a
transaction-scoped advisory lock on PostgreSQL, the write lock of ``BEGIN IMMEDIATE`` on SQLite.
Taking an object from a run whose lease lapsed (``running`` or ``pending``) also moves that run
lease to a new owner with the next fence (its expiry untouched, so a sweeper still takes it at once): the paused Pilot that
held it can no longer hold its lease again, so it saves and sends nothing more (store/leases.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, bindparam, func, select, text

from vmware_pilot.store.leases import db_clock

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = ["LOCKS_LOCK", "Holder", "Locks", "holders", "release_all", "take"]

# The advisory lock key of object-lock takes on PostgreSQL (any fixed 64-bit number, unique to Pilot).
LOCKS_LOCK = 0x766D_7069_6C6F_7403
_BREAKER = "object-lock:"


@dataclass(frozen=True, slots=True)
class Holder:
    """The live holder of an object: the object's key, the workflow, its state and creator."""

    key: str
    workflow_id: str
    state: str
    created_by: str


# Live rows of other workflows among :keys (CLOCK: the database's clock).
_LIVE = (
    "SELECT l.object_key, l.workflow_id, l.run_key, w.state, w.created_by, "
    "(w.state IN ('running', 'pending') AND (r.expires_at IS NULL OR r.expires_at <= CLOCK)) AS lapsed "
    "FROM object_locks l JOIN workflows w ON w.id = l.workflow_id "
    "LEFT JOIN leases r ON r.workflow_id = l.run_key "
    "WHERE l.object_key IN :keys AND l.workflow_id <> :me "
    "AND w.state IN ('running', 'pending', 'awaiting_approval', 'rolling_back') "
    "ORDER BY l.object_key"
)
_UPSERT = (
    "INSERT INTO object_locks (object_key, workflow_id, run_key, taken_at) VALUES (:key, :me, :run, CLOCK) "
    "ON CONFLICT (object_key) DO UPDATE SET workflow_id = excluded.workflow_id, "
    "run_key = excluded.run_key, taken_at = excluded.taken_at"
)
# A lapsed run lease moves to a breaker owner, next fence, expiry kept (see the module docstring).
_BREAK = (
    "UPDATE leases SET owner = :breaker, fence = fence + 1 WHERE workflow_id = :run AND expires_at <= CLOCK"
)


def _rows(conn: Connection, me: str, keys: Sequence[str]) -> list[tuple[Holder, str, bool]]:
    query = text(_LIVE.replace("CLOCK", db_clock(conn))).bindparams(bindparam("keys", expanding=True))
    found = conn.execute(query, {"keys": list(keys), "me": me}).all()
    return [
        (
            Holder(str(r.object_key), str(r.workflow_id), str(r.state), str(r.created_by)),
            str(r.run_key),
            bool(r.lapsed),
        )
        for r in found
    ]


def holders(conn: Connection, me: str, keys: Sequence[str]) -> list[Holder]:
    """The live holders of ``keys`` other than workflow ``me``, by object key (none: all free)."""
    return [h for h, _, lapsed in _rows(conn, me, keys) if not lapsed] if keys else []


def take(conn: Connection, me: str, run_key: str, keys: Sequence[str]) -> Holder | None:
    """Take every object of ``keys`` for workflow ``me`` (whose run lease is ``run_key``), or
    none: the first live holder of one of them, nothing changed. Objects ``me`` held before and
    no longer names are let go."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(LOCKS_LOCK)))
    rows = _rows(conn, me, keys) if keys else []
    live = next((h for h, _, lapsed in rows if not lapsed), None)
    if live is not None:
        return live
    clock = db_clock(conn)
    for run in sorted({run for _, run, lapsed in rows if lapsed}):
        conn.execute(text(_BREAK.replace("CLOCK", clock)), {"run": run, "breaker": _BREAKER + me})
    drop = "DELETE FROM object_locks WHERE workflow_id = :me"
    if keys:
        conn.execute(
            text(drop + " AND object_key NOT IN :keys").bindparams(bindparam("keys", expanding=True)),
            {"me": me, "keys": list(keys)},
        )
        conn.execute(
            text(_UPSERT.replace("CLOCK", clock)), [{"key": k, "me": me, "run": run_key} for k in keys]
        )
    else:
        conn.execute(text(drop), {"me": me})
    return None


def release_all(conn: Connection, workflow_id: str) -> None:
    """Let go of every object ``workflow_id`` holds (in the save that ends it)."""
    conn.execute(text("DELETE FROM object_locks WHERE workflow_id = :id"), {"id": workflow_id})


class Locks:
    """Object locks (this module) over the app's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def take_locks(self, workflow_id: str, run_key: str, keys: Sequence[str]) -> Holder | None:
        """Take every object of ``keys`` for ``workflow_id`` (run lease ``run_key``) or none: the
        live holder of one of them then, nothing changed."""
        with self._db.transaction(write=True) as conn:
            return take(conn, workflow_id, run_key, sorted(set(keys)))

    def lock_holders(self, workflow_id: str, keys: Sequence[str]) -> list[Holder]:
        """The live holders of ``keys`` other than ``workflow_id`` (what review reports)."""
        with self._db.transaction(write=False) as conn:
            return holders(conn, workflow_id, sorted(set(keys)))
