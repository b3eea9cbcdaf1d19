"""rollback and cancel_workflow: preview, confirm, blockers, unknown effects.

See docs/contract.md#rollback-and-cancel.
"""

from __future__ import annotations

from tests.support.mcp_client import GATE, READ_STEP, Client
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.enums import StepStatus

ROLLBACK_KEYS = [
    "workflow",
    "state_after",
    "unknown_effects_count",
    "unknown_effects",
    "unknown_effects_acknowledged",
    "would_roll_back_count",
    "would_roll_back",
    "left_in_place_count",
    "left_in_place",
    "left_in_place_note",
    "not_reversed_by_pilot_count",
    "not_reversed_by_pilot",
    "not_reversible_outside_pilot_count",
    "not_reversible_outside_pilot",
    "left_behind_by_earlier_rollback_count",
    "left_behind_by_earlier_rollback",
    "not_reversible_outside_pilot_note",
    "blockers",
    "unmeasured",
]
CANCEL_KEYS = [
    "workflow",
    "state_after",
    "unknown_effects_count",
    "unknown_effects",
    "unknown_effects_acknowledged",
    "left_in_place_count",
    "left_in_place",
    "performed_outside_pilot_count",
    "performed_outside_pilot",
    "would_skip_count",
    "would_skip",
    "handed_out_to_caller_count",
    "handed_out_to_caller",
    "handed_out_to_caller_note",
    "blockers",
    "unmeasured",
]
POWER_ON = {
    "action": "start",
    "skill": "aiops",
    "tool": "power_on_vm",
    "params": {"vm_name": "web-01"},
    "rollback_tool": "power_off_vm",
    "rollback_params": {"vm_name": "web-01", "password": "hunter2"},
}


async def _at_gate_acknowledged(client: Client) -> str:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    await client.ok("approve", workflow_id=wf, approver="alice", acknowledge_not_executed=True)
    return wf


async def _crashed_step(client: Client, app: PilotApp) -> str:
    """A pending workflow whose first step was left 'running' by a Pilot process that died."""
    wf_id = await client.incident()
    wf = app.store.workflows.load(wf_id)
    wf.steps[0].status = StepStatus.RUNNING
    app.store.workflows.save(wf)
    return wf_id


# --- rollback --------------------------------------------------------------------------------------
async def test_rollback_preview_changes_nothing(client: Client) -> None:
    wf = await _at_gate_acknowledged(client)
    before = await client.stored(wf)
    out = await client.ok("rollback", workflow_id=wf)
    assert out["action"] == "preview" and out["workflow_id"] == wf and out["hint"]
    radius = out["blast_radius"]
    assert list(radius) == ROLLBACK_KEYS
    assert radius["workflow"] == {"id": wf, "type": "incident_response", "state": "pending"}
    assert radius["state_after"] == "failed"
    assert [e["index"] for e in radius["not_reversible_outside_pilot"]] == [3]
    assert radius["not_reversible_outside_pilot_note"]
    assert radius["blockers"] == [] and radius["unmeasured"] == []
    assert await client.stored(wf) == before


async def test_rollback_preview_lists_caller_undo_with_secrets_redacted(client: Client) -> None:
    wf = await client.custom([GATE, POWER_ON])
    await client.ok("run_workflow", workflow_id=wf)
    await client.ok("approve", workflow_id=wf, approver="alice")
    radius = (await client.ok("rollback", workflow_id=wf))["blast_radius"]
    entry = radius["not_reversed_by_pilot"][0]
    assert (entry["index"], entry["rollback_tool"]) == (1, "power_off_vm")
    assert entry["rollback_params"]["password"] == "***"
    assert "hunter2" not in str(radius)


