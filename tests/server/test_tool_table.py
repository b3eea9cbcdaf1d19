"""The tool table (vmware_pilot.tooltable) is the one source of what a client sees about each tool."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tests.support.mcp_client import Client
from vmware_pilot.safety.duties import ADMIN, READ_TOOLS, READER
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.server.tools import _register, build_tools
from vmware_pilot.tooltable import QUEUED_TOOLS, TOOLS, ToolSpec, spec_of


async def test_tools_list_is_the_table_name_title_description_and_annotations(client: Client) -> None:
    listed = (await client.session.list_tools()).tools
    assert [t.name for t in listed] == [spec.name for spec in TOOLS] == list(TOOL_NAMES)
    for tool, spec in zip(listed, TOOLS, strict=True):
        assert tool.title == spec.title, tool.name
        assert tool.description == spec.description, tool.name
        a = tool.annotations
        assert a is not None, tool.name
        assert a.read_only_hint is (spec.effect == "read"), tool.name
        assert a.destructive_hint is (spec.effect == "destructive"), tool.name
        assert a.idempotent_hint is (spec.effect == "read"), tool.name
        assert a.open_world_hint is True, tool.name


def test_every_tool_has_a_human_title_and_a_tagged_description() -> None:
    titles = [spec.title for spec in TOOLS]
    assert len(set(titles)) == len(titles)
    for spec in TOOLS:
        assert spec.title[0].isupper() and "_" not in spec.title, spec.title
        assert spec.description.startswith("[READ] " if spec.effect == "read" else "[WRITE] ")
        assert len(spec.summary) > 100, spec.name
    assert spec_of("run_workflow") is not None and spec_of("run_workflow").title == "Run workflow"  # type: ignore[union-attr]
    assert spec_of("no_such_tool") is None


def test_built_in_roles_derive_from_the_table() -> None:
    readable = {spec.name for spec in TOOLS if "reader" in spec.roles}
    assert readable == {spec.name for spec in TOOLS if spec.effect == "read"}
    assert readable == READ_TOOLS and READER.tools == readable
    assert READER.visible(TOOL_NAMES) == [spec.name for spec in TOOLS if "reader" in spec.roles]
    assert all("admin" in spec.roles for spec in TOOLS)
    assert ADMIN.visible(TOOL_NAMES) == list(TOOL_NAMES)


async def test_queued_tools_name_one_workflow(client: Client) -> None:
    # Queued calls take turns per workflow_id: each such tool must take one (and write).
    schemas = {t.name: t.input_schema for t in (await client.session.list_tools()).tools}
    assert {spec.name for spec in TOOLS if spec.queued} == QUEUED_TOOLS
    assert QUEUED_TOOLS  # the table queues the draft edits and cancel
    for name in QUEUED_TOOLS:
        assert "workflow_id" in schemas[name]["required"], name
        assert spec_of(name).effect != "read"  # type: ignore[union-attr]


def test_build_tools_registers_exactly_the_table() -> None:
    tools = build_tools(lambda: None, lambda: None)  # type: ignore[arg-type,return-value]
    assert [t.name for t in tools] == list(TOOL_NAMES)
    assert all(t.output_schema is not None for t in tools)  # every tool returns a typed result


class _Answer(BaseModel):
    workflow_id: str
    state: str


def test_a_tool_function_returning_a_model_declares_its_output_schema() -> None:
    # The registration is generic: a typed result (a pydantic model as the function's return
    # annotation) becomes the tool's outputSchema, with the refusal as the other shape it may
    # take; a plain mapping declares none.
    spec = ToolSpec(name="probe", title="Probe", effect="read", summary="Probe.")

    def typed(workflow_id: str) -> _Answer:
        return _Answer(workflow_id=workflow_id, state="pending")

    def untyped(workflow_id: str) -> dict[str, Any]:
        return {"workflow_id": workflow_id}

    schema = _register(spec, typed).output_schema
    assert schema is not None
    assert schema["anyOf"] == [{"$ref": "#/$defs/_Answer"}, {"$ref": "#/$defs/Refusal"}]
    assert set(schema["$defs"]["_Answer"]["properties"]) == {"workflow_id", "state"}
    assert _register(spec, untyped).output_schema is None
    closed = _register(spec, typed).parameters
    assert closed["additionalProperties"] is False and closed["required"] == ["workflow_id"]
