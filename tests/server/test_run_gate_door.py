"""run_workflow is a door of the approval-gate rule and of the review's blocking findings
(docs/contract.md#run_workflow).

The workflows are stored directly, as a legacy row or an embedder would leave them: every other door
refuses to create them.
"""

from __future__ import annotations

from typing import Any

from tests.support.mcp_client import Client
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.templates.steps import gate_step, make_step


def _store(app: PilotApp, workflow_type: str, params: dict[str, Any], *, gate_first: bool) -> str:
    delete = make_step(0, "delete", "aiops", "delete_vm", {"vm_name": "old-vm", "confirm": True})
    read = make_step(1, "check", "monitor", "get_alarms", {"target": ""})
    steps = [gate_step(0, "Go?"), delete, read] if gate_first else [delete, read]
    for i, step in enumerate(steps):
        step.index = i
    wf = Workflow.new(workflow_type, WorkflowState.PENDING, steps, params, created_by="tester")
    app.store.workflows.create(wf)
    return wf.id


async def test_run_refuses_an_ungated_custom_workflow_even_with_force(
    client: Client, pilot_app: PilotApp
) -> None:
    wf_id = _store(pilot_app, "legacy", {"custom": True}, gate_first=False)
    before = pilot_app.store.workflows.load(wf_id).version
    for force in (False, True):
        out = await client.refused("run_workflow", workflow_id=wf_id, force=force)
        assert out["error"].startswith("Refusing to run custom workflow 'legacy'")
        assert "force=True does not override this" in out["error"]
        assert [(v["step_index"], v["kind"]) for v in out["approval_gate_violations"]] == [
            (0, "ungated_destructive")
        ]
        assert out["fix"]["insert_before_step"] == 0
        assert out["fix"]["step"]["action"] == "require_approval"
        assert [f["kind"] for f in out["blocking_findings"]] == ["ungated_destructive"]
        assert "require_approval step before step 0" in out["hint"]
    after = pilot_app.store.workflows.load(wf_id)
    assert (after.state, after.version, after.audit_log) == (WorkflowState.PENDING, before, [])


async def test_a_built_in_type_with_a_blocking_finding_runs_only_when_forced_and_the_log_says_so(
    client: Client, pilot_app: PilotApp
) -> None:
    wf_id = _store(pilot_app, "incident_response", {"alert_entity": "a"}, gate_first=False)
    out = await client.refused("run_workflow", workflow_id=wf_id)
    assert "approval_gate_violations" not in out  # a built-in is not under the gate rule
    assert [f["kind"] for f in out["blocking_findings"]] == ["ungated_destructive"]
    assert "force=True" in out["hint"]
    assert pilot_app.store.workflows.load(wf_id).audit_log == []

    forced = await client.ok("run_workflow", workflow_id=wf_id, force=True)
    assert forced["outcome"] == "dispatch_required"
    log = [(e["action"], e["detail"]) for e in (await client.status(wf_id))["audit_log"]]
    assert log[0] == (
        "forced_run",
        "force=True bypassed 1 blocking review finding(s): ungated_destructive@step0",
    )


async def test_a_gated_custom_workflow_runs(client: Client, pilot_app: PilotApp) -> None:
    wf_id = _store(pilot_app, "legacy", {"custom": True}, gate_first=True)
    out = await client.ok("run_workflow", workflow_id=wf_id)
    assert out["outcome"] == "awaiting_approval"
