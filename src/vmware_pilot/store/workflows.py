"""The workflow rows: creating, saving (optimistic concurrency by version) and reading workflows.

Every write is one transaction: the workflow row, guarded by its expected version, and the new
audit events chained to the workflow's last event; the row's seal (``audit.seal``) then covers
the last event and the row with its document, so an edit of either fails the audit check
(``store/trail.py``). A save also checks the run's fences (``store/leases.py``), lets go of the
objects of a workflow that ends (``store/locks.py``) and writes the change's notices to the
outbox (``store/outbox.py``), all in that transaction. Every read goes to the database; nothing
is cached in the process, so another process's writes are seen at once.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, case, func, select
from sqlalchemy.exc import IntegrityError

from vmware_pilot.domain.clock import from_iso, iso
from vmware_pilot.domain.enums import TERMINAL_STATES, WorkflowState
from vmware_pilot.domain.model import AuditEntry, Workflow
from vmware_pilot.errors import ConcurrencyConflict, CorruptRecord, InvalidInput, StoreError, WorkflowNotFound
from vmware_pilot.store import codec, leases, locks, outbox
from vmware_pilot.store.audit import GENESIS, SealedRow, event_hash, seal
from vmware_pilot.store.connection import AUDIT_ORDER_LOCK
from vmware_pilot.store.protocol import WorkflowSummary
from vmware_pilot.store.tables import audit_events, workflow_counts, workflow_ledger, workflows

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = [
    "Workflows",
    "chain_rows",
    "check_page",
    "committed",
    "loaded",
    "row_values",
    "sealed_row",
    "summary_of",
]

_SUMMARY = (
    workflows.c.id,
    workflows.c.type,
    workflows.c.state,
    workflows.c.created_at,
    workflows.c.updated_at,
)
_NEWEST_FIRST = (workflows.c.created_at.desc(), workflows.c.id.desc())
# What a save wrote: the event rows and their seqs.
_Written = tuple[list[dict[str, Any]], list[int]]
# The statements of every load and save, built once: building one costs more than running it.
_DOCUMENT = select(workflows.c.document, workflows.c.version).where(workflows.c.id == bindparam("wid"))
_EVENTS = (
    select(
        audit_events.c.seq,
        audit_events.c.ts,
        audit_events.c.actor,
        audit_events.c.action,
        audit_events.c.detail,
        audit_events.c.hash,
    )
    .where(audit_events.c.workflow_id == bindparam("wid"))
    .order_by(audit_events.c.seq)
)
_LAST_HASH = (
    select(audit_events.c.hash)
    .where(audit_events.c.workflow_id == bindparam("wid"))
    .order_by(audit_events.c.seq.desc())
    .limit(1)
)
_ACTIVE_COUNT = select(workflow_counts.c.value).where(workflow_counts.c.name == "active")
_MOVE_ACTIVE_COUNT = (
    workflow_counts.update()
    .where(workflow_counts.c.name == "active")
    .values(value=workflow_counts.c.value + bindparam("delta"))
)
_INSERT_WORKFLOW = workflows.insert()
_INSERT_LEDGER = workflow_ledger.insert()
_INSERT_EVENTS = audit_events.insert().returning(audit_events.c.seq, sort_by_parameter_order=True)


def _utc(dt: datetime) -> str:
    return iso(dt.astimezone(UTC))


def summary_of(row: Any) -> WorkflowSummary:
    """A summary of a row (anything with ``id``, ``type``, ``state``, ``created_at``, ``updated_at``)."""
    return {
        "id": row.id,
        "type": row.type,
        "state": row.state,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def sealed_row(workflow_id: str, values: Any) -> SealedRow:
    """The sealed parts of a workflow row, from its values (a dict or a result row)."""
    get = values.__getitem__ if isinstance(values, dict) else functools.partial(getattr, values)
    return SealedRow(
        workflow_id=workflow_id,
        type=get("type"),
        state=get("state"),
        is_active=bool(get("is_active")),
        created_at=get("created_at"),
        updated_at=get("updated_at"),
        created_by=get("created_by"),
        document=get("document"),
    )


def _last_hash(conn: Connection, workflow_id: str) -> str:
    """The hash of the workflow's newest audit event (GENESIS when it has none)."""
    return str(conn.execute(_LAST_HASH, {"wid": workflow_id}).scalar() or GENESIS)


