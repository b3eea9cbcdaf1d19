"""Durable runs: a replica SIGKILLed in the middle of a run, and another replica's sweeper
continues it once the dead one's run lease has expired (engine/sweeper.py).

The dead replica is a real process (tests/support/replica.py) on the test's database; the survivor
is a Pilot in this process whose sweeper is driven one pass at a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support import CHAOS_SKILL
from tests.support.fakes import ScriptedDispatcher
from tests.support.server_proc import PILOT
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.engine.execution.runlease import run_key
from vmware_pilot.engine.requests import ApproveRequest
from vmware_pilot.engine.sweeper import Sweeper

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
LEASE = 4


def _poll(condition: object, what: str, limit: float = 120) -> None:
    """Wait for ``condition()`` (a guard against hanging, not a timing claim)."""
    deadline = time.monotonic() + limit
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)


@contextmanager
def replica(backend_settings: Settings, mode: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A replica process running a workflow of ``mode``; yields it and the workflow's id."""
    env = {
        **os.environ,
        "VMWARE_PILOT_HOME": str(backend_settings.home_path),
        "VMWARE_PILOT_DATABASE_URL": backend_settings.database_url,
        "VMWARE_PILOT_LEASE_SECONDS": str(LEASE),
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.replica", mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        wid = proc.stdout.readline().strip()
        assert wid, "the replica created its workflow"
        yield proc, wid
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


@contextmanager
def survivor(backend_settings: Settings, dispatcher: ScriptedDispatcher | None) -> Iterator[PilotApp]:
    app = build_app(backend_settings.model_copy(update={"lease_seconds": LEASE}), dispatcher=dispatcher)
    try:
        yield app
    finally:
        app.close()


async def _sweep_until_continued(app: PilotApp, wid: str) -> list[str]:
    """Sweep (as the server's loop does) until this Pilot continued ``wid``; every sweep before
    must leave it alone (its dead replica's lease still lasts)."""
    sweeper = Sweeper(lambda: app.service.runner, interval=0.1)
    deadline = time.monotonic() + 120  # a guard against hanging, not a timing claim
    while True:
        continued = await sweeper.sweep()
        if continued:
            return continued
        lease = app.store.leases.lease(run_key(wid))
        assert lease is not None and app.store.workflows.load(wid).state is WorkflowState.RUNNING
        assert time.monotonic() < deadline, "the workflow was never continued"
        await asyncio.sleep(0.1)


async def test_a_read_in_flight_runs_again_on_another_replica_which_takes_the_run_to_its_gate_and_end(
    backend_settings: Settings, actor: Actor
) -> None:
    dispatcher = ScriptedDispatcher()
    with survivor(backend_settings, dispatcher) as app, replica(backend_settings, "read") as (proc, wid):
        _poll(
            lambda: app.store.workflows.load(wid).steps[0].status is StepStatus.RUNNING, "the read in flight"
        )
        proc.kill()
        proc.wait(timeout=30)
        assert await _sweep_until_continued(app, wid) == [wid]

        wf = app.store.workflows.load(wid)
        assert wf.state is WorkflowState.AWAITING_APPROVAL
        assert wf.steps[0].status is StepStatus.SUCCESS
        assert [c[1] for c in dispatcher.step_calls] == ["get_events"]
        actions = [e.action for e in wf.audit_log]
        assert actions.count("read_step_restarted") == 1 and "interrupted_step_detected" not in actions

        out = (
            await app.service.approve(ApproveRequest(actor, wid, approver="alice"))
        ).payload()  # on the surviving replica
        assert out["outcome"] == "completed"
        assert [c[1] for c in dispatcher.step_calls] == ["get_events", "power_on_vm"]
        assert app.store.audit.verify_audit().ok


async def test_a_replica_killed_between_two_steps_is_continued_from_the_next_step(
    backend_settings: Settings,
) -> None:
    dispatcher = ScriptedDispatcher()
    with survivor(backend_settings, dispatcher) as app, replica(backend_settings, "between") as (proc, wid):
        proc.wait(timeout=60)  # it killed itself right after recording step 0
        wf = app.store.workflows.load(wid)
        assert wf.state is WorkflowState.RUNNING
        assert [s.status for s in wf.steps[:2]] == [StepStatus.SUCCESS, StepStatus.PENDING]

        assert await _sweep_until_continued(app, wid) == [wid]
        wf = app.store.workflows.load(wid)
        assert wf.state is WorkflowState.AWAITING_APPROVAL
        assert [c[1] for c in dispatcher.step_calls] == ["get_alarms"], "step 0 was not run again"
        assert "read_step_restarted" not in [e.action for e in wf.audit_log]
        assert app.store.audit.verify_audit().ok


async def test_a_write_in_flight_is_never_run_again_its_workflow_stops_interrupted(
    backend_settings: Settings,
) -> None:
    dispatcher = ScriptedDispatcher()
    with survivor(backend_settings, dispatcher) as app, replica(backend_settings, "write") as (proc, wid):
        _poll(
            lambda: app.store.workflows.load(wid).steps[0].status is StepStatus.RUNNING, "the write in flight"
        )
        proc.kill()
        proc.wait(timeout=30)
        assert await _sweep_until_continued(app, wid) == [wid]

        wf = app.store.workflows.load(wid)
        assert (wf.state, wf.steps[0].status) == (WorkflowState.FAILED, StepStatus.INTERRUPTED)
        # Settling reads the VM, its tasks and events; the write itself is never sent again.
        resent = [c for c in dispatcher.step_calls if c[1] == "power_on_vm"]
        assert resent == [], "the write whose effect is unknown was not started again"
        assert [e.action for e in wf.audit_log].count("interrupted_step_detected") == 1
        assert await Sweeper(lambda: app.service.runner, 0.1).sweep() == []
        assert app.store.audit.verify_audit().ok


async def test_a_live_run_is_never_taken_over_and_a_pilot_without_dispatch_sweeps_nothing(
    backend_settings: Settings,
) -> None:
    dispatcher = ScriptedDispatcher()
    with (
        survivor(backend_settings, dispatcher) as app,
        survivor(backend_settings, None) as handback,
        replica(backend_settings, "read") as (proc, wid),
    ):
        _poll(
            lambda: app.store.workflows.load(wid).steps[0].status is StepStatus.RUNNING, "the read in flight"
        )
        for _ in range(4 * LEASE):  # the live replica renews its leases all along
            assert await Sweeper(lambda: app.service.runner, 0.1).sweep() == []
            await asyncio.sleep(1 / 3)
        proc.kill()
        proc.wait(timeout=30)
        _poll(lambda: app.store.leases.lease(run_key(wid)).expired, "the run lease expired")  # type: ignore[union-attr]
        assert await Sweeper(lambda: handback.service.runner, 0.1).sweep() == []
        assert app.store.workflows.load(wid).steps[0].status is StepStatus.RUNNING
        assert dispatcher.step_calls == []


async def test_a_stdio_server_with_dispatch_continues_the_run_of_a_replica_that_died(
    backend_settings: Settings, tmp_path: Path
) -> None:
    """The sweeper of a real `vmware-pilot mcp --dispatch` (stdio) process, against a real skill
    server that logs its calls (tests/support/chaos_skill.py)."""
    log = tmp_path / "calls.log"
    log.touch()
    skill = f"{sys.executable} {CHAOS_SKILL}"
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "VMWARE_PILOT_HOME": str(backend_settings.home_path),
        "VMWARE_PILOT_DATABASE_URL": backend_settings.database_url,
        "VMWARE_PILOT_LEASE_SECONDS": str(LEASE),
        "VMWARE_PILOT_SWEEP_SECONDS": "0.5",
        "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"monitor": skill, "aiops": skill}),
        "CHAOS_LOG": str(log),
    }
    with replica(backend_settings, "between") as (proc, wid):
        proc.wait(timeout=60)  # it killed itself right after recording step 0
        params = StdioServerParameters(command=str(PILOT), args=["mcp", "--dispatch"], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            deadline = time.monotonic() + 120  # a guard against hanging, not a timing claim
            while True:
                reply = await session.call_tool("get_workflow_status", {"workflow_id": wid})
                state = reply.structured_content["state"] if reply.structured_content else None
                if state != "running":
                    break
                assert time.monotonic() < deadline, "the stdio server never continued the run"
                await asyncio.sleep(0.2)
    assert state == "awaiting_approval"
    calls = [line.split()[:3] for line in log.read_text().splitlines()]
    assert calls == [["start", "get_alarms", "-"], ["end", "get_alarms", "-"]], "step 0 was not run again"
