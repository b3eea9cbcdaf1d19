"""create_workflow_from_template, create_workflow, design_workflow, update_draft, confirm_draft.

See docs/contract.md#tools.
"""

from __future__ import annotations

from typing import Any

from tests.support.mcp_client import DELETE_STEP, GATE, INCIDENT, READ_STEP, Client
from vmware_pilot.app import PilotApp


def _assert_gate_refusal(payload: dict[str, Any], step_index: int) -> None:
    violations = payload["approval_gate_violations"]
    assert violations and violations[0]["step_index"] == step_index
    assert set(violations[0]) >= {"step_index", "skill", "tool", "kind", "reason"}
    fix = payload["fix"]
    assert fix["insert_before_step"] == step_index
    assert fix["step"]["action"] == "require_approval"
    assert (fix["step"]["skill"], fix["step"]["tool"]) == ("pilot", "approve")
    assert fix["step"]["params"]["message"]


async def _active_ids(client: Client) -> list[str]:
    return [w["id"] for w in (await client.ok("list_workflows"))["active_workflows"]]


# --- create_workflow_from_template ---------------------------------------------------------------
async def test_template_creates_a_pending_workflow(client: Client) -> None:
    out = await client.ok("create_workflow_from_template", workflow_type="incident_response", params=INCIDENT)
    assert out["workflow_type"] == "incident_response"
    assert out["state"] == "pending"
    assert out["params"]["alert_entity"] == "web-01"
    assert [s["index"] for s in out["steps"]] == [0, 1, 2, 3]
    assert all(set(s) == {"index", "action", "skill", "tool"} for s in out["steps"])
    assert out["steps"][2]["action"] == "require_approval"
    assert f"run_workflow('{out['workflow_id']}')" in out["message"]
    status = await client.status(out["workflow_id"])
    assert status["created_by"] == "tester"
    assert status["audit_log"] == [] or all(e["action"] != "run_started" for e in status["audit_log"])


async def test_template_unknown_type_lists_available_ones(client: Client) -> None:
    out = await client.refused("create_workflow_from_template", workflow_type="no_such_template", params={})
    assert "no_such_template" in out["error"]
    assert "incident_response" in out["error"]


async def test_template_missing_parameter_is_refused_with_hint(client: Client) -> None:
    before = await _active_ids(client)
    out = await client.refused(
        "create_workflow_from_template", workflow_type="incident_response", params={"alert_entity": "x"}
    )
    assert "alert_name" in out["error"] + out.get("hint", "")
    assert out["hint"]
    assert await _active_ids(client) == before


async def test_template_unexpected_parameter_is_refused(client: Client) -> None:
    out = await client.refused(
        "create_workflow_from_template",
        workflow_type="incident_response",
        params={**INCIDENT, "colour": "blue"},
    )
    assert "colour" in out["error"] + out.get("hint", "")


# --- create_workflow -----------------------------------------------------------------------------
async def test_create_workflow_saves_a_gated_custom_plan(client: Client) -> None:
    out = await client.ok(
        "create_workflow",
        name="decommission",
        description="remove old vm",
        steps=[READ_STEP, GATE, DELETE_STEP],
    )
    assert out["state"] == "pending"
    assert out["workflow_type"] == "decommission"
    assert out["saved_as_template"] is False
    assert [s["tool"] for s in out["steps"]] == ["list_virtual_machines", "approve", "delete_vm"]
    assert out["workflow_id"] in await _active_ids(client)
    status = await client.status(out["workflow_id"])
    assert status["params"]["custom"] is True


async def test_create_workflow_refuses_ungated_destructive_step_and_saves_nothing(client: Client) -> None:
    before = await _active_ids(client)
    out = await client.refused("create_workflow", name="bad", description="d", steps=[READ_STEP, DELETE_STEP])
    _assert_gate_refusal(out, 1)
    assert out["approval_gate_violations"][0]["kind"] == "ungated_destructive"
    assert "bad" in out["error"]
    assert await _active_ids(client) == before


