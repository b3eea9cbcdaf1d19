"""The store contract (store/protocol.py): one suite run against MemoryStore, SQLite and PostgreSQL.

What the engine relies on from every ``Store``: optimistic concurrency by version, fences that
refuse a superseded save, leases taken only when free or expired, object locks all or none,
the outbox's claims, the audit chain and the listings. ``TestMemoryStore`` runs it in memory;
``TestSqlStore`` on each backend of the ``database`` fixture (tests/support/backends.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.support.store_helpers import sample_workflow
from vmware_pilot.config import Settings
from vmware_pilot.domain.enums import Event, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.errors import ConcurrencyConflict, InvalidInput, StoreError, WorkflowNotFound
from vmware_pilot.store import MemoryStore, Store, open_store
from vmware_pilot.store.leases import LeaseLost

S = WorkflowState


def stored(store: Store, state: WorkflowState = S.PENDING, age: float = 0, **params: object) -> Workflow:
    """A workflow created ``age`` seconds ago, with one audit event."""
    wf = sample_workflow(state=state, **params)
    wf.created_at -= timedelta(seconds=age)
    wf.log("workflow_created", actor="alice")
    store.workflows.create(wf)
    return wf


class StoreContract:
    """The behaviour every ``Store`` has; subclasses give the ``store`` fixture."""

    # --- workflows ----------------------------------------------------------------------
    def test_a_created_workflow_loads_as_it_was_with_its_events(self, store: Store) -> None:
        wf = sample_workflow(goal="restart web tier")
        wf.log("run_started", actor="alice")
        store.workflows.create(wf)
        loaded = store.workflows.load(wf.id)
        mine, theirs = wf.to_dict(), loaded.to_dict()
        assert {k: v for k, v in theirs.items() if k != "steps"} == {
            k: v for k, v in mine.items() if k != "steps"
        }
        assert theirs["steps"][0] == mine["steps"][0]  # the second holds a secret: masked
        assert loaded.version == wf.version == 1
        assert [e.action for e in loaded.audit_log] == [e.action for e in wf.audit_log]
        assert loaded is not wf and loaded.steps[0] is not wf.steps[0]  # a copy, never shared

    def test_secrets_are_masked_in_what_is_stored(self, store: Store) -> None:
        wf = stored(store)
        params = store.workflows.load(wf.id).steps[1].params
        assert params["vm_name"] == "web-01" and params["password"] != "hunter2"

    def test_an_id_is_created_once(self, store: Store) -> None:
        wf = stored(store)
        twin = sample_workflow()
        twin.id = wf.id
        with pytest.raises(StoreError):
            store.workflows.create(twin)
        with pytest.raises(StoreError):
            store.workflows.create(wf)  # already stored (version 1)

    def test_a_save_from_a_stale_version_is_refused_and_writes_nothing(self, store: Store) -> None:
        wf = stored(store)
        mine, theirs = store.workflows.load(wf.id), store.workflows.load(wf.id)
        fire(theirs, Event.START_RUN)
        store.workflows.save(theirs)
        fire(mine, Event.CANCEL)
        with pytest.raises(ConcurrencyConflict):
            store.workflows.save(mine)
        now = store.workflows.load(wf.id)
        assert now.state is S.RUNNING and now.version == 2
        with pytest.raises(WorkflowNotFound):
            store.workflows.load("wf-none")

    def test_listings_are_newest_first_filtered_and_paged(self, store: Store) -> None:
        older, newer = stored(store, age=60), stored(store)
        done = store.workflows.load(older.id)
        fire(done, Event.CANCEL)
        store.workflows.save(done)
        assert [r["id"] for r in store.workflows.list_active()] == [newer.id]
        assert store.workflows.count_active() == 1
        every = [r["id"] for r in store.workflows.list_all()]
        assert every == [newer.id, older.id]
        assert [r["id"] for r in store.workflows.list_all(states=[S.CANCELLED])] == [older.id]
        assert [r["id"] for r in store.workflows.list_all(limit=1, offset=1)] == every[1:]
        assert store.workflows.list_all()[0].keys() == {"id", "type", "state", "created_at", "updated_at"}
        with pytest.raises(InvalidInput):
            store.workflows.list_all(limit=-1)
        assert store.workflows.versions([older.id, newer.id, "wf-none"]) == {older.id: 2, newer.id: 1}
        assert store.workflows.workflow_ids(newer.id[:3], 10) == every
        assert store.workflows.workflow_ids("wf_", 10) == []  # a literal prefix, no wildcard

    # --- audit ---------------------------------------------------------------------------
    def test_audit_events_come_in_commit_order_and_their_chains_verify(self, store: Store) -> None:
        first, second = stored(store, age=60), stored(store)
        wf = store.workflows.load(first.id)
        wf.log("approved", actor="bob")
        store.workflows.save(wf)
        events = list(store.audit.audit_events())
        assert [e.seq for e in events] == sorted(e.seq for e in events)
        assert [e.workflow_id for e in events][-1] == first.id
        mine = list(store.audit.audit_events(first.id))
        assert mine[-1].action == "approved" and mine[-1].prev_hash == mine[-2].hash
        report = store.audit.verify_audit()
        assert report.ok and report.workflows == 2 and report.checked == len(events)
        assert store.audit.verify_audit(second.id).ok
        with pytest.raises(WorkflowNotFound):
            list(store.audit.audit_events("wf-none"))
        with pytest.raises(WorkflowNotFound):
            store.audit.verify_audit("wf-none")

    # --- leases and fences -----------------------------------------------------------------
    def test_a_lease_is_taken_only_when_free_or_expired_each_time_with_the_next_fence(
        self, store: Store
    ) -> None:
        assert store.leases.lease("run:a") is None
        assert store.leases.acquire_lease("run:a", "one", 60) == 1
        assert store.leases.acquire_lease("run:a", "two", 60) is None  # live: another owner's
        held = store.leases.lease("run:a")
        assert held is not None and held.owner == "one" and not held.expired
        store.leases.release_lease("run:a", "one", 1)
        assert store.leases.lease("run:a").expired  # type: ignore[union-attr]
        assert store.leases.acquire_lease("run:a", "two", 0) == 2  # released: free, next fence
        assert store.leases.acquire_lease("run:a", "three", 60) == 3  # expired at once: taken

    def test_holding_renews_a_live_lease_and_is_all_or_none(self, store: Store) -> None:
        store.leases.acquire_lease("run:a", "one", 60)
        store.leases.acquire_lease("b", "one", 60)
        assert store.leases.hold_leases([("run:a", "one", 1), ("b", "one", 1)], 60) == [1, 1]
        store.leases.acquire_lease("c", "one", 0)  # lapsed, nobody took it: taken again by holding
        assert store.leases.hold_leases([("c", "one", 1)], 60) == [2]
        store.leases.acquire_lease("d", "two", 60)
        assert store.leases.hold_leases([("run:a", "one", 1), ("d", "one", 1)], 60) is None
        assert store.leases.hold_leases([("run:a", "one", 1)], 60) == [1]  # unchanged by the refusal

    def test_a_save_under_a_superseded_fence_is_refused_and_writes_nothing(self, store: Store) -> None:
        wf = stored(store)
        store.leases.acquire_lease("run:x", "one", 0)
        store.leases.acquire_lease("run:x", "two", 60)  # took over: fence 2
        loaded = store.workflows.load(wf.id)
        fire(loaded, Event.START_RUN)
        with pytest.raises(LeaseLost):
            store.workflows.save(loaded, [("run:x", 1)])
        assert store.workflows.load(wf.id).version == 1
        store.workflows.save(loaded, [("run:x", 2)])
        assert store.workflows.load(wf.id).state is S.RUNNING

    # --- object locks --------------------------------------------------------------------
    def test_objects_are_taken_all_or_none_and_freed_when_their_workflow_ends(self, store: Store) -> None:
        holder, other = stored(store, S.AWAITING_APPROVAL), stored(store, S.AWAITING_APPROVAL)
        assert store.locks.take_locks(holder.id, "run:h", ["vm:a", "vm:b"]) is None
        taken = store.locks.take_locks(other.id, "run:o", ["vm:c", "vm:b"])
        assert taken is not None and (taken.key, taken.workflow_id) == ("vm:b", holder.id)
        assert [h.key for h in store.locks.lock_holders(other.id, ["vm:a", "vm:c"])] == ["vm:a"]
        assert store.locks.lock_holders(other.id, ["vm:c"]) == []  # nothing was taken: none
        ended = store.workflows.load(holder.id)
        fire(ended, Event.CANCEL)
        store.workflows.save(ended)
        assert store.locks.take_locks(other.id, "run:o", ["vm:b"]) is None

    def test_a_running_workflow_holds_its_objects_only_under_a_live_run_lease(self, store: Store) -> None:
        walker, other = stored(store, S.RUNNING), stored(store, S.AWAITING_APPROVAL)
        store.leases.acquire_lease("run:w", "walker", 60)
        assert store.locks.take_locks(walker.id, "run:w", ["vm:a"]) is None
        assert store.locks.take_locks(other.id, "run:o", ["vm:a"]) is not None
        store.leases.release_lease("run:w", "walker", 1)  # the walker's lease lapsed
        assert store.locks.take_locks(other.id, "run:o", ["vm:a"]) is None
        assert store.leases.hold_leases([("run:w", "walker", 1)], 60) is None  # fenced out

    # --- the outbox ------------------------------------------------------------------------
    def test_the_outbox_hands_each_due_notice_to_one_claim_at_a_time(self, store: Store) -> None:
        wf = stored(store)
        changed = store.workflows.load(wf.id)
        fire(changed, Event.START_RUN)
        store.workflows.save(changed, notices=[("e1", wf.id, b'{"n": 1}')])  # with the change
        store.outbox.enqueue_notices([("e2", wf.id, b'{"n": 2}')])
        assert store.outbox.notice_counts() == {"pending": 2}
        claims = [store.outbox.claim_notice(60), store.outbox.claim_notice(60)]
        assert sorted((c.event_id, c.body, c.attempts) for c in claims if c) == [
            ("e1", b'{"n": 1}', 0),
            ("e2", b'{"n": 2}', 0),
        ]
        assert store.outbox.claim_notice(60) is None  # both claimed
        store.outbox.finish_notice("e1", "delivered", 1)
        store.outbox.retry_notice("e2", 1, 3600)
        assert store.outbox.claim_notice(60) is None  # e2 is not due for an hour
        assert store.outbox.notice_counts() == {"delivered": 1, "pending": 1}
        assert store.outbox.prune_notices(-60) == 1  # delivered rows go; pending ones never
        assert store.outbox.notice_counts() == {"pending": 1}

    def test_the_clock_is_aware_utc(self, store: Store) -> None:
        assert store.now().utcoffset() is not None and store.now().utcoffset().total_seconds() == 0  # type: ignore[union-attr]


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> Iterator[Store]:
        memory = MemoryStore()
        yield memory
        memory.close()

    def test_it_is_private_to_this_process(self, store: Store) -> None:
        assert not store.shared


class TestSqlStore(StoreContract):
    @pytest.fixture
    def store(self, backend_settings: Settings) -> Iterator[Store]:
        opened = open_store(backend_settings)
        yield opened
        opened.close()
