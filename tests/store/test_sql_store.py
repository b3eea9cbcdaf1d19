from __future__ import annotations

import contextlib
import copy
import threading
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.store_helpers import sample_workflow
from vmware_pilot.config import Settings
from vmware_pilot.domain.enums import Event, StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.errors import ConcurrencyConflict, InvalidInput, StoreError, WorkflowNotFound
from vmware_pilot.store.sql import SqlStore, open_store
from vmware_pilot.templates.steps import make_step

S = WorkflowState


def test_create_then_load_round_trips_every_field(store: SqlStore) -> None:
    wf = sample_workflow(goal="restart web tier")
    wf.steps[0].status = StepStatus.SUCCESS
    wf.steps[0].result = {"power_state": "on", "nested": [1, 2.5, None, True]}
    wf.steps[0].started_at = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    wf.steps[0].completed_at = wf.steps[0].started_at + timedelta(seconds=3)
    wf.steps[1].group_id = "g1"
    wf.approved_by = "bob"
    wf.diff_report = {"changes": ["vm web-01 powered off"]}
    wf.rollback_results = [{"index": 1, "status": "rolled_back"}]
    wf.authors = ["carol"]
    wf.handed_to = {0: "agent-a"}
    wf.requested_via = "Claude Code"
    wf.newer_keys = {"gate_digest": "abc"}
    wf.log("run_started", actor="alice")
    store.workflows.create(wf)

    loaded = store.workflows.load(wf.id)

    expected = copy.deepcopy(wf.to_dict())
    expected["steps"][1]["params"]["password"] = "***"
    expected["steps"][1]["rollback_params"]["apiToken"] = "***"
    assert loaded.to_dict() == expected
    assert (loaded.handed_to, loaded.requested_via) == ({0: "agent-a"}, "Claude Code")
    assert loaded.newer_keys == {"gate_digest": "abc"}
    assert loaded.version == wf.version == 1
    assert loaded.steps[0].started_at == wf.steps[0].started_at
    assert loaded.steps[0].started_at is not None and loaded.steps[0].started_at.tzinfo is not None
    assert loaded.new_events == []


def test_create_and_save_commit_new_events_and_fill_seq_and_hash(store: SqlStore) -> None:
    wf = sample_workflow()
    first = wf.log("created", "plan made", actor="alice")
    store.workflows.create(wf)
    assert wf.new_events == []
    assert first.seq is not None and len(first.hash) == 64

    fire(wf, Event.START_RUN)
    second = wf.log("run_started", actor="alice")
    store.workflows.save(wf)

    assert wf.version == 2
    assert second.seq is not None and second.seq > first.seq
    loaded = store.workflows.load(wf.id)
    assert loaded.state is S.RUNNING
    assert [(e.action, e.seq, e.hash) for e in loaded.audit_log] == [
        ("created", first.seq, first.hash),
        ("run_started", second.seq, second.hash),
    ]
    events = list(store.audit.audit_events(wf.id))
    assert events[1].prev_hash == events[0].hash


def test_stale_writer_gets_conflict_and_database_keeps_the_first_save(store: SqlStore) -> None:
    wf = sample_workflow()
    store.workflows.create(wf)
    first = store.workflows.load(wf.id)
    second = store.workflows.load(wf.id)

    first.params["winner"] = "first"
    first.log("edited", "by first", actor="a")
    store.workflows.save(first)

    second.params["winner"] = "second"
    second.log("edited", "by second", actor="b")
    with pytest.raises(ConcurrencyConflict) as caught:
        store.workflows.save(second)

    assert caught.value.retryable
    assert (caught.value.expected, caught.value.actual) == (1, 2)
    assert second.version == 1 and len(second.new_events) == 1  # untouched: reload and reapply
    stored = store.workflows.load(wf.id)
    assert stored.params["winner"] == "first"
    assert [e.detail for e in stored.audit_log] == ["by first"]
    assert stored.version == 2


def test_save_of_unknown_workflow_and_load_of_unknown_id_raise_not_found(store: SqlStore) -> None:
    with pytest.raises(WorkflowNotFound):
        store.workflows.load("wf-20260101-000000-abcdef")
    wf = sample_workflow()
    with pytest.raises(StoreError, match="never stored"):
        store.workflows.save(wf)
    wf.version = 1
    with pytest.raises(WorkflowNotFound):
        store.workflows.save(wf)


def test_create_refuses_a_stored_workflow_and_a_duplicate_id(store: SqlStore) -> None:
    wf = sample_workflow()
    store.workflows.create(wf)
    with pytest.raises(StoreError, match="already stored"):
        store.workflows.create(wf)
    twin = sample_workflow()
    twin.id = wf.id
    with pytest.raises(StoreError, match="already exists") as caught:
        store.workflows.create(twin)
    assert caught.value.hint
    assert twin.version == 0