async def test_create_workflow_refuses_confirm_true_without_gate(client: Client) -> None:
    step = {
        "action": "start",
        "skill": "aiops",
        "tool": "power_on_vm",
        "params": {"vm_name": "a", "confirm": True},
    }
    out = await client.refused("create_workflow", name="power", description="d", steps=[step])
    _assert_gate_refusal(out, 0)
    assert out["approval_gate_violations"][0]["kind"] == "confirm_without_approval"


async def test_create_workflow_keeps_group_id(client: Client) -> None:
    reads = [
        {**READ_STEP, "group_id": "gather"},
        {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}, "group_id": "gather"},
    ]
    wf = await client.custom(reads)
    assert [s["group_id"] for s in (await client.status(wf))["steps"]] == ["gather", "gather"]


async def test_create_workflow_refuses_malformed_step_naming_it(client: Client) -> None:
    before = await _active_ids(client)
    bad = {"action": "x", "skill": "monitor", "tool": "get_alarms", "params": "target=lab"}
    out = await client.refused("create_workflow", name="m", description="d", steps=[READ_STEP, bad])
    assert "1" in out["error"] and "params" in out["error"]
    assert await _active_ids(client) == before


async def test_create_workflow_save_as_template_refuses_builtin_name(client: Client) -> None:
    before = await _active_ids(client)
    out = await client.refused(
        "create_workflow", name="incident_response", description="d", steps=[READ_STEP], save_as_template=True
    )
    assert out["hint"]
    assert await _active_ids(client) == before


async def test_create_workflow_save_as_template_lists_the_new_template(client: Client) -> None:
    out = await client.ok(
        "create_workflow",
        name="vm-inventory",
        description="list vms",
        steps=[READ_STEP],
        save_as_template=True,
    )
    assert out["saved_as_template"] is True
    templates = (await client.ok("list_workflows"))["templates"]
    custom = [t for t in templates if t["name"] == "vm-inventory"]
    assert custom and custom[0]["type"] == "custom" and custom[0]["steps"] == 1
    again = await client.ok("create_workflow_from_template", workflow_type="vm-inventory", params={})
    assert [s["tool"] for s in again["steps"]] == ["list_virtual_machines"]


# --- design_workflow / update_draft / confirm_draft ---------------------------------------------
async def test_design_workflow_creates_a_draft(client: Client) -> None:
    out = await client.ok("design_workflow", goal="free disk space on web-01", constraints="weekends only")
    assert out["state"] == "draft"
    assert (out["goal"], out["constraints"]) == ("free disk space on web-01", "weekends only")
    assert "aiops" in out["available_skills"]
    assert "update_draft" in out["next_step"] and "confirm_draft" in out["next_step"]
    status = await client.status(out["workflow_id"])
    assert status["workflow_type"] == "custom_draft"
    assert status["steps"] == []
    assert [e["action"] for e in status["audit_log"]] == ["draft_created"]


