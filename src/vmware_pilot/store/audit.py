"""The per-workflow audit hash chain: computing event hashes and verifying a stored chain.

Each event's hash is sha256 over the canonical JSON of (prev_hash, workflow_id, ts, actor, action,
detail); the first event of a workflow links to ``GENESIS``. The workflow row keeps the event
count and a *seal*: a hash over the last event's hash and the row itself (the workflow document
with its plan, creator and approvals, and the columns listed next to it), rewritten by every save.
So a deleted last event is detected, and so is any edit of the stored document. Where the
database numbers events without gaps (SQLite), a gap in the numbering shows events deleted
together with their workflow row, which no per-workflow chain can see. Pure: the store feeds
records in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from vmware_pilot.store.protocol import AuditRecord

__all__ = [
    "GENESIS",
    "ChainHead",
    "ChainProblem",
    "SealedRow",
    "check_chain",
    "event_hash",
    "numbering_problem",
    "seal",
    "vanished_problem",
]

GENESIS = "0" * 64


def event_hash(prev_hash: str, workflow_id: str, ts: str, actor: str, action: str, detail: str) -> str:
    """The hash that commits an event to its content and to the event before it."""
    canonical = json.dumps(
        [prev_hash, workflow_id, ts, actor, action, detail], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class SealedRow:
    """The parts of a workflow row its seal covers: the document and the columns copied from it."""

    workflow_id: str
    type: str
    state: str
    is_active: bool
    created_at: str
    updated_at: str
    created_by: str
    document: str


def seal(last_hash: str, count: int, row: SealedRow) -> str:
    """The seal kept on a workflow row: its chain's last hash and event count, and the row."""
    document = hashlib.sha256(row.document.encode("utf-8")).hexdigest()
    canonical = json.dumps(
        [
            "seal",
            last_hash,
            count,
            row.workflow_id,
            row.type,
            row.state,
            bool(row.is_active),
            row.created_at,
            row.updated_at,
            row.created_by,
            document,
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainHead:
    """What the workflow row says its chain ends with (None: no workflow row at all): the seal,
    the event count, and the row the seal covers."""

    head: str
    count: int
    row: SealedRow


@dataclass(frozen=True, slots=True)
class ChainProblem:
    record: AuditRecord | None
    description: str


def _name(rec: AuditRecord, position: int) -> str:
    return f"event seq {rec.seq} (#{position + 1} of workflow {rec.workflow_id}, '{rec.action}' at {rec.ts})"


def check_chain(
    workflow_id: str, events: Sequence[AuditRecord], head: ChainHead | None
) -> ChainProblem | None:
    """The first problem in one workflow's events (ordered by seq), or None when intact."""
    if head is None:
        if not events:
            return None
        return ChainProblem(
            events[0],
            f"{_name(events[0], 0)} belongs to no stored workflow: it was inserted, or its workflow's "
            "row was deleted",
        )
    position_of = {rec.hash: i for i, rec in enumerate(events)}
    linked_from: dict[str, list[int]] = {}
    for i, rec in enumerate(events):
        linked_from.setdefault(rec.prev_hash, []).append(i)
    expected = GENESIS
    for i, rec in enumerate(events):
        # Does a later event continue the chain from the previous one, skipping this one?
        skipped = any(k > i for k in linked_from.get(expected, ()))
        if rec.prev_hash != expected:
            j = position_of.get(rec.prev_hash)
            if j is not None and j > i:
                return ChainProblem(
                    rec, f"{_name(rec, i)} is out of order: it belongs after seq {events[j].seq} (reordered)"
                )
            if j is not None and j < i - 1:
                extra = events[j + 1]
                return ChainProblem(
                    extra,
                    f"{_name(extra, j + 1)} is not part of the chain, which goes from seq "
                    f"{events[j].seq} to seq {rec.seq} (inserted)",
                )
            if skipped:
                return ChainProblem(rec, f"{_name(rec, i)} is not part of the chain (inserted)")
            if i == 0:
                return ChainProblem(
                    rec, f"{_name(rec, i)} links to an event that is missing (the first event was deleted)"
                )
            return ChainProblem(
                rec,
                f"{_name(rec, i)} does not follow seq {events[i - 1].seq}: an event between them was "
                f"deleted, or seq {events[i - 1].seq} was rewritten",
            )
        actual = event_hash(rec.prev_hash, rec.workflow_id, rec.ts, rec.actor, rec.action, rec.detail)
        if actual != rec.hash:
            if skipped:
                what = "is not part of the chain (inserted)"
            elif i >= head.count:
                what = (
                    f"was appended outside vmware-pilot: the workflow records {head.count} events (inserted)"
                )
            else:
                what = "was altered: its content does not match its hash"
            return ChainProblem(rec, f"{_name(rec, i)} {what}")
        expected = rec.hash
    return _check_head(workflow_id, events, head, expected)


def _check_head(
    workflow_id: str, events: Sequence[AuditRecord], head: ChainHead, last_hash: str
) -> ChainProblem | None:
    """Compare the end of an intact chain with the count and seal kept on the workflow row."""
    last = events[-1] if events else None
    stored = f"{len(events)} are stored"
    if len(events) < head.count:
        where = f"after seq {last.seq}" if last else "(none is left)"
        return ChainProblem(
            None,
            f"workflow {workflow_id} records {head.count} events but {stored}: the last "
            f"{head.count - len(events)} event(s) {where} were deleted",
        )
    if len(events) > head.count:
        assert last is not None
        return ChainProblem(
            events[head.count],
            f"{_name(events[head.count], head.count)} was appended outside vmware-pilot: the workflow "
            f"records {head.count} events but {stored} (inserted)",
        )
    if head.head == seal(last_hash, head.count, head.row):
        return None
    what = (
        f"{_name(last, len(events) - 1)} (the last event) or the stored record of workflow {workflow_id}"
        if last is not None
        else f"the stored record of workflow {workflow_id}"
    )
    return ChainProblem(
        last,
        f"{what} was changed outside vmware-pilot: they do not match the seal kept on the workflow row, "
        "which covers the last event and the document with its plan, creator and approvals (altered)",
    )


def numbering_problem(gap: tuple[int, int] | None, highest: int, issued: int) -> str:
    """Why the event numbering shows deleted events, or ``""``.

    ``gap`` is the first run of missing seq numbers (first, last) below ``highest``, the highest
    stored seq; ``issued`` is the highest seq the database ever handed out.
    """
    if gap is not None:
        first, last = gap
        which = f"seq {first}" if first == last else f"seq {first} to {last}"
        return (
            f"events {which} are missing from the trail: they were deleted (a workflow deleted with "
            "all its events leaves exactly this gap)"
        )
    if issued > highest:
        which = f"seq {highest + 1}" if issued == highest + 1 else f"seq {highest + 1} to {issued}"
        return (
            f"events {which} were recorded but are no longer stored: the newest events were deleted "
            "(with their workflow, or the chain check would have named it)"
        )
    return ""


def vanished_problem(workflow_ids: Sequence[str]) -> str:
    """Why workflows the ledger lists but whose row and events are all gone break the trail."""
    first = workflow_ids[0]
    more = f" (and {len(workflow_ids) - 1} more)" if len(workflow_ids) > 1 else ""
    return (
        f"workflow {first}{more} was created but its record and all its events are gone: it was "
        "deleted from the database behind vmware-pilot's back"
    )
