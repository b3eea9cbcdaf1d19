"""A step in flight in another Pilot process is not a crash; a run never starts a step twice.

Another Pilot process sharing the store (a second MCP client's server, the operator CLI) must
tell a live run from a step left ``running`` by a process that died.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.engine.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import utcnow
from vmware_pilot.domain.enums import Event, StepStatus
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine.owner import RUN_OWNER_KEY, owner_state, this_process
from vmware_pilot.errors import StateRefused

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}


def on(vm: str) -> dict[str, Any]:
    return {"action": f"on_{vm}", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": vm}}


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of this host that is not this one (stands in for another Pilot)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


def dead_pid() -> int:
    """The pid of a process that has exited."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True
    )
    return int(done.stdout)


def owner_of(child: subprocess.Popen[bytes]) -> dict[str, Any]:
    mine = this_process()
    stat = Path(f"/proc/{child.pid}/stat")
    started = stat.read_text().rsplit(")", 1)[-1].split()[19] if mine["started"] else ""
    return {"host": mine["host"], "pid": child.pid, "started": started}


def running_elsewhere(app: PilotApp, actor: Actor, owner: dict[str, Any], minutes_ago: float = 0) -> str:
    """A workflow whose step 1 another process marked running (as a live dispatch does)."""
    wid: str = app.service.create_workflow(actor, "ops", "t", [GATE, on("a")])["workflow_id"]
    wf = app.store.load(wid)
    fire(wf, Event.START_RUN)
    wf.steps[0].status = StepStatus.SUCCESS
    wf.steps[1].status = StepStatus.RUNNING
    wf.steps[1].started_at = utcnow() - timedelta(minutes=minutes_ago)
    wf.extra[RUN_OWNER_KEY] = owner
    app.store.save(wf)
    return wid


def test_owner_state_tells_this_live_dead_and_unknown(other_process: subprocess.Popen[bytes]) -> None:
    assert owner_state(this_process()) == "this"
    assert owner_state(owner_of(other_process)) == "alive"
    assert owner_state({**owner_of(other_process), "started": "1"}) == "dead", "a reused pid is not the owner"
    assert owner_state({"host": socket.gethostname(), "pid": dead_pid(), "started": ""}) == "dead"
    assert owner_state({"host": "elsewhere.example", "pid": 1, "started": ""}) == "unknown"


async def test_a_run_in_another_live_process_is_not_taken_for_a_crash(
    app: PilotApp, actor: Actor, other_process: subprocess.Popen[bytes]
) -> None:
    wid = running_elsewhere(app, actor, owner_of(other_process))
    before = app.store.load(wid)
    with pytest.raises(StateRefused) as info:
        await app.service.run_workflow(actor, wid)
    assert f"pid {other_process.pid}" in info.value.message
    assert "get_workflow_status" in info.value.hint
    after = app.store.load(wid)
    assert (after.version, after.steps[1].status) == (before.version, StepStatus.RUNNING), "nothing changed"


async def test_a_step_left_by_a_dead_process_is_a_crash(app: PilotApp, actor: Actor) -> None:
    dead = {"host": socket.gethostname(), "pid": dead_pid(), "started": "1"}
    wid = running_elsewhere(app, actor, dead)
    out = await app.service.run_workflow(actor, wid)
    assert (out["outcome"], out["steps"][1]["status"]) == ("failed", "interrupted")
    assert RUN_OWNER_KEY not in app.store.load(wid).extra


async def test_a_step_in_flight_on_another_host_counts_as_crashed_only_after_the_timeouts(
    app: PilotApp, actor: Actor
) -> None:
    remote = {"host": "elsewhere.example", "pid": 4242, "started": "7"}
    recent = running_elsewhere(app, actor, remote, minutes_ago=1)
    with pytest.raises(StateRefused):
        await app.service.run_workflow(actor, recent)
    old = running_elsewhere(app, actor, remote, minutes_ago=60)  # past 1800 s + 60 s
    assert (await app.service.run_workflow(actor, old))["outcome"] == "failed"


async def test_the_run_owner_is_recorded_while_a_step_is_in_flight_and_cleared_after(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    wid: str = dapp.service.create_workflow(actor, "ops", "t", [GATE, on("a")])["workflow_id"]
    seen: list[Any] = []

    def record(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        seen.append(dapp.store.load(wid).extra.get(RUN_OWNER_KEY))
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

    dispatcher.answers["power_on_vm"] = record
    await dapp.service.run_workflow(actor, wid)
    out = await dapp.service.approve(actor, wid, approver="alice")
    assert out["outcome"] == "completed"
    assert seen == [this_process()]
    assert RUN_OWNER_KEY not in dapp.store.load(wid).extra


async def test_a_run_stops_when_another_caller_ended_the_workflow_meanwhile(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    wid: str = dapp.service.create_workflow(actor, "ops", "t", [GATE, on("a"), on("b")])["workflow_id"]

    def meanwhile_failed_elsewhere(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        wf = dapp.store.load(wid)  # another Pilot declared the run dead and failed the workflow
        wf.steps[1].status = StepStatus.INTERRUPTED
        fire(wf, Event.FAIL)
        dapp.store.save(wf)
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

    dispatcher.answers["power_on_vm"] = meanwhile_failed_elsewhere
    await dapp.service.run_workflow(actor, wid)
    with pytest.raises(StateRefused, match="changed by another caller"):
        await dapp.service.approve(actor, wid, approver="alice")
    assert [c[2]["vm_name"] for c in dispatcher.step_calls] == ["a"], "step 2 was never dispatched"
    assert dapp.store.load(wid).steps[2].status is StepStatus.PENDING


async def test_rollback_and_cancel_wait_for_a_run_in_another_live_process_even_when_acknowledged(
    app: PilotApp, actor: Actor, other_process: subprocess.Popen[bytes]
) -> None:
    wid = running_elsewhere(app, actor, owner_of(other_process))
    before = app.store.load(wid).version
    with pytest.raises(StateRefused, match="running in another Pilot process"):
        await app.service.rollback(actor, wid, confirm=True, acknowledge_unknown_effects=True)
    with pytest.raises(StateRefused, match="running in another Pilot process"):
        await app.service.cancel_workflow(actor, wid, confirm=True, acknowledge_unknown_effects=True)
    assert app.store.load(wid).version == before, "nothing changed"
    other_process.kill()
    other_process.wait()
    out = await app.service.cancel_workflow(actor, wid, confirm=True, acknowledge_unknown_effects=True)
    assert out["state"] == "cancelled", "once that process is gone the acknowledgement applies"