def check_page(limit: int | None, offset: int) -> None:
    if limit is not None and limit < 0:
        raise InvalidInput(f"limit must be 0 or more, got {limit}", field="limit", hint="Omit limit for all.")
    if offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset}", field="offset", hint="Start at 0.")


def refuse_stored(wf: Workflow) -> None:
    """Refuse to create a workflow that is already stored (its version is not 0)."""
    if wf.version != 0:
        raise StoreError(
            f"Workflow '{wf.id}' is already stored (version {wf.version})",
            hint="Use save() to update a stored workflow.",
            workflow_id=wf.id,
        )


def chain_rows(wf: Workflow, head: str) -> list[dict[str, Any]]:
    """The audit rows of ``wf.new_events``, each chained to the one before (the first to ``head``)."""
    rows = []
    for entry in wf.new_events:
        ts = iso(entry.ts)
        detail = codec.redact_detail(entry.detail, keep=(entry.actor, *entry.names))
        digest = event_hash(head, wf.id, ts, entry.actor, entry.action, detail)
        rows.append(
            {
                "workflow_id": wf.id,
                "ts": ts,
                "actor": entry.actor,
                "action": entry.action,
                "detail": detail,
                "prev_hash": head,
                "hash": digest,
            }
        )
        head = digest
    return rows


def row_values(wf: Workflow, rows: list[dict[str, Any]], last: str, count: int) -> dict[str, Any]:
    """The row's values, sealed over ``last`` (the hash the new events chain from) and the row."""
    values: dict[str, Any] = {
        "type": wf.workflow_type,
        "state": wf.state.value,
        "is_active": wf.state not in TERMINAL_STATES,
        "created_at": _utc(wf.created_at),
        "updated_at": _utc(wf.updated_at),
        "created_by": wf.created_by,
        "document": codec.encode(wf),
        "audit_count": count + len(rows),
    }
    sealed = sealed_row(wf.id, values)
    values["audit_head"] = seal(rows[-1]["hash"] if rows else last, values["audit_count"], sealed)
    return values


def committed(wf: Workflow, rows: list[dict[str, Any]], seqs: list[int]) -> None:
    """After the commit: the events get their seq and hash, ``wf`` its new version."""
    for entry, row, seq in zip(wf.new_events, rows, seqs, strict=True):
        entry.seq, entry.hash, entry.detail = seq, row["hash"], row["detail"]
    wf.new_events.clear()
    wf.version += 1
    wf.stored_active = wf.state not in TERMINAL_STATES


def loaded(workflow_id: str, document: str, version: int, events: Iterable[Any]) -> Workflow:
    """The workflow of a stored document and its events (each with ``seq``, ``ts``, ``actor``,
    ``action``, ``detail`` and ``hash``, oldest first), as loaded."""
    log = []
    for ev in events:
        try:
            ts = from_iso(ev.ts)
        except ValueError as exc:
            raise CorruptRecord(workflow_id, f"audit event {ev.seq} has a bad timestamp") from exc
        if ts is None:
            raise CorruptRecord(workflow_id, f"audit event {ev.seq} has no timestamp")
        log.append(
            AuditEntry(ts=ts, action=ev.action, detail=ev.detail, actor=ev.actor, seq=ev.seq, hash=ev.hash)
        )
    wf = codec.decode(workflow_id, document, version=version, audit_log=log)
    wf.stored_active = wf.state not in TERMINAL_STATES
    return wf


