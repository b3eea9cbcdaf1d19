"""The demo's walk (``vmware-pilot demo``: create from a template, review, run to the gate, approve,
status, rollback) as a client of either protocol era walks it, with the refusals it meets on the
way. Every call goes through ``tests.support.mcp_client.Client``, which checks the framing and
validates every payload, refusals included, against the tool's declared output schema."""

from __future__ import annotations

from typing import Any

from tests.support.mcp_client import INCIDENT, Client
from tests.support.refusals import REFUSALS
from vmware_pilot.errors import NOT_FOUND_HINT

NOT_FOUND = {"error": "Workflow 'wf-nope' not found", "hint": NOT_FOUND_HINT}


async def refusals(client: Client) -> list[dict[str, Any]]:
    """Refusals every era gets as results (``isError`` true, the payload in the output schema):
    an unknown workflow, a closed schema's unknown argument, a tool the server does not have."""
    unknown = await client.refused("get_workflow_status", workflow_id="wf-nope")
    assert unknown == NOT_FOUND
    extra = await client.refused("list_workflows", offset=0, colour="blue")
    assert extra["error"] and extra["hint"]
    missing = await client.call("no_such_tool")
    assert missing.is_error and "no_such_tool" in missing.payload["error"]
    return [unknown, extra, missing.payload]


async def every_refusal(client: Client) -> dict[str, dict[str, Any]]:
    """A refusal of every tool (tests/support/refusals.py), each read as a result: ``isError``, one
    JSON text equal to the structured content, the payload in the tool's output schema."""
    return {tool: await client.refused(tool, **arguments) for tool, arguments in REFUSALS.items()}


async def demo_walk(client: Client, *, dispatched: bool, approver: str = "demo") -> dict[str, Any]:
    """Walk incident_response from a template to its rollback; returns the last status.

    ``dispatched``: the server runs the steps (the run completes after the approval, and acting on
    its rollback preview is refused: a completed workflow is final); otherwise the steps are handed back, as
    in `vmware-pilot demo`, and the rollback is previewed. ``approver``: the name sent (empty
    over an authenticated transport, where the approver is the caller)."""
    created = await client.ok(
        "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
    )
    workflow_id = created["workflow_id"]
    assert created["state"] == "pending"
    review = await client.ok("review_workflow", workflow_id=workflow_id)
    assert review["verdict"] == "approved" and review["findings"] == [], review
    run = await client.ok("run_workflow", workflow_id=workflow_id)
    assert run["state"] == "awaiting_approval" and run["outcome"] == "awaiting_approval", run
    if not dispatched:
        assert [p["index"] for p in run["pending_dispatch"]] == [0, 1]
        refused = await client.refused("approve", workflow_id=workflow_id, approver=approver)
        assert [s["index"] for s in refused["not_executed_before_gate"]] == [0, 1]
    approved = await client.ok(
        "approve", workflow_id=workflow_id, approver=approver, acknowledge_not_executed=not dispatched
    )
    status = await client.status(workflow_id)
    if dispatched:
        assert approved["outcome"] == "completed" and status["state"] == "completed", (approved, status)
    else:
        assert approved["outcome"] == "dispatch_required" and [
            p["index"] for p in approved["pending_dispatch"]
        ] == [3]
        assert status["state"] == "pending"
    preview = await client.ok("rollback", workflow_id=workflow_id)
    assert preview["action"] == "preview" and "blast_radius" in preview
    if dispatched:  # a completed workflow is final: the preview says so, acting is refused
        assert preview["blast_radius"]["blockers"], preview
        refused = await client.refused("rollback", workflow_id=workflow_id, confirm=True)
        assert refused["state"] == "completed" and refused["blast_radius"]["blockers"], refused
        return await client.status(workflow_id)
    return status