def test_another_store_sees_writes_at_once_no_process_cache(
    backend_settings: Settings, store: SqlStore
) -> None:
    wf = sample_workflow()
    store.workflows.create(wf)
    other = open_store(backend_settings)
    try:
        assert other.workflows.load(wf.id).version == 1
        theirs = other.workflows.load(wf.id)
        theirs.params["seen"] = True
        other.workflows.save(theirs)
        assert store.workflows.load(wf.id).params["seen"] is True
        # The first store's instance is now stale and must not overwrite.
        wf.params["seen"] = False
        with pytest.raises(ConcurrencyConflict):
            store.workflows.save(wf)
    finally:
        other.close()


def _at(minutes: int, state: WorkflowState, store: SqlStore) -> Workflow:
    wf = Workflow.new("t", state, now=datetime(2026, 5, 1, tzinfo=UTC) + timedelta(minutes=minutes))
    store.workflows.create(wf)
    return wf


def test_list_active_is_newest_first_without_terminal_states_and_pages(store: SqlStore) -> None:
    states = [S.PENDING, S.COMPLETED, S.DRAFT, S.FAILED, S.RUNNING, S.CANCELLED, S.AWAITING_APPROVAL]
    made = [_at(i, state, store) for i, state in enumerate(states)]
    active = [wf.id for wf in reversed(made) if wf.state not in (S.COMPLETED, S.FAILED, S.CANCELLED)]

    listed = store.workflows.list_active()

    assert [row["id"] for row in listed] == active
    assert set(listed[0]) == {"id", "type", "state", "created_at", "updated_at"}
    assert listed[0]["state"] == "awaiting_approval"
    assert store.workflows.count_active() == 4
    assert [r["id"] for r in store.workflows.list_active(limit=2)] == active[:2]
    assert [r["id"] for r in store.workflows.list_active(limit=2, offset=2)] == active[2:4]
    assert [r["id"] for r in store.workflows.list_active(offset=3)] == active[3:]
    assert store.workflows.list_active(limit=0) == []


def test_list_active_follows_state_changes_saved_later(store: SqlStore) -> None:
    wf = _at(0, S.PENDING, store)
    fire(wf, Event.CANCEL)
    store.workflows.save(wf)
    assert store.workflows.list_active() == []
    assert store.workflows.count_active() == 0


def test_list_all_filters_by_state_and_pages(store: SqlStore) -> None:
    made = [_at(i, state, store) for i, state in enumerate([S.PENDING, S.COMPLETED, S.FAILED])]
    assert [r["id"] for r in store.workflows.list_all()] == [wf.id for wf in reversed(made)]
    assert [r["id"] for r in store.workflows.list_all(states=[S.COMPLETED, S.FAILED])] == [
        made[2].id,
        made[1].id,
    ]
    assert [r["id"] for r in store.workflows.list_all(limit=1, offset=1)] == [made[1].id]


@pytest.mark.parametrize(("limit", "offset"), [(-1, 0), (None, -5)])
def test_negative_paging_is_refused_with_a_hint(store: SqlStore, limit: int | None, offset: int) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.workflows.list_active(limit=limit, offset=offset)
    assert caught.value.hint


def test_load_renames_old_tool_names_in_stored_steps(store: SqlStore) -> None:
    wf = Workflow.new("t", S.PENDING, [make_step(0, "a", "aiops", "power_on_vm")])
    store.workflows.create(wf)
    # A step stored under a pre-2.0 name (as an imported record would be).
    wf.steps[0].tool = "vm_power_on"
    wf.steps[0].rollback_tool = "vm_power_off"
    store.workflows.save(wf)
    loaded = store.workflows.load(wf.id)
    assert (loaded.steps[0].tool, loaded.steps[0].rollback_tool) == ("power_on_vm", "power_off_vm")


def test_active_count_is_maintained_by_every_write_and_matches_a_scan(store: SqlStore) -> None:
    made = [_at(i, S.PENDING, store) for i in range(5)]
    _at(9, S.COMPLETED, store)
    assert store.workflows.count_active() == 5
    fire(made[0], Event.CANCEL)
    store.workflows.save(made[0])
    made[1].params["touched"] = True  # a save that keeps the workflow active leaves the count
    store.workflows.save(made[1])
    assert store.workflows.count_active() == 4 == len(store.workflows.list_active())


def test_active_count_stays_exact_under_concurrent_writers(
    backend_settings: Settings, store: SqlStore
) -> None:
    """Several stores (as several processes would) race to cancel the same workflows and create
    new ones; a stale writer is refused, so each workflow leaves the count exactly once."""
    shared = [_at(i, S.PENDING, store) for i in range(30)]
    writers = [open_store(backend_settings) for _ in range(4)]
    errors: list[BaseException] = []

    def work(mine: SqlStore, n: int) -> None:
        try:
            for i, original in enumerate(shared):
                wf = mine.workflows.load(original.id)
                if wf.state is S.PENDING:
                    fire(wf, Event.CANCEL)
                    with contextlib.suppress(ConcurrencyConflict):
                        mine.workflows.save(wf)
                if i % 3 == n % 3:
                    mine.workflows.create(Workflow.new("t", S.PENDING))
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w, n)) for n, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in writers:
        w.close()
    assert errors == []
    created = sum(1 for n in range(4) for i in range(30) if i % 3 == n % 3)
    assert store.workflows.count_active() == len(store.workflows.list_active()) == created
