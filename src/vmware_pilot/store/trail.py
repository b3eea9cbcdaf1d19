"""The audit trail as stored: every event in commit order, and the check of every workflow's chain.

The chain itself (hashes, seals, what a broken chain looks like) is ``store/audit.py``; this
reads the rows it checks, over the app's ``Database``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Row, func, select, text

from vmware_pilot.errors import WorkflowNotFound
from vmware_pilot.store.audit import ChainHead, check_chain, numbering_problem, vanished_problem
from vmware_pilot.store.protocol import AuditRecord, AuditReport
from vmware_pilot.store.tables import audit_events, workflow_ledger, workflows
from vmware_pilot.store.workflows import sealed_row

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = ["AuditTrail", "chain_report"]

_BATCH = 1000


def _record(row: Row[*tuple[Any, ...]]) -> AuditRecord:
    return AuditRecord(
        seq=row.seq,
        workflow_id=row.workflow_id,
        ts=row.ts,
        actor=row.actor,
        action=row.action,
        detail=row.detail,
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


class AuditTrail:
    """Reading and verifying the stored audit events (see the module doc)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def _require(self, conn: Connection, workflow_id: str) -> None:
        """WorkflowNotFound unless the workflow has a row, events, or was ever created (ledger)."""
        for query in (
            select(workflows.c.id).where(workflows.c.id == workflow_id),
            select(audit_events.c.seq).where(audit_events.c.workflow_id == workflow_id).limit(1),
            select(workflow_ledger.c.workflow_id).where(workflow_ledger.c.workflow_id == workflow_id),
        ):
            if conn.execute(query).first() is not None:
                return
        raise WorkflowNotFound(workflow_id)

    @staticmethod
    def _vanished(conn: Connection, workflow_id: str | None) -> list[str]:
        """Workflows the ledger knows whose row and every event are gone, in creation order."""
        ledger = workflow_ledger.c.workflow_id
        query = (
            select(ledger)
            .where(
                ledger.not_in(select(workflows.c.id)),
                ledger.not_in(select(audit_events.c.workflow_id).distinct()),
            )
            .order_by(workflow_ledger.c.created_at, ledger)
        )
        if workflow_id is not None:
            query = query.where(ledger == workflow_id)
        return [str(r[0]) for r in conn.execute(query)]

    def audit_events(self, workflow_id: str | None = None) -> Iterator[AuditRecord]:
        """Stored audit events in commit order (seq), read in batches; one workflow's when named."""
        last = 0
        while True:
            query = select(audit_events).where(audit_events.c.seq > last).order_by(audit_events.c.seq)
            if workflow_id is not None:
                query = query.where(audit_events.c.workflow_id == workflow_id)
            with self._db.transaction(write=False) as conn:
                if workflow_id is not None and last == 0:
                    self._require(conn, workflow_id)
                batch = [_record(r) for r in conn.execute(query.limit(_BATCH))]
            yield from batch
            if len(batch) < _BATCH:
                return
            last = batch[-1].seq

    def _events_of(self, conn: Connection, ids: Sequence[str]) -> dict[str, list[AuditRecord]]:
        grouped: dict[str, list[AuditRecord]] = {i: [] for i in ids}
        query = (
            select(audit_events)
            .where(audit_events.c.workflow_id.in_(ids))
            .order_by(audit_events.c.workflow_id, audit_events.c.seq)
        )
        for r in conn.execute(query):
            grouped[r.workflow_id].append(_record(r))
        return grouped

    @staticmethod
    def _heads_of(conn: Connection, ids: Sequence[str]) -> dict[str, ChainHead]:
        """Seal, event count and sealed parts of each stored row among ``ids``."""
        query = select(
            workflows.c.id,
            workflows.c.audit_head,
            workflows.c.audit_count,
            workflows.c.type,
            workflows.c.state,
            workflows.c.is_active,
            workflows.c.created_at,
            workflows.c.updated_at,
            workflows.c.created_by,
            workflows.c.document,
        ).where(workflows.c.id.in_(ids))
        return {
            r.id: ChainHead(r.audit_head, r.audit_count, sealed_row(r.id, r)) for r in conn.execute(query)
        }

    @staticmethod
    def _numbering(conn: Connection) -> str:
        """SQLite issues seq 1, 2, 3… (a rolled-back insert gives its number back), and audit
        events are never deleted, so a gap or a lower highest seq means events were deleted."""
        if conn.dialect.name != "sqlite":
            return ""
        seq = audit_events.c.seq
        count, highest = conn.execute(select(func.count(), func.max(seq))).one()
        issued = conn.execute(text("SELECT seq FROM sqlite_sequence WHERE name = 'audit_events'")).scalar()
        highest, issued = int(highest or 0), int(issued or 0)
        gap = None
        if count != highest:
            lowest = conn.execute(select(func.min(seq))).scalar()
            later = audit_events.alias("later")
            # The first missing number: 1, or the one after the lowest seq with no successor.
            before_gap = conn.execute(
                select(func.min(seq)).where(
                    seq < highest, ~select(later.c.seq).where(later.c.seq == seq + 1).exists()
                )
            ).scalar()
            start = (
                1 if lowest is not None and lowest > 1 else (None if before_gap is None else before_gap + 1)
            )
            end = None if start is None else conn.execute(select(func.min(seq)).where(seq > start)).scalar()
            if start is not None and end is not None:
                gap = (int(start), int(end) - 1)
        return numbering_problem(gap, highest, issued)

    def verify_audit(self, workflow_id: str | None = None) -> AuditReport:
        """Check every workflow's hash chain (or one's); the report names the first bad event."""
        with self._db.transaction(write=False) as conn:
            if workflow_id is not None:
                self._require(conn, workflow_id)
            ids_query = select(workflows.c.id)
            orphans_query = select(audit_events.c.workflow_id).distinct()
            if workflow_id is not None:
                ids_query = ids_query.where(workflows.c.id == workflow_id)
                orphans_query = orphans_query.where(audit_events.c.workflow_id == workflow_id)
            stored = {r.id for r in conn.execute(ids_query)}
            orphans = orphans_query.where(audit_events.c.workflow_id.not_in(select(workflows.c.id)))
            ids = sorted(stored | {r.workflow_id for r in conn.execute(orphans)})

            def chains() -> Iterator[tuple[str, list[AuditRecord], ChainHead | None]]:
                for start in range(0, len(ids), _BATCH // 10):
                    chunk = ids[start : start + _BATCH // 10]  # rows carry whole documents: smaller batches
                    heads = self._heads_of(conn, chunk)
                    for wid, events in self._events_of(conn, chunk).items():
                        yield wid, events, heads.get(wid)

            vanished = self._vanished(conn, workflow_id)
            numbering = (lambda: self._numbering(conn)) if workflow_id is None else None
            return chain_report(chains(), len(ids), vanished, numbering)


def chain_report(
    chains: Iterable[tuple[str, list[AuditRecord], ChainHead | None]],
    count: int,
    vanished: Sequence[str],
    numbering: Callable[[], str] | None = None,
) -> AuditReport:
    """The report on ``count`` workflows' chains (id, events in seq order, the row's seal: None
    without a row), on the workflows the ledger knows whose row and events are all gone, and,
    when every chain holds, on the numbering of the events (``numbering``: what is missing)."""
    checked, first, broken = 0, None, []
    for wid, events, head in chains:
        checked += len(events)
        problem = check_chain(wid, events, head)
        if problem is not None:
            broken.append(wid)
            first = first or problem
    gone = numbering() if first is None and numbering is not None else ""
    if (vanished or gone) and first is None:
        # SQLite's numbering names the missing seqs; the ledger names the workflows.
        return AuditReport(
            ok=False,
            checked=checked,
            workflows=count + len(vanished),
            description=gone or vanished_problem(vanished),
            broken=tuple(vanished),
        )
    if first is None:
        return AuditReport(ok=True, checked=checked, workflows=count)
    return AuditReport(
        ok=False,
        checked=checked,
        workflows=count,
        first_bad=first.record,
        description=first.description,
        broken=tuple(broken),
    )
