"""Every tool declares an outputSchema in tools/list and its results validate against it
(docs/contract.md#framing-and-the-iserror-rule), over a real in-memory MCP session.

Each result is also read back into its typed model (``vmware_pilot.results``): it must carry no key the
model does not declare, and writing the model out again must give the very text the client got.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from tests.support.mcp_client import DELETE_STEP, GATE, INCIDENT, READ_STEP, Client
from tests.support.refusals import REFUSALS
from vmware_pilot.errors import NOT_FOUND_HINT
from vmware_pilot.results import (
    ApproveResult,
    CancelResult,
    CatalogResult,
    ConfirmDraftResult,
    CreateResult,
    DesignResult,
    DraftResult,
    FromTemplateResult,
    ListResult,
    Preview,
    Refusal,
    ReviewResult,
    RollbackResult,
    RunResult,
    StatusView,
    undeclared_keys,
)
from vmware_pilot.server.results import dump_json
from vmware_pilot.tooltable import TOOL_NAMES

pytestmark = pytest.mark.asyncio


class _Checked:
    """Calls tools and checks each answer against the tool's declared schema and model."""

    def __init__(self, client: Client, schemas: dict[str, dict[str, Any]]) -> None:
        self.client = client
        self.schemas = schemas
        self.called: set[str] = set()

    async def call(self, tool: str, model: type[BaseModel], **arguments: Any) -> dict[str, Any]:
        result = await self.client.session.call_tool(tool, arguments)
        payload = result.structured_content
        assert (payload is not None and "error" not in payload) or payload.get("outcome"), payload
        schema = self.schemas[tool]
        # As the schema says (draft-07), and as a client that assumes 2020-12 reads it.
        for dialect in (jsonschema.validators.validator_for(schema), jsonschema.Draft202012Validator):
            dialect.check_schema(schema)
            errors = [e.message for e in dialect(schema).iter_errors(payload)]
            assert errors == [], (tool, dialect.__name__, errors)
        typed = model.model_validate(payload)
        assert list(undeclared_keys(typed)) == [], tool
        text = result.content[0].text  # type: ignore[union-attr]
        assert dump_json(typed.model_dump(mode="json")) == text, tool
        self.called.add(tool)
        return payload


async def test_all_13_tools_answer_what_their_output_schema_declares(client: Client) -> None:
    listed = (await client.session.list_tools()).tools
    schemas = {t.name: t.output_schema for t in listed}
    assert set(schemas) == set(TOOL_NAMES)
    for name, schema in schemas.items():
        assert schema is not None and schema["type"] == "object", name
        assert jsonschema.validators.validator_for(schema) is jsonschema.Draft7Validator, name
        assert len(json.dumps(schema)) < 10_000, name  # compact: every client validates against it
    check = _Checked(client, schemas)  # type: ignore[arg-type]

    await check.call("get_skill_catalog", CatalogResult)
    await check.call("list_workflows", ListResult)
    await check.call("list_workflows", ListResult, limit=1, offset=0)

    draft = await check.call("design_workflow", DesignResult, goal="free disk space", constraints="weekends")
    draft_id = draft["workflow_id"]
    edited = await check.call(
        "update_draft", DraftResult, workflow_id=draft_id, steps=[READ_STEP, DELETE_STEP]
    )
    assert edited["approval_gate_violations"]  # saved with its violations listed
    await check.call("update_draft", DraftResult, workflow_id=draft_id, steps=[READ_STEP, GATE, DELETE_STEP])
    await check.call("confirm_draft", ConfirmDraftResult, workflow_id=draft_id)

    custom = await check.call(
        "create_workflow",
        CreateResult,
        name="schema-check",
        description="d",
        steps=[READ_STEP, GATE, DELETE_STEP],
    )
    await check.call("review_workflow", ReviewResult, workflow_id=custom["workflow_id"])

    made = await check.call(
        "create_workflow_from_template",
        FromTemplateResult,
        workflow_type="incident_response",
        params=INCIDENT,
    )
    wf = made["workflow_id"]
    await check.call("review_workflow", ReviewResult, workflow_id=wf)
    at_gate = await check.call("run_workflow", RunResult, workflow_id=wf)
    assert (
        at_gate["outcome"] == "awaiting_approval" and at_gate["pending_dispatch"] and at_gate["pending_gate"]
    )
    status = await check.call("get_workflow_status", StatusView, workflow_id=wf)
    assert status["gates"]
    approved = await check.call(
        "approve", ApproveResult, workflow_id=wf, approver="alice", acknowledge_not_executed=True
    )
    assert approved["outcome"] == "dispatch_required"
    preview = await check.call("rollback", Preview, workflow_id=wf)
    assert preview["action"] == "preview"
    rolled = await check.call(
        "rollback", RollbackResult, workflow_id=wf, confirm=True, acknowledge_unknown_effects=True
    )
    assert rolled["action"] in ("rolled_back", "rollback_incomplete")

    other = custom["workflow_id"]
    await check.call("cancel_workflow", Preview, workflow_id=other)
    cancelled = await check.call(
        "cancel_workflow", CancelResult, workflow_id=other, reason="done", confirm=True
    )
    assert cancelled["outcome"] == "cancelled"
    await check.call("get_workflow_status", StatusView, workflow_id=other)

    assert check.called == set(TOOL_NAMES)


async def test_a_refusal_of_every_tool_is_one_of_the_shapes_its_output_schema_declares(
    client: Client,
) -> None:
    # The TypeScript SDK and MCP Inspector validate structuredContent against the outputSchema even
    # when isError is set, and throw when it does not match: the refusal is declared in the schema.
    listed = (await client.session.list_tools()).tools
    schemas = {t.name: t.output_schema for t in listed}
    for tool, arguments in REFUSALS.items():
        result = await client.session.call_tool(tool, arguments)
        payload = result.structured_content
        assert result.is_error and payload is not None and payload["error"], (tool, payload)
        schema = schemas[tool]
        assert schema is not None
        for dialect in (jsonschema.Draft7Validator, jsonschema.Draft202012Validator):
            errors = [e.message for e in dialect(schema).iter_errors(payload)]
            assert errors == [], (tool, dialect.__name__, errors)
        assert Refusal.model_validate(payload).error == payload["error"]
        assert result.content[0].text == dump_json(payload)  # type: ignore[union-attr]


async def test_a_refusal_keeps_its_own_shape_and_text(client: Client) -> None:
    result = await client.session.call_tool("get_workflow_status", {"workflow_id": "wf-nope"})
    assert result.structured_content == {"error": "Workflow 'wf-nope' not found", "hint": NOT_FOUND_HINT}
    text = '{\n  "error": "Workflow \'wf-nope\' not found",\n  "hint": "' + NOT_FOUND_HINT + '"\n}'
    assert result.content[0].text == text  # type: ignore[union-attr]
