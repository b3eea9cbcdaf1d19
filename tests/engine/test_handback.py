"""The engine without a dispatcher: steps are handed back to the caller (docs/contract.md#running)."""

from __future__ import annotations

from typing import Any

import pytest

from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.engine.requests import (
    ApproveRequest,
    CancelRequest,
    CreateRequest,
    RollbackRequest,
    RunRequest,
)
from vmware_pilot.errors import InvalidTransition, PilotError, StateRefused

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}


def steps() -> list[dict[str, Any]]:
    return [
        {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {"target": "vc1"}},
        GATE,
        {
            "action": "off",
            "skill": "aiops",
            "tool": "power_off_vm",
            "params": {"vm_name": "web-01", "confirm": True},
            "rollback_tool": "power_on_vm",
            "rollback_params": {"vm_name": "web-01"},
        },
    ]


def create(app: PilotApp, actor: Actor, items: list[dict[str, Any]] | None = None) -> str:
    out = app.service.create_workflow(
        CreateRequest(actor, "off-web", "power off web-01", items or steps())
    ).payload()
    wid: str = out["workflow_id"]
    return wid


async def test_run_hands_back_steps_until_the_gate(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor)
    out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "awaiting_approval"
    assert out["state"] == "awaiting_approval"
    assert [s["status"] for s in out["steps"]] == ["not_executed", "pending", "pending"]
    assert out["pending_dispatch"] == [
        {"index": 0, "skill": "monitor", "tool": "get_alarms", "params": {"target": "vc1"}}
    ]
    assert "NOT completed" in out["message"]
    actions = [e["action"] for e in out["audit_log"]]
    assert actions == ["workflow_created", "run_started", "step_not_executed", "awaiting_approval"]


