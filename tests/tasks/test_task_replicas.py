"""A task outlives the replica that started it: any Pilot on the same database (SQLite and
PostgreSQL) answers ``tasks/get`` and ``tasks/cancel`` for it from the task's row and the
workflow's record.

The fast tests run two apps in this process on one database, each behind its own Pilot server
(``create_server``, the tasks extension wired in). The slow one kills a real replica process in
the middle of the run (tests/support/task_replica.py): another Pilot's sweeper continues the run (engine/sweeper.py), and
the task, whose answer died with its process, ends ``failed`` saying where the workflow stands.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.support.fakes import ScriptedDispatcher, SteppedDispatcher
from tests.support.task_server import (
    ALICE,
    EVENTS,
    GATE,
    POWER_ON,
    READ,
    HeldPreflight,
    TaskHandle,
    call,
    task_request,
    tasks_client,
    workflow,
)
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import utcnow
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.engine.sweeper import Sweeper
from vmware_pilot.engine.tasks import INTERNAL_ERROR
from vmware_pilot.server import create_server
from vmware_pilot.server.tasks import PROGRESS_META
from vmware_pilot.store import MemoryStore

REPO = Path(__file__).resolve().parents[2]
BOB = Actor("bob", kind="token")
LEASE = 4


def _without_stamp(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "_meta"}


async def test_another_app_on_the_same_database_follows_the_task_to_its_result(
    backend_settings: Settings,
) -> None:
    answer = asyncio.Event()
    dispatcher = SteppedDispatcher(answer={"list_virtual_machines": answer})
    with (
        closing(build_app(backend_settings, dispatcher=dispatcher)) as first,
        closing(build_app(backend_settings, dispatcher=ScriptedDispatcher())) as second,
    ):
        started_on = create_server(first, actor=ALICE)
        other_replica = create_server(second, actor=ALICE)
        somebody_else = create_server(second, actor=BOB)
        workflow_id = workflow(first, [READ, EVENTS])
        async with (
            tasks_client(started_on) as a,
            tasks_client(other_replica) as b,
            tasks_client(somebody_else) as c,
        ):
            handle = await call(a, "run_workflow", workflow_id=workflow_id)
            assert isinstance(handle, TaskHandle)
            await dispatcher.went_out.wait()

            seen = await task_request(b, "tasks/get", handle.task_id)
            assert seen["status"] == "working" and seen["_meta"][PROGRESS_META] == {"done": 0, "total": 2}
            assert "in flight: step 0" in seen["statusMessage"]
            with pytest.raises(MCPError) as caught:
                await task_request(c, "tasks/get", handle.task_id)
            assert caught.value.error.code == -32602

            answer.set()
            await started_on.drain()
            there, here = (
                await task_request(b, "tasks/get", handle.task_id),
                await task_request(a, "tasks/get", handle.task_id),
            )
        assert there["status"] == "completed" and there["result"]["structuredContent"]["state"] == "completed"
        assert _without_stamp(there) == _without_stamp(here)
        assert there["_meta"][PROGRESS_META] == {"done": 2, "total": 2}


async def test_another_app_cancels_the_task_through_cancelworkflow(backend_settings: Settings) -> None:
    dispatcher = HeldPreflight()
    with (
        closing(build_app(backend_settings, dispatcher=dispatcher)) as first,
        closing(build_app(backend_settings, dispatcher=ScriptedDispatcher())) as second,
    ):
        started_on = create_server(first, actor=ALICE)
        other_replica = create_server(second, actor=ALICE)
        workflow_id = workflow(first, [READ])
        async with tasks_client(started_on) as a, tasks_client(other_replica) as b:
            handle = await call(a, "run_workflow", workflow_id=workflow_id)
            assert isinstance(handle, TaskHandle)
            await dispatcher.waiting.wait()
            ack = await task_request(b, "tasks/cancel", handle.task_id)
            assert ack["resultType"] == "complete"
            dispatcher.go.set()
            await started_on.drain()  # the run on the first app stops: its workflow was cancelled
            ended = await task_request(a, "tasks/get", handle.task_id)
        assert ended["status"] == "cancelled"
        assert second.store.workflows.load(workflow_id).state is WorkflowState.CANCELLED
        assert dispatcher.step_calls == []


async def test_a_task_whose_run_another_pilot_continued_ends_failed_with_where_the_workflow_stands(
    settings: Settings,
) -> None:
    """In one process: the first app's run stands still with its read in flight, its run lease
    lapses on the shared store's clock (as when its process dies), and the second app's sweeper
    continues the run to the gate."""
    now = [utcnow()]
    shared = MemoryStore(clock=lambda: now[0])
    answer = asyncio.Event()
    dispatcher = SteppedDispatcher(answer={"get_events": answer})
    with (
        closing(build_app(settings, dispatcher=dispatcher, store=shared)) as first,
        closing(build_app(settings, dispatcher=ScriptedDispatcher(), store=shared)) as second,
    ):
        started_on = create_server(first, actor=ALICE)
        other_replica = create_server(second, actor=ALICE)
        workflow_id = workflow(first, [EVENTS, GATE, POWER_ON])
        async with tasks_client(started_on) as a, tasks_client(other_replica) as b:
            handle = await call(a, "run_workflow", workflow_id=workflow_id)
            assert isinstance(handle, TaskHandle)
            await dispatcher.went_out.wait()
            now[0] += timedelta(seconds=first.service.runner.lease_seconds * 2)  # its lease lapsed
            assert await Sweeper(lambda: second.service.runner, interval=1).sweep() == [workflow_id]

            ended = await task_request(b, "tasks/get", handle.task_id)
            assert ended["status"] == "failed" and ended["error"]["code"] == INTERNAL_ERROR
            assert ended["error"]["data"]["state"] == "awaiting_approval"
            answer.set()  # the first app's call ends now (its run lost the lease): too late
            await started_on.drain()
            still = await task_request(a, "tasks/get", handle.task_id)
        assert _without_stamp(still) == _without_stamp(ended)
        assert shared.workflows.load(workflow_id).state is WorkflowState.AWAITING_APPROVAL


@contextmanager
def _replica(backend_settings: Settings) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """A replica process that started a task for ALICE's run_workflow (tests/support/task_replica.py),
    its read in flight; yields it, the workflow's id and the task's id."""
    env = {
        **os.environ,
        "VMWARE_PILOT_HOME": str(backend_settings.home_path),
        "VMWARE_PILOT_DATABASE_URL": backend_settings.database_url,
        "VMWARE_PILOT_LEASE_SECONDS": str(LEASE),
        "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.task_replica"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        wid, _, task_id = proc.stdout.readline().strip().partition(" ")
        assert wid and task_id, "the replica created its workflow and started its task"
        yield proc, wid, task_id
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def _poll(condition: Any, what: str, limit: float = 120) -> None:
    """Wait for ``condition()`` (a guard against hanging, not a timing claim)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)


