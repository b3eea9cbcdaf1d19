"""The chain checker on its own: each kind of damage is named at the right event."""

from __future__ import annotations

from dataclasses import replace

from vmware_pilot.store.audit import (
    GENESIS,
    ChainHead,
    SealedRow,
    check_chain,
    event_hash,
    numbering_problem,
    seal,
)
from vmware_pilot.store.protocol import AuditRecord

WF = "wf-20260101-000000-aaaaaa"


def _chain(n: int) -> list[AuditRecord]:
    out, head = [], GENESIS
    for i in range(n):
        ts = f"2026-01-01T00:00:0{i}.000000+00:00"
        digest = event_hash(head, WF, ts, "alice", f"a{i}", f"d{i}")
        out.append(AuditRecord(i + 1, WF, ts, "alice", f"a{i}", f"d{i}", head, digest))
        head = digest
    return out


ROW = SealedRow(WF, "demo", "pending", True, "t0", "t1", "alice", '{"id": "x"}')


def _head(events: list[AuditRecord], row: SealedRow = ROW) -> ChainHead:
    return ChainHead(seal(events[-1].hash if events else GENESIS, len(events), row), len(events), row)


def test_intact_chain_and_empty_chain_pass() -> None:
    events = _chain(4)
    assert check_chain(WF, events, _head(events)) is None
    assert check_chain(WF, [], _head([])) is None
    assert check_chain(WF, [], None) is None


def test_first_event_deleted_is_named() -> None:
    events = _chain(3)
    problem = check_chain(WF, events[1:], _head(events))
    assert problem is not None and problem.record == events[1]
    assert "first event was deleted" in problem.description


def test_event_rewritten_with_a_fresh_hash_is_caught_at_the_next_event() -> None:
    events = _chain(3)
    forged = replace(events[1], detail="changed")
    forged = replace(
        forged, hash=event_hash(forged.prev_hash, WF, forged.ts, "alice", forged.action, "changed")
    )
    problem = check_chain(WF, [events[0], forged, events[2]], _head(events))
    assert problem is not None and problem.record == events[2]
    assert "seq 2 was rewritten" in problem.description


def test_event_moved_to_another_workflow_no_longer_matches_its_hash() -> None:
    events = _chain(2)
    moved = replace(events[1], workflow_id="wf-other")
    problem = check_chain(WF, [events[0], moved], _head(events))
    assert problem is not None and problem.record == moved and "altered" in problem.description


def test_last_event_rewritten_with_a_fresh_hash_is_caught_by_the_seal() -> None:
    events = _chain(2)
    last = replace(events[1], detail="x")
    last = replace(last, hash=event_hash(last.prev_hash, WF, last.ts, "alice", last.action, "x"))
    problem = check_chain(WF, [events[0], last], _head(events))
    assert problem is not None and problem.record == last
    assert "(the last event)" in problem.description and "seal" in problem.description


def test_a_record_changed_after_its_last_event_breaks_the_seal() -> None:
    events = _chain(2)
    sealed = _head(events)
    for changed in (
        replace(ROW, document='{"id": "y"}'),
        replace(ROW, created_by="mallory"),
        replace(ROW, state="completed", is_active=False),
    ):
        problem = check_chain(WF, events, replace(sealed, row=changed))
        assert problem is not None and "changed outside vmware-pilot" in problem.description
    assert check_chain(WF, [], replace(_head([]), row=replace(ROW, document="{}"))) is not None


def test_inserted_event_with_a_made_up_link_is_named_as_inserted() -> None:
    events = _chain(3)
    bogus = AuditRecord(99, WF, "t", "mallory", "approved", "", "f" * 64, "e" * 64)
    problem = check_chain(WF, [events[0], events[1], bogus, events[2]], _head(events))
    assert problem is not None and problem.record == bogus and "inserted" in problem.description


def test_event_appended_with_a_made_up_hash_is_named_as_inserted_not_altered() -> None:
    events = _chain(2)
    extra = AuditRecord(9, WF, "t", "mallory", "approved", "", events[-1].hash, "e" * 64)
    problem = check_chain(WF, [*events, extra], _head(events))
    assert problem is not None and problem.record == extra
    assert "appended outside vmware-pilot" in problem.description and "altered" not in problem.description


def test_gaps_in_the_event_numbering_are_described() -> None:
    assert numbering_problem(None, 10, 10) == ""
    assert "events seq 3 to 5 are missing" in numbering_problem((3, 5), 10, 10)
    assert "events seq 4 are missing" in numbering_problem((4, 4), 10, 10)
    assert "events seq 11 to 12 were recorded but are no longer stored" in numbering_problem(None, 10, 12)