async def test_update_draft_saves_ungated_steps_and_lists_violations(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    out = await client.ok("update_draft", workflow_id=wf, name="cleanup", steps=[READ_STEP, DELETE_STEP])
    assert out["state"] == "draft"
    assert out["workflow_type"] == "cleanup"
    assert [v["step_index"] for v in out["approval_gate_violations"]] == [1]
    assert "confirm_draft" in out["message"]
    assert [s["has_rollback"] for s in out["steps"]] == [False, False]
    status = await client.status(wf)
    assert len(status["steps"]) == 2
    assert "steps_updated" in [e["action"] for e in status["audit_log"]]


async def test_update_draft_gated_steps_have_no_violations(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    step = {**DELETE_STEP, "rollback_tool": "power_on_vm", "rollback_params": {"vm_name": "old-vm"}}
    out = await client.ok("update_draft", workflow_id=wf, steps=[GATE, step], description="tidy up")
    assert out["approval_gate_violations"] == []
    assert [s["has_rollback"] for s in out["steps"]] == [False, True]
    assert (await client.status(wf))["params"]["description"] == "tidy up"


async def test_update_draft_refuses_malformed_steps_and_keeps_the_old_ones(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    await client.ok("update_draft", workflow_id=wf, steps=[READ_STEP])
    for bad, field in (
        ({**READ_STEP, "tol": "x"}, "tol"),
        ({"action": "a", "skill": "monitor", "params": {}}, "tool"),
        ({**READ_STEP, "params": ["not", "an", "object"]}, "params"),
    ):
        out = await client.refused("update_draft", workflow_id=wf, steps=[READ_STEP, bad])
        assert field in out["error"] and "1" in out["error"], out
    status = await client.status(wf)
    assert [s["tool"] for s in status["steps"]] == ["list_virtual_machines"]


async def test_update_draft_refuses_a_workflow_that_is_not_a_draft(client: Client) -> None:
    wf = await client.incident()
    out = await client.refused("update_draft", workflow_id=wf, name="x")
    assert "not a draft" in out["error"] and "pending" in out["error"]


async def test_confirm_draft_refuses_an_empty_draft(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    out = await client.refused("confirm_draft", workflow_id=wf)
    assert "no steps" in out["error"] and "update_draft" in out["error"]
    assert (await client.status(wf))["state"] == "draft"


async def test_confirm_draft_refuses_ungated_plan_and_stays_draft(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    await client.ok("update_draft", workflow_id=wf, steps=[READ_STEP, DELETE_STEP])
    out = await client.refused("confirm_draft", workflow_id=wf)
    _assert_gate_refusal(out, 1)
    assert (await client.status(wf))["state"] == "draft"


async def test_confirm_draft_makes_it_pending(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    await client.ok("update_draft", workflow_id=wf, steps=[READ_STEP, GATE, DELETE_STEP])
    out = await client.ok("confirm_draft", workflow_id=wf)
    assert (out["state"], out["steps_count"], out["saved_as_template"]) == ("pending", 3, False)
    status = await client.status(wf)
    assert status["state"] == "pending"
    assert "draft_confirmed" in [e["action"] for e in status["audit_log"]]
    again = await client.refused("confirm_draft", workflow_id=wf)
    assert "not a draft" in again["error"]


async def test_confirm_draft_never_reports_a_template_save_that_did_not_happen(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    await client.ok("update_draft", workflow_id=wf, steps=[READ_STEP])
    reply = await client.call("confirm_draft", workflow_id=wf, save_as_template=True)
    names = [t["name"] for t in (await client.ok("list_workflows"))["templates"]]
    assert "custom_draft" not in names
    if reply.is_error:
        assert "update_draft" in reply.payload.get("hint", "") + reply.payload["error"]
        assert (await client.status(wf))["state"] == "draft"
    else:
        assert reply.payload["saved_as_template"] is False


async def test_confirm_draft_saves_a_named_template(client: Client) -> None:
    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    await client.ok("update_draft", workflow_id=wf, name="inventory-check", steps=[READ_STEP])
    out = await client.ok("confirm_draft", workflow_id=wf, save_as_template=True)
    assert out["saved_as_template"] is True
    names = [t["name"] for t in (await client.ok("list_workflows"))["templates"]]
    assert "inventory-check" in names


async def test_a_template_that_cannot_be_written_saves_nothing(client: Client, pilot_app: PilotApp) -> None:
    folder = pilot_app.settings.resolved_templates_dir
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file where the templates folder should be")
    out = await client.refused(
        "create_workflow", name="mine", description="d", steps=[READ_STEP], save_as_template=True
    )
    assert "nothing was saved" in out["error"] and "save_as_template=false" in out["hint"]
    assert (await client.ok("list_workflows"))["active_workflows"] == []

    wf = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    await client.ok("update_draft", workflow_id=wf, name="mine", steps=[READ_STEP])
    refused = await client.refused("confirm_draft", workflow_id=wf, save_as_template=True)
    assert "nothing was saved" in refused["error"]
    assert (await client.status(wf))["state"] == "draft", "the draft stays a draft"
    folder.unlink()
    confirmed = await client.ok("confirm_draft", workflow_id=wf, save_as_template=True)
    assert confirmed["saved_as_template"] is True and (folder / "mine.yaml").is_file()