@pytest.mark.slow
async def test_the_task_of_a_replica_that_died_is_answered_by_the_one_that_continued_its_run(
    backend_settings: Settings,
) -> None:
    settings = backend_settings.model_copy(update={"lease_seconds": LEASE})
    with (
        closing(build_app(settings, dispatcher=ScriptedDispatcher())) as survivor,
        _replica(settings) as (proc, wid, task_id),
    ):
        server = create_server(survivor, actor=ALICE)
        async with tasks_client(server) as client:
            _poll(
                lambda: survivor.store.workflows.load(wid).steps[0].status is StepStatus.RUNNING,
                "the read in flight",
            )
            alive = await task_request(client, "tasks/get", task_id)
            assert alive["status"] == "working" and "in flight: step 0" in alive["statusMessage"]

            proc.kill()
            proc.wait(timeout=30)
            sweeper = Sweeper(lambda: survivor.service.runner, interval=0.1)
            deadline = time.monotonic() + 120  # a guard against hanging, not a timing claim
            while not await sweeper.sweep():
                assert time.monotonic() < deadline, "the run was never continued"
                await asyncio.sleep(0.1)

            ended = await task_request(client, "tasks/get", task_id)
            again = await task_request(client, "tasks/get", task_id)
        assert ended["status"] == "failed" and "result" not in ended
        assert ended["error"]["code"] == INTERNAL_ERROR
        assert ended["error"]["data"] == {
            "workflow_id": wid,
            "state": "awaiting_approval",
            "hint": f"get_workflow_status('{wid}') shows every step's outcome.",
        }
        assert "stopped before it answered" in ended["statusMessage"]
        assert _without_stamp(again) == _without_stamp(ended)  # terminal: stored, never recomputed
        assert ended["_meta"][PROGRESS_META] == {"done": 1, "total": 3}  # the read; the gate waits
        assert survivor.store.workflows.load(wid).state is WorkflowState.AWAITING_APPROVAL