async def test_rollback_confirm_refuses_a_draft(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    out = await client.refused("rollback", workflow_id=wf, confirm=True)
    assert out["blast_radius"]["blockers"]
    assert (out["workflow_id"], out["state"]) == (wf, "draft")
    assert "Nothing was changed" in out["error"]
    assert (await client.status(wf))["state"] == "draft"


async def test_rollback_confirm_refuses_completed_and_cancelled(client: Client) -> None:
    done = await client.custom([GATE])
    await client.ok("run_workflow", workflow_id=done)
    await client.ok("approve", workflow_id=done, approver="alice")
    gone = await client.incident()
    await client.ok("cancel_workflow", workflow_id=gone, confirm=True)
    for wf, state in ((done, "completed"), (gone, "cancelled")):
        out = await client.refused("rollback", workflow_id=wf, confirm=True)
        assert out["blast_radius"]["blockers"], state
        assert (await client.status(wf))["state"] == state


async def test_rollback_confirm_acts_and_ends_failed(client: Client) -> None:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    out = await client.ok("rollback", workflow_id=wf, confirm=True)
    assert out["action"] == "rolled_back"
    assert out["state"] == "failed"
    assert "outcome" not in out
    assert isinstance(out["rollback_results"], list)
    assert out["blast_radius"]["workflow"]["state"] == "awaiting_approval"  # computed before acting
    log = [e["action"] for e in (await client.status(wf))["audit_log"]]
    assert "rollback_started" in log and "rollback_completed" in log


async def test_rollback_needs_acknowledgement_of_unknown_effects(client: Client, pilot_app: PilotApp) -> None:
    wf = await _crashed_step(client, pilot_app)
    preview = (await client.ok("rollback", workflow_id=wf))["blast_radius"]
    assert [e["index"] for e in preview["unknown_effects"]] == [0]
    assert preview["unmeasured"]
    refused = await client.refused("rollback", workflow_id=wf, confirm=True)
    assert refused["blast_radius"]["unmeasured"]
    assert (await client.status(wf))["state"] == "pending"
    out = await client.ok("rollback", workflow_id=wf, confirm=True, acknowledge_unknown_effects=True)
    assert out["action"] == "rolled_back"
    assert out["blast_radius"]["unknown_effects_acknowledged"] is True
    assert out["blast_radius"]["unmeasured"] == []


# --- cancel_workflow -------------------------------------------------------------------------------
async def test_cancel_preview_changes_nothing(client: Client) -> None:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    before = await client.stored(wf)
    out = await client.ok("cancel_workflow", workflow_id=wf, reason="not today")
    assert out["action"] == "preview" and out["hint"]
    radius = out["blast_radius"]
    assert list(radius) == CANCEL_KEYS
    assert radius["state_after"] == "cancelled"
    assert [e["index"] for e in radius["handed_out_to_caller"]] == [0, 1]
    assert radius["handed_out_to_caller_note"]
    assert [e["index"] for e in radius["would_skip"]] == [2, 3]
    assert await client.stored(wf) == before


async def test_cancel_confirm_makes_it_terminal(client: Client) -> None:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    out = await client.ok("cancel_workflow", workflow_id=wf, reason="approval rejected", confirm=True)
    assert (out["state"], out["outcome"], out["action"]) == ("cancelled", "cancelled", "cancelled")
    assert out["blocked_reason"] == "approval rejected"
    assert [s["status"] for s in out["steps"]] == ["not_executed", "not_executed", "skipped", "skipped"]
    assert out["blast_radius"]["workflow"]["state"] == "awaiting_approval"
    log = (await client.status(wf))["audit_log"]
    assert log[-1]["action"] == "cancelled" and "approval rejected" in log[-1]["detail"]
    assert wf not in [w["id"] for w in (await client.ok("list_workflows"))["active_workflows"]]


async def test_cancel_confirm_refuses_terminal_workflows(client: Client) -> None:
    wf = await client.incident()
    await client.ok("cancel_workflow", workflow_id=wf, confirm=True)
    out = await client.refused("cancel_workflow", workflow_id=wf, confirm=True)
    assert out["blast_radius"]["blockers"]
    assert out["state"] == "cancelled"
    done = await client.custom([GATE])
    await client.ok("run_workflow", workflow_id=done)
    await client.ok("approve", workflow_id=done, approver="alice")
    assert (await client.refused("cancel_workflow", workflow_id=done, confirm=True))["blast_radius"][
        "blockers"
    ]


async def test_cancel_needs_acknowledgement_of_unknown_effects(client: Client, pilot_app: PilotApp) -> None:
    wf = await _crashed_step(client, pilot_app)
    refused = await client.refused("cancel_workflow", workflow_id=wf, confirm=True)
    assert [e["index"] for e in refused["blast_radius"]["unknown_effects"]] == [0]
    assert (await client.status(wf))["state"] == "pending"
    out = await client.ok("cancel_workflow", workflow_id=wf, confirm=True, acknowledge_unknown_effects=True)
    assert out["state"] == "cancelled"
    assert out["blocked_reason"] == "cancelled"


async def test_reads_only_workflow_can_be_cancelled_before_running(client: Client) -> None:
    wf = await client.custom([READ_STEP])
    out = await client.ok("cancel_workflow", workflow_id=wf, confirm=True)
    assert [s["status"] for s in out["steps"]] == ["skipped"]
