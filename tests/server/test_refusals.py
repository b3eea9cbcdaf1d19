"""Refusals of create_workflow_from_template, run_workflow, rollback and cancel_workflow that need
a stored record no create call can make, through a real MCP session: a custom plan whose gate is
gone, a built-in with blocking findings (and the audited forced run), a custom YAML template
without its gate, a damaged record.

The records are staged in the store because the tools refuse to create them: that is the point.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.mcp_client import DELETE_STEP, GATE, INCIDENT, READ_STEP, Client
from vmware_pilot.app import PilotApp
from vmware_pilot.templates.steps import steps_from_dicts


async def test_run_refuses_a_custom_plan_without_its_gate_even_when_forced(
    client: Client, pilot_app: PilotApp
) -> None:
    wid = await client.custom([READ_STEP, GATE, DELETE_STEP])
    wf = pilot_app.store.workflows.load(wid)
    wf.steps = steps_from_dicts([READ_STEP, DELETE_STEP])  # a record from before the gate rule
    pilot_app.store.workflows.save(wf)
    before = await client.stored(wid)
    out = await client.refused("run_workflow", workflow_id=wid, force=True)
    assert out["error"].startswith("Refusing to run custom workflow 'custom-test'")
    assert "force=True does not override this" in out["error"]
    assert [v["step_index"] for v in out["approval_gate_violations"]] == [1]
    assert out["fix"]["insert_before_step"] == 1
    assert [(f["kind"], f["step_index"]) for f in out["blocking_findings"]] == [("ungated_destructive", 1)]
    assert "require_approval" in out["hint"]
    assert await client.stored(wid) == before, "nothing changed or logged"


async def test_run_refuses_a_builtin_with_blocking_findings_unless_forced(
    client: Client, pilot_app: PilotApp
) -> None:
    created = await client.ok(
        "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
    )
    wid = created["workflow_id"]
    wf = pilot_app.store.workflows.load(wid)
    wf.steps = steps_from_dicts([READ_STEP, DELETE_STEP, GATE])  # e.g. a record edited by hand
    pilot_app.store.workflows.save(wf)
    before = await client.stored(wid)
    out = await client.refused("run_workflow", workflow_id=wid)
    assert set(out) == {"error", "blocking_findings", "hint"}
    assert out["error"].startswith(f"Refusing to run workflow '{wid}': review found 1 blocking")
    assert [(f["kind"], f["step_index"]) for f in out["blocking_findings"]] == [("ungated_destructive", 1)]
    assert "force=True" in out["hint"]
    assert await client.stored(wid) == before

    forced = await client.ok("run_workflow", workflow_id=wid, force=True)
    assert forced["outcome"] == "awaiting_approval"
    created_event, first = forced["audit_log"][:2]
    assert created_event["action"] == "workflow_created"
    assert first["action"] == "forced_run" and "ungated_destructive@step1" in first["detail"]


async def test_a_custom_yaml_template_without_its_gate_is_refused_naming_the_file(
    client: Client, pilot_app: PilotApp
) -> None:
    folder = pilot_app.settings.resolved_templates_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stop.yaml").write_text(
        "name: stop_vm\n"
        "steps:\n"
        "  - {action: stop, skill: aiops, tool: power_off_vm, params: {vm_name: '{{vm}}', confirm: true}}\n"
    )
    out = await client.refused("create_workflow_from_template", workflow_type="stop_vm", params={"vm": "a"})
    assert "Refusing to plan custom workflow 'stop_vm'" in out["error"] and "stop.yaml" in out["error"]
    assert out["fix"]["insert_before_step"] == 0
    assert (await client.ok("list_workflows"))["active_workflows"] == []


def _damage(pilot_app: PilotApp, workflow_id: str) -> None:
    database = Path(pilot_app.settings.resolved_database_url.removeprefix("sqlite:///"))
    with sqlite3.connect(database) as db:
        db.execute("UPDATE workflows SET document = '{broken' WHERE id = ?", (workflow_id,))


async def test_a_damaged_record_is_refused_by_every_tool_and_rollback_names_it_unmeasured(
    client: Client, pilot_app: PilotApp
) -> None:
    wid = await client.incident()
    _damage(pilot_app, wid)
    for tool in ("rollback", "cancel_workflow"):
        for confirm in (False, True):
            out = await client.refused(tool, workflow_id=wid, confirm=confirm)
            assert "could not be read" in out["error"] and "nothing changed" in out["error"], tool
            assert out["workflow_id"] == wid
            assert out["blast_radius"]["blockers"] == [] and out["blast_radius"]["unmeasured"], tool
            assert out["hint"]
    for tool in ("get_workflow_status", "review_workflow", "run_workflow", "approve"):
        out = await client.refused(tool, workflow_id=wid)
        assert "could not be read" in out["error"] and out["hint"], tool
