"""An in-memory MCP client against the real server (``connect``: the SDK's ``mcp.client.Client``
on the server object, in either protocol era), and the steps tests send.

Every call made through ``Client`` also checks the result framing of
docs/contract.md#framing-and-the-iserror-rule: one JSON text block equal to
``structuredContent``, ``isError`` exactly when the payload has a truthy ``error`` or
``outcome == "failed"``, and the payload (a refusal included) valid against the tool's declared
``outputSchema``, as the TypeScript SDK and MCP Inspector check it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import jsonschema
from mcp.client import Client as SdkClient
from mcp.client.session import ElicitationFnT, LoggingFnT, MessageHandlerFnT
from mcp_types import Implementation, LoggingLevel, TextContent

from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.server import create_server

GATE = {
    "action": "require_approval",
    "skill": "pilot",
    "tool": "approve",
    "params": {"message": "Proceed?"},
}
READ_STEP = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}
DELETE_STEP = {
    "action": "delete",
    "skill": "aiops",
    "tool": "delete_vm",
    "params": {"vm_name": "old-vm", "confirm": True},
}
INCIDENT = {"alert_entity": "web-01", "alert_name": "High CPU"}


@functools.cache
def _validator(schema: str) -> Any:
    """A validator for a tool's output schema (given as JSON text: one per schema, compiled once)."""
    loaded = json.loads(schema)
    return jsonschema.validators.validator_for(loaded)(loaded)


@dataclass(frozen=True)
class Reply:
    payload: dict[str, Any]
    is_error: bool


# The protocol eras a client may speak: the handshake era (``initialize``) and the current revision.
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = (LEGACY, MODERN)


class Client:
    """Calls tools on a live client and returns parsed payloads, checking the framing each time.

    ``session`` is the SDK's ``mcp.client.Client`` (tools, resources, prompts, completions)."""

    def __init__(self, session: SdkClient) -> None:
        self.session = session
        self._schemas: dict[str, Any] | None = None

    async def _load_schemas(self) -> dict[str, Any]:
        """The tools' output schemas, listed once, before the first call: the SDK's session keeps
        the same listing for its own check of successful results, so it lists nothing again."""
        if self._schemas is None:
            listed = (await self.session.list_tools()).tools
            self._schemas = {
                t.name: _validator(json.dumps(t.output_schema)) for t in listed if t.output_schema
            }
        return self._schemas

    def _check_schema(self, tool: str, payload: dict[str, Any]) -> None:
        assert self._schemas is not None
        validator = self._schemas.get(tool)
        if validator is not None:
            errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(payload)]
            assert errors == [], (tool, errors, payload)

    async def call(self, tool: str, **arguments: Any) -> Reply:
        await self._load_schemas()
        result = await self.session.call_tool(tool, arguments)
        assert len(result.content) == 1, result
        block = result.content[0]
        assert isinstance(block, TextContent)
        payload = json.loads(block.text)
        assert isinstance(payload, dict)
        assert payload == result.structured_content
        expected_error = bool(payload.get("error")) or payload.get("outcome") == "failed"
        assert result.is_error is expected_error, payload
        self._check_schema(tool, payload)
        return Reply(payload, result.is_error)

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        reply = await self.call(tool, **arguments)
        assert not reply.is_error, reply.payload
        return reply.payload

    async def refused(self, tool: str, **arguments: Any) -> dict[str, Any]:
        reply = await self.call(tool, **arguments)
        assert reply.is_error, reply.payload
        assert isinstance(reply.payload["error"], str) and reply.payload["error"]
        return reply.payload

    async def status(self, workflow_id: str) -> dict[str, Any]:
        return await self.ok("get_workflow_status", workflow_id=workflow_id)

    async def stored(self, workflow_id: str) -> dict[str, Any]:
        """The status without what moves with the clock alone (the decision summary's time left and
        the time it was computed at): to tell that nothing about the workflow changed."""
        status = await self.status(workflow_id)
        if isinstance(status.get("decision"), dict):
            status["decision"] = {
                k: v for k, v in status["decision"].items() if k not in ("seconds_left", "at")
            }
        return status

    async def incident(self) -> str:
        """An incident_response workflow (2 reads, a gate, 1 remediation); returns its id."""
        created = await self.ok(
            "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
        )
        return str(created["workflow_id"])

    async def custom(self, steps: list[dict[str, Any]], name: str = "custom-test") -> str:
        created = await self.ok("create_workflow", name=name, description="test workflow", steps=steps)
        return str(created["workflow_id"])


def sdk_client(
    server: Any,
    *,
    era: str = LEGACY,
    name: str | None = None,
    message_handler: MessageHandlerFnT | None = None,
    elicitation_callback: ElicitationFnT | None = None,
    logging_callback: LoggingFnT | None = None,
    log_level: LoggingLevel | None = None,
) -> SdkClient:
    """The SDK's client on ``server`` (a server object in this process, a URL, a transport or
    stdio parameters) with client name ``name`` (None: the SDK's own, "mcp"), speaking ``era``: ``LEGACY`` (the ``initialize`` handshake, as every
    2025-era client) or ``MODERN`` (2026-07-28, no handshake; ``log_level`` is then the log
    level every request opts in to). No response cache: a test's
    listings are always the server's answer."""
    return SdkClient(
        server,
        mode="legacy" if era == LEGACY else era,
        client_info=Implementation(name=name, version="0") if name is not None else None,
        message_handler=message_handler,
        elicitation_callback=elicitation_callback,
        logging_callback=logging_callback,
        log_level=log_level,
        cache=None,
    )


@asynccontextmanager
async def connect(
    app: PilotApp,
    actor: Actor | None = None,
    message_handler: MessageHandlerFnT | None = None,
    *,
    era: str = LEGACY,
) -> AsyncIterator[Client]:
    server = create_server(app, actor=actor or Actor("tester"))
    async with sdk_client(server, era=era, message_handler=message_handler) as session:
        yield Client(session)
