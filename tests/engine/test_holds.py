"""The pre-write seam (engine/execution/holds.py): a check that holds a write step keeps it from
being sent and stops the run at the gate that released it, which works as any gate (approve,
reject, get_workflow_status, step numbers unchanged); a check that raises holds too; a write
with no gate before it is not sent and the run fails. Reads are never checked."""

from __future__ import annotations

from typing import Any

from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.execution.holds import Hold, PreWriteCheck, WriteContext
from vmware_pilot.engine.requests import (
    ApproveRequest,
    CreateRequest,
    RejectRequest,
    RollbackRequest,
    RunRequest,
)


def gate(message: str = "Restart?") -> dict[str, Any]:
    return {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": message}}


def write(vm: str, tool: str = "power_on_vm") -> dict[str, Any]:
    return {
        "action": f"{tool}_{vm}",
        "skill": "aiops",
        "tool": tool,
        "params": {"vm_name": vm, "target": "lab"},
    }


READ = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {"target": "lab"}}


class Scripted:
    """A check answering the holds it is given, one per call (None: let the write through), and
    remembering which steps it was asked about."""

    def __init__(self, *answers: Hold | Exception | None) -> None:
        self.answers = list(answers)
        self.asked: list[int] = []

    async def run(self, ctx: WriteContext) -> Hold | None:
        self.asked.append(ctx.index)
        answer = self.answers.pop(0) if self.answers else None
        if isinstance(answer, Exception):
            raise answer
        return answer


def install(app: PilotApp, check: Scripted) -> None:
    app.service.runner.checks.append(PreWriteCheck("test", check.run))


HOLD = Hold(kind="test", event="test_held", message="web: power_state was poweredOn, is now poweredOff")


def sent(dispatcher: ScriptedDispatcher) -> list[str]:
    return [f"{c[1]}:{c[2].get('vm_name', '')}" for c in dispatcher.step_calls]


async def test_a_held_write_is_not_sent_and_the_run_waits_at_its_gate_again(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    check = Scripted(None, HOLD)
    install(dapp, check)
    steps = [READ, gate(), write("a"), write("b"), READ]
    wid = dapp.service.create_workflow(CreateRequest(actor, "ops", "test", steps)).payload()["workflow_id"]
    assert ((await dapp.service.run_workflow(RunRequest(actor, wid))).payload())[
        "outcome"
    ] == "awaiting_approval"
    assert check.asked == [], "reads are not checked"

    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "awaiting_approval"
    assert check.asked == [2, 3]
    assert sent(dispatcher) == ["get_alarms:", "power_on_vm:a"], "step 3 was not sent"
    assert [s["status"] for s in out["steps"]] == ["success", "pending", "success", "pending", "pending"]
    assert out["pending_gate"]["index"] == 1
    assert out["pending_gate"]["message"].startswith("web: power_state was poweredOn, is now poweredOff")
    assert "(The gate's message: Restart?)" in out["pending_gate"]["message"]

    status = dapp.service.get_workflow_status(wid).payload()
    (record,) = status["gates"]
    assert record["status"] == "pending" and record["approvals"] == [] and record["approvals_missing"] == 1
    assert record["hold"]["step"] == 3 and record["hold"]["kind"] == "test"
    assert [a["approver"] for a in record["earlier"][0]["approvals"]] == ["alice"]
    held = [e for e in status["audit_log"] if e["action"] == "test_held"]
    assert len(held) == 1 and "Step 3 (aiops.power_on_vm) held at the gate at step 1" in held[0]["detail"]
    # The gate is inspected again for the steps still to run, from the held step on.
    assert [s["step"] for s in status["prediction"]["steps"]] == [3, 4]

    done = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice", gate_step=1))).payload()
    assert done["outcome"] == "completed"
    assert check.asked == [2, 3, 3]
    assert sent(dispatcher) == ["get_alarms:", "power_on_vm:a", "power_on_vm:b", "get_alarms:"]


async def test_a_held_write_can_be_rejected(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    install(dapp, Scripted(HOLD))
    wid = dapp.service.create_workflow(CreateRequest(actor, "ops", "test", [gate(), write("a")])).payload()[
        "workflow_id"
    ]
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert ((await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload())[
        "outcome"
    ] == "awaiting_approval"
    out = dapp.service.reject(RejectRequest(actor, wid, "not after that change", rejected_by="bob")).payload()
    assert out["state"] == "cancelled" and out["steps"][1]["status"] == "skipped"
    assert sent(dispatcher) == []


async def test_a_check_that_raises_holds_the_write(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    install(dapp, Scripted(RuntimeError("boom")))
    wid = dapp.service.create_workflow(CreateRequest(actor, "ops", "test", [gate(), write("a")])).payload()[
        "workflow_id"
    ]
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "awaiting_approval" and sent(dispatcher) == []
    assert "could not make its test check before step 1" in out["pending_gate"]["message"]
    assert "RuntimeError: boom" in out["pending_gate"]["message"]


async def test_a_held_write_with_no_gate_before_it_is_not_sent_and_the_run_fails(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    install(dapp, Scripted(HOLD))
    # A medium-risk write (recoverable) needs no gate in a custom plan.
    wid = dapp.service.create_workflow(
        CreateRequest(actor, "ops", "test", [READ, write("a"), READ])
    ).payload()["workflow_id"]
    out = (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "failed"
    assert [s["status"] for s in out["steps"]] == ["success", "failed", "skipped"]
    assert out["steps"][1]["result"]["error"].startswith("Not sent: web: power_state was poweredOn")
    assert sent(dispatcher) == ["get_alarms:"]


async def test_a_run_held_after_a_write_rolls_back_that_write(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    install(dapp, Scripted(None, HOLD))
    first = {
        **write("a", "power_off_vm"),
        "rollback_tool": "power_on_vm",
        "rollback_params": {"vm_name": "a"},
    }
    wid = dapp.service.create_workflow(
        CreateRequest(actor, "ops", "test", [gate(), first, write("b")])
    ).payload()["workflow_id"]
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert ((await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload())[
        "outcome"
    ] == "awaiting_approval"
    out = (await dapp.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
    assert [s["status"] for s in out["steps"]] == ["pending", "rolled_back", "pending"]
    assert sent(dispatcher) == ["power_off_vm:a", "power_on_vm:a"]
