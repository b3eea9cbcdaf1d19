"""Run leases: which Pilot process may write a workflow's in-flight steps, judged on the database's clock.

A lease row holds the owner (a process id unique across hosts and restarts), an expiry in
seconds since the epoch *on the database's clock* (so replicas never compare their own clocks),
and a fencing number that grows by one at every acquisition. The owner renews the expiry while
its step is in flight. Another process may take the lease only once it has expired, which bumps
the fence: a save made with the old fence is then refused (``LeaseLost``), so a replica that
lost its lease writes nothing more for that step. An expired lease is never renewed: its old
holder may only take it again (``hold``: a new fence) while nobody else has taken it since.
Released leases keep their row and fence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, select, text

from vmware_pilot.errors import StoreError
from vmware_pilot.store.tables import leases

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = [
    "Fence",
    "Lease",
    "LeaseLost",
    "Leases",
    "acquire",
    "check_fences",
    "db_clock",
    "hold",
    "holder",
    "release",
]

# A lease row's key and the fencing number a save is made under.
Fence = tuple[str, int]


class LeaseLost(StoreError):
    """The save's fence is no longer the workflow's: another process took over the run."""

    def __init__(self, workflow_id: str, fence: int, current: int | None) -> None:
        super().__init__(
            f"Workflow '{workflow_id}' was taken over by another Pilot process (lease {fence} "
            f"superseded by {current}); this process wrote nothing more for its step",
            hint=f"get_workflow_status('{workflow_id}') shows where it stands.",
            workflow_id=workflow_id,
        )


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease as stored: ``remaining`` seconds until expiry on the database's clock (<= 0: expired)."""

    owner: str
    fence: int
    remaining: float

    @property
    def expired(self) -> bool:
        return self.remaining <= 0


# CLOCK stands for the database's clock (``db_clock``).
_ACQUIRE = (
    "INSERT INTO leases (workflow_id, owner, expires_at, fence) VALUES (:id, :owner, CLOCK + :s, 1) "
    "ON CONFLICT (workflow_id) DO UPDATE SET owner = excluded.owner, "
    "expires_at = excluded.expires_at, fence = leases.fence + 1 "
    "WHERE leases.expires_at <= CLOCK OR leases.owner = excluded.owner RETURNING fence"
)
# Renew a live lease; take a lapsed one again with the next fence (only while it is still this
# owner's: nobody took it in between). ``fence >= :fence``, not ``=``: an owner is unique to one
# run, so a higher fence under the same owner is this run's own earlier retake whose commit
# landed although its answer was lost (a connection dropped at the commit).
_HOLD = (
    "UPDATE leases SET fence = CASE WHEN expires_at > CLOCK THEN fence ELSE fence + 1 END, "
    "expires_at = CLOCK + :s WHERE workflow_id = :id AND owner = :owner AND fence >= :fence "
    "RETURNING fence"
)


def db_clock(conn: Connection) -> str:
    """The database's clock in seconds since the epoch, as SQL."""
    if conn.dialect.name == "postgresql":
        return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"
    return "((julianday('now') - 2440587.5) * 86400.0)"


def acquire(conn: Connection, workflow_id: str, owner: str, seconds: float) -> int | None:
    """Take the lease (free, expired, or already ``owner``'s) and return its new fence; None
    when another owner holds it unexpired."""
    query = text(_ACQUIRE.replace("CLOCK", db_clock(conn)))
    fence = conn.execute(query, {"id": workflow_id, "owner": owner, "s": seconds}).scalar()
    return None if fence is None else int(fence)


def hold(conn: Connection, workflow_id: str, owner: str, fence: int, seconds: float) -> int | None:
    """Keep the lease ``seconds`` more: renewed while live (same fence), taken again once lapsed
    (the next fence, so saves under the old one are refused); None when it is no longer
    ``owner``'s: another process took it."""
    query = text(_HOLD.replace("CLOCK", db_clock(conn)))
    kept = conn.execute(query, {"id": workflow_id, "owner": owner, "fence": fence, "s": seconds}).scalar()
    return None if kept is None else int(kept)


def release(conn: Connection, workflow_id: str, owner: str, fence: int) -> None:
    """Let the lease expire now (kept as a row: its fence only ever grows)."""
    conn.execute(
        text(
            "UPDATE leases SET expires_at = 0 WHERE workflow_id = :id AND owner = :owner AND fence = :fence"
        ),
        {"id": workflow_id, "owner": owner, "fence": fence},
    )


def holder(conn: Connection, workflow_id: str) -> Lease | None:
    query = "SELECT owner, fence, expires_at - CLOCK AS remaining FROM leases WHERE workflow_id = :id"
    row = conn.execute(text(query.replace("CLOCK", db_clock(conn))), {"id": workflow_id}).first()
    return None if row is None else Lease(str(row.owner), int(row.fence), float(row.remaining))


def check_fences(conn: Connection, workflow_id: str, fences: Sequence[Fence]) -> None:
    """Refuse (LeaseLost) unless each (lease key, fence) of the save of ``workflow_id`` is still
    that lease's fence, in one
    statement; the rows stay locked to the end of the transaction, so no takeover slips in
    before the commit."""
    if not fences:
        return
    query = select(leases.c.workflow_id, leases.c.fence).where(
        leases.c.workflow_id.in_([key for key, _ in fences])
    )
    if conn.dialect.name == "postgresql":
        query = query.order_by(leases.c.workflow_id).with_for_update()
    current = {str(key): int(fence) for key, fence in conn.execute(query)}
    for key, fence in fences:
        if current.get(key) != fence:
            raise LeaseLost(workflow_id, fence, current.get(key))


class _Taken(StoreError):
    """Inside ``Leases.hold_leases``: one of the leases is another owner's; undo the others."""

    def __init__(self) -> None:
        super().__init__("lease taken")


class Leases:
    """Run and step leases (this module) over the app's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def acquire_lease(self, workflow_id: str, owner: str, seconds: float) -> int | None:
        """Take the run lease of ``workflow_id`` for ``seconds``; its fence, or None if held."""
        with self._db.transaction(write=True) as conn:
            return acquire(conn, workflow_id, owner, seconds)

    def hold_leases(self, held: Sequence[tuple[str, str, int]], seconds: float) -> list[int] | None:
        """Keep each lease (key, owner, fence) ``seconds`` more, in one transaction (``hold``):
        their fences now (a lapsed one was taken again with the next); None, and nothing
        changed, when any of them was taken by another owner."""
        try:
            with self._db.transaction(write=True) as conn:
                kept = [hold(conn, key, owner, fence, seconds) for key, owner, fence in held]
                if any(fence is None for fence in kept):
                    raise _Taken  # rolls the others back
        except _Taken:
            return None
        return [fence for fence in kept if fence is not None]

    def release_lease(self, workflow_id: str, owner: str, fence: int) -> None:
        with self._db.transaction(write=True) as conn:
            release(conn, workflow_id, owner, fence)

    def lease(self, workflow_id: str) -> Lease | None:
        """The workflow's lease as stored (None: never leased)."""
        with self._db.transaction(write=False) as conn:
            return holder(conn, workflow_id)
