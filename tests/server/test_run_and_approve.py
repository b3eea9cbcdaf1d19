"""run_workflow and approve in hand-back mode (docs/contract.md#run_workflow, #approve, #running)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import ProgressNotification

from tests.support.mcp_client import GATE, READ_STEP, Client, connect
from tests.support.prechecks import count_prechecks
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.enums import StepStatus


def _statuses(status: dict[str, Any]) -> list[str]:
    return [s["status"] for s in status["steps"]]


async def test_run_hands_back_steps_and_stops_at_the_gate(client: Client) -> None:
    wf = await client.incident()
    out = await client.ok("run_workflow", workflow_id=wf)
    assert out["outcome"] == "awaiting_approval"
    assert out["state"] == "awaiting_approval"
    assert [(p["index"], p["skill"], p["tool"]) for p in out["pending_dispatch"]] == [
        (0, "monitor", "get_alarms"),
        (1, "monitor", "get_events"),
    ]
    assert all(set(p) >= {"index", "skill", "tool", "params"} for p in out["pending_dispatch"])
    assert out["message"]
    assert _statuses(out) == ["not_executed", "not_executed", "pending", "pending"]
    log = [e["action"] for e in (await client.status(wf))["audit_log"]]
    assert (
        log[:2] == ["workflow_created", "run_started"]
        and "step_not_executed" in log
        and log[-1] == "awaiting_approval"
    )


async def test_run_of_reads_only_ends_dispatch_required_not_completed(client: Client) -> None:
    wf = await client.custom([READ_STEP])
    out = await client.ok("run_workflow", workflow_id=wf)
    assert (out["outcome"], out["state"]) == ("dispatch_required", "pending")
    assert [p["index"] for p in out["pending_dispatch"]] == [0]
    again = await client.ok("run_workflow", workflow_id=wf)  # re-lists the same handed-out steps
    assert [p["index"] for p in again["pending_dispatch"]] == [0]


async def test_run_refuses_cancelled_workflow(client: Client) -> None:
    wf = await client.incident()
    await client.ok("cancel_workflow", workflow_id=wf, confirm=True)
    out = await client.refused("run_workflow", workflow_id=wf)
    assert out["state"] == "cancelled"
    assert "cancel" in out["error"].lower()


async def test_run_refuses_completed_workflow(client: Client) -> None:
    wf = await client.custom([GATE])
    await client.ok("run_workflow", workflow_id=wf)
    done = await client.ok("approve", workflow_id=wf, approver="alice")
    assert (done["outcome"], done["state"]) == ("completed", "completed")
    out = await client.refused("run_workflow", workflow_id=wf)
    assert "cannot be run" in out["error"] and "completed" in out["error"]


async def test_run_refuses_workflow_waiting_at_a_gate(client: Client) -> None:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    out = await client.refused("run_workflow", workflow_id=wf)
    assert "awaiting_approval" in out["error"]


async def test_run_refuses_a_draft(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    out = await client.refused("run_workflow", workflow_id=wf)
    assert "draft" in out["error"]


async def test_run_detects_a_step_left_running_by_a_crash(client: Client, pilot_app: PilotApp) -> None:
    wf_id = await client.incident()
    # A Pilot process that died mid-dispatch leaves its step 'running'; real parts cannot stage that.
    wf = pilot_app.store.workflows.load(wf_id)
    wf.steps[0].status = StepStatus.RUNNING
    pilot_app.store.workflows.save(wf)
    reply = await client.call("run_workflow", workflow_id=wf_id)
    assert reply.is_error
    assert (reply.payload["outcome"], reply.payload["state"]) == ("failed", "failed")
    assert reply.payload["steps"][0]["status"] == "interrupted"
    assert reply.payload["error"]
    log = [e["action"] for e in (await client.status(wf_id))["audit_log"]]
    assert "interrupted_step_detected" in log


async def test_run_reports_progress_when_the_client_asks(client: Client) -> None:
    wf = await client.incident()
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await client.session.call_tool(
        "run_workflow", {"workflow_id": wf}, progress_callback=on_progress
    )
    assert result.is_error is False
    assert seen, "no progress notification arrived"
    assert all(total is None or 0 <= done <= total for done, total, _ in seen)


async def test_run_without_progress_token_sends_no_progress(pilot_app: PilotApp) -> None:
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        if isinstance(message, ProgressNotification):
            notes.append(message)

    async with connect(pilot_app, message_handler=handler) as client:
        wf = await client.incident()
        await client.ok("run_workflow", workflow_id=wf)
    assert notes == []


# --- approve --------------------------------------------------------------------------------------
async def test_approve_refuses_workflow_not_awaiting_approval(client: Client) -> None:
    wf = await client.incident()
    out = await client.refused("approve", workflow_id=wf, approver="alice")
    assert "not awaiting approval" in out["error"] and "pending" in out["error"]


async def test_approve_refuses_blank_approver(client: Client) -> None:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    out = await client.refused("approve", workflow_id=wf, approver="   ", acknowledge_not_executed=True)
    assert "approver" in out["error"]
    assert (out["workflow_id"], out["state"]) == (wf, "awaiting_approval")


async def test_approve_refuses_until_handed_out_steps_are_acknowledged(client: Client) -> None:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    out = await client.refused("approve", workflow_id=wf, approver="alice")
    assert [(s["index"], s["skill"], s["tool"]) for s in out["not_executed_before_gate"]] == [
        (0, "monitor", "get_alarms"),
        (1, "monitor", "get_events"),
    ]
    assert "acknowledge_not_executed" in out["error"]
    assert (out["workflow_id"], out["state"]) == (wf, "awaiting_approval")
    status = await client.status(wf)
    assert status["state"] == "awaiting_approval" and status["approved_by"] == ""


async def test_approve_with_acknowledgement_records_reported_done_and_continues(client: Client) -> None:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    out = await client.ok("approve", workflow_id=wf, approver="alice", acknowledge_not_executed=True)
    assert (out["outcome"], out["state"]) == ("dispatch_required", "pending")
    assert [p["index"] for p in out["pending_dispatch"]] == [3]
    assert _statuses(out) == ["reported_done", "reported_done", "success", "not_executed"]
    gate = out["steps"][2]["result"]
    assert gate["approved_by"] == "alice"
    assert gate["acknowledged_not_executed"] == [0, 1]
    assert out["approved_by"] == "alice"
    log = [e["action"] for e in (await client.status(wf))["audit_log"]]
    assert "approved" in log and "approved_over_unexecuted_steps" in log


async def test_approve_at_a_first_step_gate_needs_no_acknowledgement(client: Client) -> None:
    wf = await client.custom([GATE, READ_STEP])
    await client.ok("run_workflow", workflow_id=wf)
    out = await client.ok("approve", workflow_id=wf, approver="bob")
    assert out["outcome"] == "dispatch_required"
    assert [p["index"] for p in out["pending_dispatch"]] == [1]


async def test_approve_refuses_a_cancelled_workflow(client: Client) -> None:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    await client.ok("cancel_workflow", workflow_id=wf, confirm=True)
    out = await client.refused("approve", workflow_id=wf, approver="alice", acknowledge_not_executed=True)
    assert "cancelled" in out["error"]


async def test_approve_naming_gate_1_is_refused_while_gate_3_waits(client: Client) -> None:
    """A late approver of the first gate must not release the next one (issue 31)."""
    second = {**GATE, "params": {"message": "Second gate: go on?"}}
    wf = await client.custom([READ_STEP, GATE, READ_STEP, second, READ_STEP])
    await client.ok("run_workflow", workflow_id=wf)
    first = await client.ok(
        "approve", workflow_id=wf, approver="alice", acknowledge_not_executed=True, gate_step=1
    )
    assert first["pending_gate"]["index"] == 3  # the run went on to the second gate

    late = await client.refused(
        "approve", workflow_id=wf, approver="bob", acknowledge_not_executed=True, gate_step=1
    )
    assert (late["refused"], late["gate_step"], late["waiting_gate"]) == ("not_the_waiting_gate", 1, 3)
    assert "step 3" in late["error"] and "Second gate: go on?" in late["error"] and "step 4" in late["error"]
    assert "gate_step=3" in late["hint"]
    status = await client.status(wf)
    assert status["state"] == "awaiting_approval" and status["steps"][3]["status"] == "pending"
    assert [g["approvals"] for g in status["gates"] if g["index"] == 3] == [[]]

    named = await client.ok(
        "approve", workflow_id=wf, approver="bob", acknowledge_not_executed=True, gate_step=3
    )
    assert named["steps"][3]["status"] == "success" and named["approved_by"] == "bob"


async def test_approve_without_gate_step_keeps_the_2_4_0_meaning(client: Client) -> None:
    wf = await client.custom([GATE, READ_STEP])
    await client.ok("run_workflow", workflow_id=wf)
    wrong = await client.refused("approve", workflow_id=wf, approver="bob", gate_step=5)
    assert wrong["waiting_gate"] == 0
    out = await client.ok("approve", workflow_id=wf, approver="bob")
    assert out["steps"][0]["status"] == "success"


async def test_an_approval_through_the_tool_runs_the_precheck_once(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MCP door builds one request; the service checks it once and the runner records it with
    that check (approval.record re-reads the stored record in the save, which is no precheck)."""
    wf = await client.custom([GATE])
    await client.ok("run_workflow", workflow_id=wf)
    prechecks = count_prechecks(monkeypatch)
    done = await client.ok("approve", workflow_id=wf, approver="alice")
    assert done["approved_by"] == "alice"
    assert prechecks == [wf]
    refused = await client.refused("approve", workflow_id=wf, approver="bob")
    assert "not awaiting approval" in refused["error"] and prechecks == [wf, wf]
