"""Every refusal reaches an MCP client in one shape, whoever refuses.

Over a real in-memory session: an unknown tool, arguments the schema rejects (missing, extra,
wrong type, ``limit=0``), arguments over a limit, a role that may not call the tool, and the
engine's own refusals (state, a dispatch preflight) all come back as a result with ``isError``
true whose JSON text equals its structured content, ``error`` first, ``field`` where an argument
is at fault and ``hint`` last where the contract gives one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp_types import TextContent

from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import READ_STEP, Client, sdk_client
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import NOT_FOUND_HINT
from vmware_pilot.safety.duties import READER
from vmware_pilot.server import create_server


async def _raw(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The refusal's payload, checking the one shape."""
    result = await client.session.call_tool(tool, arguments)
    assert result.is_error is True, result
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    payload = json.loads(result.content[0].text)
    assert payload == result.structured_content
    assert next(iter(payload)) == "error" and isinstance(payload["error"], str) and payload["error"]
    if "hint" in payload:
        assert list(payload)[-1] == "hint" and payload["hint"], payload
    return dict(payload)


def _argument_refusal(payload: dict[str, Any], field: str) -> None:
    assert list(payload)[:2] == ["error", "field"] and payload["field"] == field, payload
    assert payload["hint"], payload


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "words"),
    [
        ("get_workflow_status", {}, "workflow_id", "Field required"),
        ("get_workflow_status", {"workflow_id": "wf-1", "extra": 1}, "extra", "Extra inputs"),
        ("rollback", {"workflow_id": "wf-1", "confirm": "yes"}, "confirm", "(got string)"),
        ("list_workflows", {"limit": 0}, "limit", "greater than or equal to 1"),
        ("list_workflows", {"limit": "5"}, "limit", "(got string)"),
    ],
)
async def test_schema_violations_are_structured_refusals(
    client: Client, tool: str, arguments: dict[str, Any], field: str, words: str
) -> None:
    payload = await _raw(client, tool, arguments)
    _argument_refusal(payload, field)
    assert payload["error"].startswith(f"Error executing tool {tool}: argument '{field}'")
    assert words in payload["error"]
    assert set(payload) == {"error", "field", "hint"}


async def test_an_unknown_tool_is_a_structured_refusal_listing_the_tools(client: Client) -> None:
    payload = await _raw(client, "launch_missiles", {})
    _argument_refusal(payload, "name")
    assert payload["error"] == "Unknown tool: launch_missiles"
    assert "run_workflow" in payload["hint"] and set(payload) == {"error", "field", "hint"}


async def test_arguments_over_a_limit_are_a_structured_refusal(client: Client) -> None:
    payload = await _raw(client, "design_workflow", {"goal": "x" * 100_001})
    _argument_refusal(payload, "goal")
    assert "too large" in payload["error"] and isinstance(payload["limit"], int)
    assert len(json.dumps(payload)) < 4096  # the caller's long string is not echoed


async def test_engine_refusals_carry_state_fields_and_a_hint(client: Client) -> None:
    workflow_id = await client.incident()
    payload = await _raw(client, "approve", {"workflow_id": workflow_id, "approver": "ann"})
    assert "not awaiting approval" in payload["error"]
    await client.ok("cancel_workflow", workflow_id=workflow_id, confirm=True)
    payload = await _raw(client, "run_workflow", {"workflow_id": workflow_id})
    assert list(payload) == ["error", "state", "hint"] and payload["state"] == "cancelled"
    unknown = await _raw(client, "get_workflow_status", {"workflow_id": "wf-nope"})
    assert unknown == {"error": "Workflow 'wf-nope' not found", "hint": NOT_FOUND_HINT}  # the contract's


async def test_a_role_refusal_names_role_and_tool(pilot_app: PilotApp) -> None:
    server = create_server(pilot_app, actor=Actor("rita", kind="token"), role_of=lambda _: READER)
    async with sdk_client(server) as session:
        payload = await _raw(Client(session), "run_workflow", {"workflow_id": "wf-1"})
    assert list(payload) == ["error", "role", "tool", "hint"]
    assert payload["role"] == "reader" and payload["tool"] == "run_workflow"
    assert "token set-role rita" in payload["hint"]


@pytest.fixture
def dispatching(settings: Settings) -> Iterator[tuple[PilotApp, ScriptedDispatcher]]:
    dispatcher = ScriptedDispatcher(preflight_problems=["step 0: vmware-aiops-mcp is not installed"])
    app = build_app(settings, dispatcher=dispatcher)
    yield app, dispatcher
    app.close()


@asynccontextmanager
async def _session(app: PilotApp) -> AsyncIterator[Client]:
    async with sdk_client(create_server(app, actor=Actor("t"))) as s:
        yield Client(s)


async def test_a_dispatch_preflight_refusal_has_the_same_shape(
    dispatching: tuple[PilotApp, ScriptedDispatcher],
) -> None:
    app, dispatcher = dispatching
    async with _session(app) as client:
        workflow_id = await client.custom([READ_STEP])
        payload = await _raw(client, "run_workflow", {"workflow_id": workflow_id})
        assert payload == {
            "error": "Nothing was run — these steps could not be started: "
            "step 0: vmware-aiops-mcp is not installed",
            "workflow_id": workflow_id,
            "state": "pending",
        }
        assert (await client.status(workflow_id))["state"] == "pending"
    assert dispatcher.step_calls == []