class Workflows:
    """The workflow rows over the app's ``Database`` (see the module doc)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    @staticmethod
    def _append(conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
        """Insert the events in one statement; their seqs, in order.

        On PostgreSQL a sequence hands out numbers at INSERT, not at COMMIT; the lock held from
        here to the commit makes seq order commit order, so an export that resumes after the
        highest seq it saw misses nothing. (SQLite has one writer at a time anyway.)
        """
        if not rows:
            return []
        if conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(AUDIT_ORDER_LOCK)))
        return [int(seq) for seq in conn.execute(_INSERT_EVENTS, rows).scalars()]

    @staticmethod
    def _count_active(conn: Connection, delta: int) -> None:
        """Move the maintained active count by ``delta`` in the caller's transaction (the row
        update also orders concurrent writers that change it)."""
        if delta:
            conn.execute(_MOVE_ACTIVE_COUNT, {"delta": delta})

    @classmethod
    def _recount_active(cls, conn: Connection, wf: Workflow) -> None:
        """Move the maintained active count by what this save changes. The version guard makes
        ``wf.stored_active`` (as loaded) the stored value, so most saves cost no statement here;
        without it the stored row is read in the same statement. A save that then fails its
        guard rolls this back with it."""
        now = 0 if wf.state in TERMINAL_STATES else 1
        if wf.stored_active is not None:
            cls._count_active(conn, now - int(wf.stored_active))
            return
        stored = select(case((workflows.c.is_active, 1), else_=0)).where(workflows.c.id == wf.id)
        conn.execute(
            workflow_counts.update()
            .where(workflow_counts.c.name == "active")
            .values(value=workflow_counts.c.value + now - func.coalesce(stored.scalar_subquery(), now))
        )

    def create(self, wf: Workflow) -> None:
        """Insert a new workflow (version 0 → 1) with its pending audit events."""
        refuse_stored(wf)
        rows = chain_rows(wf, GENESIS)
        values = {"id": wf.id, "version": 1, **row_values(wf, rows, GENESIS, 0)}
        try:
            with self._db.transaction(write=True) as conn:
                # Statements built once, values as parameters: building ``.values()`` each time cost
                # more than the INSERTs.
                conn.execute(_INSERT_WORKFLOW, values)
                conn.execute(_INSERT_LEDGER, {"workflow_id": wf.id, "created_at": values["created_at"]})
                self._count_active(conn, 1 if values["is_active"] else 0)
                seqs = self._append(conn, rows)
        except IntegrityError as exc:
            raise StoreError(
                f"Workflow id '{wf.id}' already exists",
                hint="Create the workflow again: it gets a new id.",
                workflow_id=wf.id,
            ) from exc
        committed(wf, rows, seqs)

    def save(
        self,
        wf: Workflow,
        fences: Sequence[leases.Fence] = (),
        notices: Sequence[tuple[str, str, bytes]] = (),
    ) -> None:
        """Update ``wf`` if the stored version is still ``wf.version``; else ConcurrencyConflict.
        With ``fences`` (lease key, fence), also only while each is still that lease's fence;
        else LeaseLost and nothing is written. ``notices`` (event id, workflow id, JSON body) go
        into the notification outbox in the same transaction (store/outbox.py)."""
        if wf.version < 1:
            raise StoreError(
                f"Workflow '{wf.id}' was never stored", hint="Use create() first.", workflow_id=wf.id
            )
        with self._db.transaction(write=True) as conn:
            leases.check_fences(conn, wf.id, fences)
            self._recount_active(conn, wf)
            rows, seqs = self._update_as_loaded(conn, wf) or self._update_as_stored(conn, wf)
            if wf.state in TERMINAL_STATES and wf.stored_active is not False:
                locks.release_all(conn, wf.id)  # the workflow ends: its objects are free
            outbox.enqueue(conn, notices)
        committed(wf, rows, seqs)

    def _update_as_loaded(self, conn: Connection, wf: Workflow) -> _Written | None:
        """The usual save in two statements: the row's UPDATE and the events' INSERT, chained
        from the last event ``wf`` was loaded with. The UPDATE also requires the stored event
        count to be the loaded one, so events deleted behind vmware-pilot's back are never sealed
        over; None (nothing written) when it matched no row: ``_update_as_stored`` decides."""
        known = wf.audit_log[: len(wf.audit_log) - len(wf.new_events)]
        if any(not e.hash for e in known):
            return None
        last = known[-1].hash if known else GENESIS
        rows = chain_rows(wf, last)
        values = {"version": wf.version + 1, **row_values(wf, rows, last, len(known))}
        updated = conn.execute(
            workflows.update()
            .where(
                workflows.c.id == wf.id,
                workflows.c.version == wf.version,
                workflows.c.audit_count == len(known),
            )
            .values(**values)
        )
        if updated.rowcount != 1:
            return None
        return rows, self._append(conn, rows)

    def _update_as_stored(self, conn: Connection, wf: Workflow) -> _Written:
        """The save chained from the stored last event and count (read here), or the refusal."""
        current = conn.execute(
            select(workflows.c.version, workflows.c.audit_count).where(workflows.c.id == wf.id)
        ).first()
        if current is None:
            raise WorkflowNotFound(wf.id)
        if current.version != wf.version:
            raise ConcurrencyConflict(wf.id, wf.version, current.version)
        last = _last_hash(conn, wf.id)
        rows = chain_rows(wf, last)
        values = {"version": wf.version + 1, **row_values(wf, rows, last, current.audit_count)}
        # The version guard also holds where the SELECT above took no lock.
        updated = conn.execute(
            workflows.update()
            .where(workflows.c.id == wf.id, workflows.c.version == wf.version)
            .values(**values)
        )
        if updated.rowcount != 1:
            raise ConcurrencyConflict(wf.id, wf.version, None)
        return rows, self._append(conn, rows)

    def load(self, workflow_id: str) -> Workflow:
        """The stored workflow with its audit log (oldest first); tool names renamed to current."""
        with self._db.transaction(write=False) as conn:
            row = conn.execute(_DOCUMENT, {"wid": workflow_id}).first()
            if row is None:
                raise WorkflowNotFound(workflow_id)
            events = conn.execute(_EVENTS, {"wid": workflow_id}).all()
        return loaded(workflow_id, row.document, row.version, events)

    def list_active(self, limit: int | None = None, offset: int = 0) -> list[WorkflowSummary]:
        """Workflows not completed/failed/cancelled (drafts included), newest created first."""
        check_page(limit, offset)
        query = select(*_SUMMARY).where(workflows.c.is_active.is_(True)).order_by(*_NEWEST_FIRST)
        with self._db.transaction(write=False) as conn:
            return [summary_of(r) for r in conn.execute(query.limit(limit).offset(offset or None))]

    def count_active(self) -> int:
        """The number of active workflows: one maintained row, not a scan of the table."""
        with self._db.transaction(write=False) as conn:
            return int(conn.execute(_ACTIVE_COUNT).scalar_one())

    def list_all(
        self,
        limit: int | None = None,
        offset: int = 0,
        states: Sequence[WorkflowState] | None = None,
    ) -> list[WorkflowSummary]:
        """Every workflow (or those in ``states``), newest created first."""
        check_page(limit, offset)
        query = select(*_SUMMARY).order_by(*_NEWEST_FIRST)
        if states is not None:
            query = query.where(workflows.c.state.in_([WorkflowState(s).value for s in states]))
        with self._db.transaction(write=False) as conn:
            return [summary_of(r) for r in conn.execute(query.limit(limit).offset(offset or None))]

    def versions(self, workflow_ids: Collection[str]) -> dict[str, int]:
        """The stored version of each of ``workflow_ids`` that exists: a cheap probe for changes."""
        if not workflow_ids:
            return {}
        query = select(workflows.c.id, workflows.c.version).where(workflows.c.id.in_(list(workflow_ids)))
        with self._db.transaction(write=False) as conn:
            return {str(r.id): int(r.version) for r in conn.execute(query)}

    def workflow_ids(self, prefix: str = "", limit: int = 100) -> list[str]:
        """Ids starting with ``prefix`` (taken literally), newest created first, at most ``limit``."""
        query = select(workflows.c.id).order_by(*_NEWEST_FIRST).limit(limit)
        if prefix:
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(workflows.c.id.like(f"{escaped}%", escape="\\"))
        with self._db.transaction(write=False) as conn:
            return [str(r.id) for r in conn.execute(query)]