async def test_approve_refuses_until_handed_out_steps_are_acknowledged(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor)
    (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    with pytest.raises(StateRefused) as info:
        (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    payload = info.value.payload()
    assert payload["not_executed_before_gate"] == [{"index": 0, "skill": "monitor", "tool": "get_alarms"}]
    assert payload["state"] == "awaiting_approval"
    assert app.service.get_workflow_status(wid).payload()["state"] == "awaiting_approval", (
        "refusal changes nothing"
    )

    out = (
        await app.service.approve(ApproveRequest(actor, wid, approver="alice", acknowledge_not_executed=True))
    ).payload()
    statuses = [s["status"] for s in out["steps"]]
    assert statuses == ["reported_done", "success", "not_executed"]
    assert out["steps"][1]["result"] == {"approved_by": "alice", "acknowledged_not_executed": [0]}
    assert out["outcome"] == "dispatch_required" and out["state"] == "pending"
    assert [p["index"] for p in out["pending_dispatch"]] == [2]
    assert out["pending_dispatch"][0]["rollback_tool"] == "power_on_vm"
    assert out["approved_by"] == "alice"
    actions = [e["action"] for e in out["audit_log"]]
    assert "approved_over_unexecuted_steps" in actions and actions[-1] == "dispatch_required"


async def test_blank_approver_is_refused(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor, [GATE])
    (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    with pytest.raises(StateRefused, match="approver is required"):
        (await app.service.approve(ApproveRequest(actor, wid, approver="   "))).payload()


async def test_approve_when_not_awaiting_approval_is_refused(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor)
    with pytest.raises(StateRefused, match="is not awaiting approval"):
        (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()


async def test_gate_only_workflow_completes_without_dispatch(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor, [GATE])
    (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "completed" and out["state"] == "completed"


async def test_crash_left_running_step_is_marked_interrupted(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor)
    wf = app.store.workflows.load(wid)
    wf.steps[0].status = StepStatus.RUNNING  # what a process killed mid-dispatch leaves behind
    app.store.workflows.save(wf)
    out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "failed" and out["state"] == "failed"
    assert out["steps"][0]["status"] == "interrupted"
    assert out["steps"][0]["completed_at"]
    assert "interrupted" in out["error"]
    assert [e["action"] for e in out["audit_log"][-2:]] == ["interrupted_step_detected", "step_settled"]
    # Without dispatch Pilot cannot read the target: the effect stays unknown, with that reason.
    settled = out["steps"][0]["result"]["settled"]
    assert settled["effect"] == "unknown" and "hand-back mode" in settled["reason"]
    assert "whether it took effect is unknown (Pilot runs without dispatch" in out["error"]
    with pytest.raises(StateRefused) as info:
        (await app.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
    assert info.value.payload()["blast_radius"]["unknown_effects_count"] == 1


async def test_cancelled_workflow_never_runs_or_approves(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor)
    preview = (await app.service.cancel_workflow(CancelRequest(actor, wid, reason="not today"))).payload()
    assert preview["action"] == "preview"
    assert app.service.get_workflow_status(wid).payload()["state"] == "pending", "preview changes nothing"
    out = (
        await app.service.cancel_workflow(CancelRequest(actor, wid, reason="not today", confirm=True))
    ).payload()
    assert out["state"] == "cancelled" and out["outcome"] == "cancelled" and out["action"] == "cancelled"
    assert out["blocked_reason"] == "not today"
    assert {s["status"] for s in out["steps"]} == {"skipped"}
    with pytest.raises(StateRefused) as info:
        (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert info.value.payload()["state"] == "cancelled"
    with pytest.raises(StateRefused):
        (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    with pytest.raises(StateRefused) as again:
        (await app.service.cancel_workflow(CancelRequest(actor, wid, confirm=True))).payload()
    assert again.value.payload()["blast_radius"]["blockers"]


async def test_rollback_without_dispatch_reverses_only_pilot_successes(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor)
    (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    (
        await app.service.approve(ApproveRequest(actor, wid, approver="alice", acknowledge_not_executed=True))
    ).payload()
    preview = (await app.service.rollback(RollbackRequest(actor, wid))).payload()
    radius = preview["blast_radius"]
    assert preview["action"] == "preview"
    assert radius["would_roll_back_count"] == 0
    assert [s["index"] for s in radius["not_reversed_by_pilot"]] == [2]
    out = (await app.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
    assert out["action"] == "rolled_back" and out["state"] == "failed"
    assert "outcome" not in out
    assert out["rollback_results"] == []


async def test_diff_report_follows_every_transition(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor)
    before = app.service.get_workflow_status(wid).payload()["diff_report"]
    assert [p["index"] for p in before["pending"]] == [0, 1, 2]
    (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    mid = app.service.get_workflow_status(wid).payload()["diff_report"]
    assert [h["index"] for h in mid["handed_out"]] == [0]
    (
        await app.service.approve(ApproveRequest(actor, wid, approver="alice", acknowledge_not_executed=True))
    ).payload()
    after = app.service.get_workflow_status(wid).payload()["diff_report"]
    assert [r["index"] for r in after["reported_done"]] == [0]
    assert after["handed_out"] == [
        {"index": 2, "skill": "aiops", "tool": "power_off_vm", "object": "web-01", "status": "not_executed"}
    ]
    assert after["pending"] == []


async def test_rerun_relists_handed_out_steps(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor, [steps()[0]])
    first = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    second = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert first["outcome"] == second["outcome"] == "dispatch_required"
    assert second["pending_dispatch"] == first["pending_dispatch"]


async def test_concurrent_writer_is_not_overwritten(app: PilotApp, actor: Actor) -> None:
    wid = create(app, actor)
    stale = app.store.workflows.load(wid)
    (await app.service.run_workflow(RunRequest(actor, wid))).payload()  # moves on without the stale copy
    stale.steps[0].status = StepStatus.SKIPPED
    with pytest.raises(PilotError):
        app.store.workflows.save(stale)
    assert app.service.get_workflow_status(wid).payload()["steps"][0]["status"] == "not_executed"


def test_state_machine_guards_the_runner(app: PilotApp, actor: Actor) -> None:
    from vmware_pilot.domain.enums import Event
    from vmware_pilot.domain.transitions import fire

    wid = create(app, actor)
    wf = app.store.workflows.load(wid)
    with pytest.raises(InvalidTransition):
        fire(wf, Event.APPROVE)


AGENT = Actor(name="agent-bot", kind="token", role="operator")
PERSON = Actor(name="carol", kind="os")


@pytest.mark.parametrize("channel", ["cli", "console"])
async def test_person_approval_releases_steps_to_the_agent_not_the_approver(
    app: PilotApp, channel: str
) -> None:
    """A person approving at the CLI or console does not take the released steps: they stay with
    the agent that runs the workflow, whose next run_workflow gets them in pending_dispatch."""
    wid = create(app, AGENT)
    first = (await app.service.run_workflow(RunRequest(AGENT, wid))).payload()
    assert [p["index"] for p in first["pending_dispatch"]] == [0]

    digest = app.service.pending_gate(wid).gate.digest  # the plan the person was shown
    request = ApproveRequest(
        PERSON, wid, approver="carol", acknowledge_not_executed=True, door=channel, expected_digest=digest
    )
    out = (await app.service.approve(request)).payload()
    assert "pending_dispatch" not in out
    assert out["outcome"] == "dispatch_required"
    assert out["released_to"] == "token:agent-bot"
    assert out["with_another_caller"] == [
        {"index": 2, "skill": "aiops", "tool": "power_off_vm", "handed_to": "token:agent-bot"}
    ]
    assert "handed to the agent that runs workflow" in out["message"]
    assert "token:agent-bot" in out["message"] and "run_workflow" in out["message"]

    again = (await app.service.run_workflow(RunRequest(AGENT, wid))).payload()
    assert [p["index"] for p in again["pending_dispatch"]] == [2]
    assert again["pending_dispatch"][0]["params"] == {"vm_name": "web-01", "confirm": True}
    with pytest.raises(StateRefused) as info:
        (await app.service.run_workflow(RunRequest(PERSON, wid))).payload()
    assert info.value.payload()["handed_to"] == "token:agent-bot"


async def test_person_approval_before_any_handout_releases_to_the_creator(app: PilotApp) -> None:
    wid = create(app, AGENT, [GATE, steps()[2]])
    (await app.service.run_workflow(RunRequest(AGENT, wid))).payload()
    out = (await app.service.approve(ApproveRequest(PERSON, wid, approver="carol", door="cli"))).payload()
    assert "pending_dispatch" not in out and out["released_to"] == "token:agent-bot"
    again = (await app.service.run_workflow(RunRequest(AGENT, wid))).payload()
    assert [p["index"] for p in again["pending_dispatch"]] == [1]


async def test_agent_approving_through_mcp_still_receives_the_steps(app: PilotApp) -> None:
    wid = create(app, AGENT, [GATE, steps()[2]])
    (await app.service.run_workflow(RunRequest(AGENT, wid))).payload()
    out = (await app.service.approve(ApproveRequest(AGENT, wid))).payload()
    assert [p["index"] for p in out["pending_dispatch"]] == [1]
    assert "released_to" not in out
