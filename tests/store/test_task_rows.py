"""MCP task rows (store/tasks.py): one contract on MemoryStore, SQLite and PostgreSQL.

A task is stored ``working`` before its handle is returned, read back by any store over the same
database, given its final status once (the first writer wins), and expires on the store's clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from vmware_pilot.config import Settings
from vmware_pilot.domain.clock import utcnow
from vmware_pilot.errors import StoreError
from vmware_pilot.store import MemoryStore, Store, open_store
from vmware_pilot.store.tasks import TaskStore

RESULT = {
    "content": [{"type": "text", "text": "{}"}],
    "structuredContent": {"state": "completed"},
    "isError": False,
}


class TaskRowContract:
    """What the tasks extension relies on from every store's ``tasks``."""

    def test_a_new_task_is_working_and_reads_back_as_stored(self, tasks: TaskStore) -> None:
        made = tasks.create_task("t-1", "token:alice", "run_workflow", "wf-1", "host/1/abc", 3600.0)
        found = tasks.task("t-1")
        assert found is not None
        assert (found.owner, found.tool, found.workflow_id, found.started_by) == (
            "token:alice",
            "run_workflow",
            "wf-1",
            "host/1/abc",
        )
        assert found.status == made.status == "working" and not found.terminal
        assert found.outcome is None and found.status_message == ""
        assert found.ttl == 3600.0 and found.remaining is not None and 3500 < found.remaining <= 3600
        assert not found.expired and found.created_at == made.created_at

    def test_an_unknown_task_is_none(self, tasks: TaskStore) -> None:
        assert tasks.task("nope") is None

    def test_the_final_result_is_kept_and_a_terminal_task_never_changes(self, tasks: TaskStore) -> None:
        tasks.create_task("t-2", "os:bob", "approve", "wf-2", "p", None)
        assert tasks.finish_task("t-2", "completed", "Completed: state completed", {"result": RESULT})
        assert not tasks.finish_task("t-2", "cancelled", "too late", None)
        found = tasks.task("t-2")
        assert found is not None and found.status == "completed" and found.terminal
        assert found.outcome == {"result": RESULT}
        assert found.status_message == "Completed: state completed"
        assert found.updated_at >= found.created_at
        assert found.ttl is None and found.remaining is None and not found.expired

    def test_a_failed_task_keeps_its_json_rpc_error(self, tasks: TaskStore) -> None:
        tasks.create_task("t-3", "os:bob", "rollback", "wf-3", "p", None)
        error = {"code": -32603, "message": "Internal error (correlation id 1)"}
        assert tasks.finish_task("t-3", "failed", error["message"], {"error": error})
        found = tasks.task("t-3")
        assert found is not None and found.status == "failed" and found.outcome == {"error": error}

    def test_finishing_an_unknown_task_changes_nothing(self, tasks: TaskStore) -> None:
        assert not tasks.finish_task("ghost", "completed", "", {"result": RESULT})

    def test_a_task_past_its_ttl_is_expired_and_purged_at_the_next_creation(self, tasks: TaskStore) -> None:
        tasks.create_task("short", "os:bob", "run_workflow", "wf-4", "p", -1.0)  # already past
        found = tasks.task("short")
        assert found is not None and found.expired
        tasks.create_task("next", "os:bob", "run_workflow", "wf-5", "p", 60.0)
        assert tasks.task("short") is None and tasks.task("next") is not None

    def test_an_id_is_created_once(self, tasks: TaskStore) -> None:
        tasks.create_task("once", "os:bob", "run_workflow", "wf-6", "p", None)
        with pytest.raises(StoreError):
            tasks.create_task("once", "os:eve", "run_workflow", "wf-6", "p", None)
        found = tasks.task("once")
        assert found is not None and found.owner == "os:bob"


class TestMemoryTaskRows(TaskRowContract):
    @pytest.fixture
    def tasks(self) -> TaskStore:
        return MemoryStore().tasks

    def test_expiry_follows_the_stores_clock(self) -> None:
        now = [utcnow()]

        def clock() -> datetime:
            return now[0]

        tasks = MemoryStore(clock=clock).tasks
        tasks.create_task("t", "os:bob", "run_workflow", "wf", "p", 10.0)
        now[0] += timedelta(seconds=11)
        found = tasks.task("t")
        assert found is not None and found.expired


class TestSqlTaskRows(TaskRowContract):
    @pytest.fixture
    def store(self, backend_settings: Settings) -> Iterator[Store]:
        s = open_store(backend_settings)
        yield s
        s.close()

    @pytest.fixture
    def tasks(self, store: Store) -> TaskStore:
        return store.tasks

    def test_another_process_store_on_the_same_database_reads_the_row(
        self, store: Store, backend_settings: Settings
    ) -> None:
        store.tasks.create_task("shared", "token:alice", "run_workflow", "wf-7", "replica-a", 600.0)
        with open_store(backend_settings) as other:
            found = other.tasks.task("shared")
            assert found is not None and found.started_by == "replica-a" and found.status == "working"
            assert other.tasks.finish_task("shared", "completed", "done", {"result": RESULT})
        found = store.tasks.task("shared")
        assert found is not None and found.status == "completed" and found.outcome == {"result": RESULT}
