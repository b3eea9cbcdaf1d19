"""The door of every tool call, through a real session: size limits, strict types, bounded refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.mcp_client import DELETE_STEP, GATE, READ_STEP, Client
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.limits import MAX_DEPTH, MAX_LIST, MAX_STEPS, MAX_STRING
from vmware_pilot.server.bounds import MAX_REFUSAL_BYTES


def _text_size(payload: dict[str, Any]) -> int:
    return len(json.dumps(payload, indent=2, ensure_ascii=False).encode())


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


async def _refused_for(client: Client, field: str, tool: str, **arguments: Any) -> dict[str, Any]:
    payload = await client.refused(tool, **arguments)
    assert payload["field"] == field, payload
    assert payload["hint"]
    assert _text_size(payload) < MAX_REFUSAL_BYTES
    return payload


async def test_more_steps_than_the_limit_are_refused_naming_steps(client: Client) -> None:
    steps = [READ_STEP] * (MAX_STEPS + 1)
    payload = await _refused_for(client, "steps", "create_workflow", name="big", description="d", steps=steps)
    assert payload["limit"] == MAX_STEPS
    assert (await client.ok("list_workflows"))["active_workflows"] == []


async def test_the_step_limit_itself_is_accepted(client: Client) -> None:
    await client.ok("create_workflow", name="full", description="d", steps=[READ_STEP] * MAX_STEPS)


async def test_a_string_over_the_limit_is_refused_naming_its_field(client: Client) -> None:
    step = {**READ_STEP, "params": {"note": "x" * (MAX_STRING + 1)}}
    payload = await _refused_for(
        client, "steps[0].params.note", "create_workflow", name="n", description="d", steps=[step]
    )
    assert str(MAX_STRING) in payload["error"]
    assert "xxxx" not in json.dumps(payload)


async def test_nesting_deeper_than_the_limit_is_refused(client: Client) -> None:
    deep = _nested(MAX_DEPTH + 1)
    payload = await client.refused(
        "create_workflow_from_template", workflow_type="incident_response", params=deep
    )
    assert payload["field"].startswith("params.k.k")
    assert payload["limit"] == MAX_DEPTH


async def test_a_list_over_the_limit_is_refused(client: Client) -> None:
    step = {**READ_STEP, "params": {"vms": ["vm"] * (MAX_LIST + 1)}}
    await _refused_for(client, "steps[0].params.vms", "update_draft", workflow_id="wf-x", steps=[step])


async def test_an_over_long_key_is_refused(client: Client) -> None:
    payload = await client.refused(
        "create_workflow_from_template",
        workflow_type="incident_response",
        params={"k" * (MAX_STRING + 1): 1},
    )
    assert payload["field"] == "params"


@pytest.mark.parametrize("confirm", ["yes", "true", 1])
async def test_cancel_confirm_must_be_a_real_boolean(client: Client, confirm: Any) -> None:
    wf = await client.incident()
    payload = await _refused_for(
        client, "confirm", "cancel_workflow", workflow_id=wf, reason="r", confirm=confirm
    )
    assert payload["error"].startswith("Error executing tool cancel_workflow:")
    assert (await client.status(wf))["state"] == "pending"


@pytest.mark.parametrize("limit", [True, "5", 2.0, 2**63, 501, 0])
async def test_limit_must_be_a_whole_number_in_range(client: Client, limit: Any) -> None:
    await _refused_for(client, "limit", "list_workflows", limit=limit)


async def test_offset_of_two_to_the_63_is_a_refusal_not_a_crash(client: Client) -> None:
    payload = await _refused_for(client, "offset", "list_workflows", limit=5, offset=2**63)
    assert "correlation id" not in payload["error"]


async def test_limit_in_range_still_pages(client: Client) -> None:
    await client.incident()
    await client.incident()
    listed = await client.ok("list_workflows", limit=1)
    assert len(listed["active_workflows"]) == 1 and listed["active_total"] == 2


async def test_schema_violations_come_back_in_the_refusal_shape(client: Client) -> None:
    missing = await _refused_for(client, "params", "create_workflow_from_template", workflow_type="x")
    assert "Field required" in missing["error"]
    extra = await _refused_for(client, "priority", "design_workflow", goal="g", priority="high")
    assert "priority" in extra["error"]
    wrong = await _refused_for(client, "steps[0]", "create_workflow", name="n", description="d", steps=[1])
    assert "got integer" in wrong["error"]


async def test_unknown_tool_is_refused_in_the_refusal_shape_quoting_little(client: Client) -> None:
    result = await client.session.call_tool("plan_workflow" * 100, {})
    assert result.is_error
    payload = result.structured_content
    assert payload is not None and payload["field"] == "name"
    assert "plan_workflow" in payload["error"] and "(1300 characters)" in payload["error"]
    assert "create_workflow" in payload["hint"]


async def test_a_long_workflow_id_is_quoted_cut_with_its_length(client: Client) -> None:
    wf_id = "wf-" + "z" * (MAX_STRING - 3)
    for tool in ("get_workflow_status", "run_workflow", "cancel_workflow", "update_draft"):
        payload = await client.refused(tool, workflow_id=wf_id)
        assert f"({MAX_STRING} characters)" in payload["error"], tool
        assert "z" * 201 not in json.dumps(payload), tool


async def test_an_unknown_template_name_is_quoted_cut(client: Client) -> None:
    payload = await client.refused("create_workflow_from_template", workflow_type="t" * 5000, params={})
    assert "t" * 201 not in json.dumps(payload)
    assert "(5000 characters)" in payload["error"]


async def test_a_refusal_listing_many_violations_stays_under_4_kib(client: Client) -> None:
    # 150 ungated destructive steps with long VM names: the gate refusal lists every one.
    steps = [
        {**DELETE_STEP, "params": {"vm_name": f"vm-{i}-" + "n" * 300, "confirm": True}} for i in range(150)
    ]
    payload = await client.refused("create_workflow", name="wide", description="d", steps=steps)
    assert _text_size(payload) <= MAX_REFUSAL_BYTES
    assert payload["error"].startswith("Refusing to")
    assert payload.get("truncated") is True
    assert isinstance(payload["approval_gate_violations"], list)


async def test_ordinary_refusals_are_unchanged(client: Client) -> None:
    payload = await client.refused("create_workflow", name="n", description="d", steps=[DELETE_STEP])
    assert "truncated" not in payload
    assert payload["fix"]["insert_before_step"] == 0
    assert payload["fix"]["step"]["action"] == GATE["action"]


@pytest.mark.parametrize("bad", ["\ud800", "wf-\x00", "a\udfffb"])
async def test_text_that_cannot_be_stored_is_refused_naming_the_field(client: Client, bad: str) -> None:
    # Found by the fuzz tests: a lone surrogate reached the database and failed as an internal error.
    for tool in ("get_workflow_status", "cancel_workflow"):
        payload = await _refused_for(client, "workflow_id", tool, workflow_id=bad)
        assert "cannot be stored" in payload["error"]
    step = {**READ_STEP, "params": {"note": bad}}
    payload = await _refused_for(
        client, "steps[0].params.note", "create_workflow", name="n", description="d", steps=[step]
    )
    assert (await client.ok("list_workflows"))["active_workflows"] == []


async def test_nesting_at_the_limit_is_accepted(client: Client) -> None:
    step = {**READ_STEP, "params": {"note": _nested(MAX_DEPTH - 3)}}  # steps, step, params, then 13
    await client.ok("create_workflow", name="deep", description="d", steps=[step])


async def test_a_failed_run_is_a_result_and_keeps_every_step(client: Client, pilot_app: PilotApp) -> None:
    wf_id = await client.custom([READ_STEP] * 150, name="long-read")
    # A Pilot process that died mid-dispatch leaves its step 'running'; real parts cannot stage that.
    wf = pilot_app.store.workflows.load(wf_id)
    wf.steps[0].status = StepStatus.RUNNING
    pilot_app.store.workflows.save(wf)
    reply = await client.call("run_workflow", workflow_id=wf_id)
    assert reply.is_error and reply.payload["outcome"] == "failed"
    assert len(reply.payload["steps"]) == 150 and "truncated" not in reply.payload
