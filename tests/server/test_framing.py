"""Result framing, the isError rule and argument validation through a real session.

See docs/contract.md#framing-and-the-iserror-rule and #arguments.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from mcp_types import TextContent

from tests.support.mcp_client import Client, connect
from vmware_pilot.app import PilotApp
from vmware_pilot.errors import NOT_FOUND_HINT
from vmware_pilot.server.results import is_error_payload, to_result


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"error": "Workflow 'x' not found"}, True),
        ({"outcome": "failed", "state": "failed"}, True),
        ({"action": "preview", "blast_radius": {"blockers": []}}, False),
        ({"outcome": "dispatch_required"}, False),
        ({"error": "", "state": "pending"}, False),
        ({"error": None}, False),
    ],
)
def test_is_error_rule(payload: dict[str, Any], expected: bool) -> None:
    assert is_error_payload(payload) is expected
    assert to_result(payload).is_error is expected


def test_result_is_one_indented_utf8_json_block_equal_to_structured_content() -> None:
    payload = {"message": "Räumung der VM „web-01“", "steps": [{"index": 0}]}
    result = to_result(payload)
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert block.text == json.dumps(payload, indent=2, ensure_ascii=False)
    assert "„web-01“" in block.text
    assert result.structured_content == payload


async def test_unknown_workflow_is_an_error_frame_with_reference_message(client: Client) -> None:
    for tool in (
        "get_workflow_status",
        "review_workflow",
        "run_workflow",
        "approve",
        "update_draft",
        "confirm_draft",
        "rollback",
        "cancel_workflow",
    ):
        payload = await client.refused(tool, workflow_id="wf-nope")
        assert payload == {"error": "Workflow 'wf-nope' not found", "hint": NOT_FOUND_HINT}, tool


async def test_preview_is_not_an_error(client: Client) -> None:
    wf = await client.incident()
    reply = await client.call("rollback", workflow_id=wf)
    assert reply.payload["action"] == "preview"
    assert reply.is_error is False


async def test_unknown_tool_is_an_error(client: Client) -> None:
    result = await client.session.call_tool("plan_workflow", {})
    assert result.is_error is True
    assert "plan_workflow" in result.content[0].text  # type: ignore[union-attr]


async def test_wrong_argument_type_is_rejected(client: Client) -> None:
    result = await client.session.call_tool("get_workflow_status", {"workflow_id": 42})
    assert result.is_error is True
    text = result.content[0].text  # type: ignore[union-attr]
    assert "get_workflow_status" in text and "workflow_id" in text


async def test_unknown_argument_is_rejected_and_nothing_is_created(client: Client) -> None:
    before = (await client.ok("list_workflows"))["active_workflows"]
    result = await client.session.call_tool("design_workflow", {"goal": "x", "priority": "high"})
    assert result.is_error is True
    assert "priority" in result.content[0].text  # type: ignore[union-attr]
    assert (await client.ok("list_workflows"))["active_workflows"] == before


async def test_missing_required_argument_is_rejected(client: Client) -> None:
    result = await client.session.call_tool(
        "create_workflow_from_template", {"workflow_type": "incident_response"}
    )
    assert result.is_error is True
    assert "params" in result.content[0].text  # type: ignore[union-attr]


async def test_json_encoded_object_arguments_are_accepted(client: Client) -> None:
    # Some clients send objects as JSON strings; the contract accepts them.
    result = await client.session.call_tool(
        "create_workflow_from_template",
        {
            "workflow_type": "incident_response",
            "params": json.dumps({"alert_entity": "a", "alert_name": "b"}),
        },
    )
    assert result.is_error is False, result.content


async def test_unexpected_exception_is_reported_generically_with_correlation_id(
    pilot_app: PilotApp, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(workflow_id: str) -> dict[str, Any]:
        raise RuntimeError("internal detail /var/secret/path")

    # A bug inside the service is a fault the real parts cannot produce on demand.
    monkeypatch.setattr(pilot_app.service, "get_workflow_status", boom)
    caplog.set_level(logging.ERROR, logger="vmware_pilot.server")
    async with connect(pilot_app) as client:
        payload = await client.refused("get_workflow_status", workflow_id="wf-1")
    assert payload["error"].startswith("RuntimeError: operation failed (correlation id ")
    assert "secret" not in json.dumps(payload)
    assert payload["hint"]
    correlation_id = payload["error"].rsplit(" ", 1)[1].rstrip(")")
    assert any(correlation_id in r.getMessage() and r.exc_info for r in caplog.records)


async def test_polling_status_in_a_tight_loop_is_never_refused(client: Client) -> None:
    wf = await client.incident()
    for _ in range(100):
        status = await client.ok("get_workflow_status", workflow_id=wf)
        assert status["id"] == wf
