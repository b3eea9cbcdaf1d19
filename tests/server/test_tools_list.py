"""tools/list against the contract (docs/contract.md#arguments, #annotations, #tools), written by hand."""

from __future__ import annotations

from typing import Any

from mcp_types import Tool

from tests.support.mcp_client import Client, sdk_client
from vmware_pilot import __version__
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.server import create_server

STR, BOOL, INT, NUM, OBJ, ARR, NULL = "string", "boolean", "integer", "number", "object", "array", "null"
REQ = object()  # marks a required parameter

# name → [(parameter, JSON type, default or REQ)], in the contract's tools/list order.
EXPECTED: list[tuple[str, list[tuple[str, Any, Any]]]] = [
    (
        "create_workflow",
        [
            ("name", STR, REQ),
            ("description", STR, REQ),
            ("steps", ARR, REQ),
            ("save_as_template", BOOL, False),
        ],
    ),
    ("design_workflow", [("goal", STR, REQ), ("constraints", STR, "")]),
    (
        "update_draft",
        [
            ("workflow_id", STR, REQ),
            ("name", STR, ""),
            ("description", STR, ""),
            ("steps", (ARR, NULL), None),
        ],
    ),
    ("confirm_draft", [("workflow_id", STR, REQ), ("save_as_template", BOOL, False)]),
    ("create_workflow_from_template", [("workflow_type", STR, REQ), ("params", OBJ, REQ)]),
    ("run_workflow", [("workflow_id", STR, REQ), ("force", BOOL, False)]),
    (
        "approve",
        [
            ("workflow_id", STR, REQ),
            ("approver", STR, ""),
            ("acknowledge_not_executed", BOOL, False),
            ("gate_step", (INT, NULL), None),  # optional, after 2.4.0's three: old calls still fit
            ("acknowledge_predicted_failure", STR, ""),
            ("comment", STR, ""),  # optional, added after 2.4.0
        ],
    ),
    (
        "rollback",
        [("workflow_id", STR, REQ), ("confirm", BOOL, False), ("acknowledge_unknown_effects", BOOL, False)],
    ),
    (
        "cancel_workflow",
        [
            ("workflow_id", STR, REQ),
            ("reason", STR, ""),
            ("confirm", BOOL, False),
            ("acknowledge_unknown_effects", BOOL, False),
        ],
    ),
    ("review_workflow", [("workflow_id", STR, REQ)]),
    # wait_seconds is optional, after 2.4.0's workflow_id: old calls still fit
    ("get_workflow_status", [("workflow_id", STR, REQ), ("wait_seconds", NUM, 0)]),
    ("list_workflows", [("limit", (INT, NULL), None), ("offset", INT, 0)]),  # paging is our addition
    ("get_skill_catalog", []),
]

# (readOnlyHint, destructiveHint, idempotentHint, openWorldHint) per docs/contract.md#annotations
WRITE, DESTRUCTIVE, READ = (False, False, False, True), (False, True, False, True), (True, False, True, True)
ANNOTATIONS = {
    **dict.fromkeys(
        [
            "create_workflow",
            "design_workflow",
            "update_draft",
            "confirm_draft",
            "create_workflow_from_template",
            "run_workflow",
            "approve",
        ],
        WRITE,
    ),
    "rollback": DESTRUCTIVE,
    "cancel_workflow": DESTRUCTIVE,
    **dict.fromkeys(["review_workflow", "get_workflow_status", "list_workflows", "get_skill_catalog"], READ),
}


def _json_types(prop: dict[str, Any]) -> Any:
    if "anyOf" in prop:
        return tuple(option["type"] for option in prop["anyOf"])
    return prop["type"]


async def _tools(client: Client) -> list[Tool]:
    return (await client.session.list_tools()).tools


async def test_tools_are_listed_in_reference_order(client: Client) -> None:
    assert [t.name for t in await _tools(client)] == [name for name, _ in EXPECTED]


async def test_parameters_match_reference_names_types_defaults_and_required(client: Client) -> None:
    tools = {t.name: t for t in await _tools(client)}
    for name, params in EXPECTED:
        schema = tools[name].input_schema
        props = schema["properties"]
        assert list(props) == [p for p, _, _ in params], name
        assert sorted(schema.get("required", [])) == sorted(p for p, _, d in params if d is REQ), name
        for param, json_type, default in params:
            prop = props[param]
            assert _json_types(prop) == json_type, (name, param)
            if default is REQ:
                assert "default" not in prop, (name, param)
            else:
                assert prop["default"] == default, (name, param)
            assert prop["title"] == param.replace("_", " ").title(), (name, param)
            assert len(prop["description"]) > 15, (name, param)


async def test_every_schema_is_closed(client: Client) -> None:
    for tool in await _tools(client):
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False, tool.name


async def test_array_and_object_parameters_hold_objects(client: Client) -> None:
    tools = {t.name: t for t in await _tools(client)}
    assert tools["create_workflow"].input_schema["properties"]["steps"]["items"]["type"] == "object"
    draft_steps = tools["update_draft"].input_schema["properties"]["steps"]["anyOf"][0]
    assert draft_steps["items"]["type"] == "object"


async def test_annotations_follow_reference(client: Client) -> None:
    for tool in await _tools(client):
        a = tool.annotations
        assert a is not None, tool.name
        hints = (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
        assert hints == ANNOTATIONS[tool.name], tool.name


async def test_descriptions_are_tagged_and_declare_an_output_schema(client: Client) -> None:
    for tool in await _tools(client):
        tag = "[READ]" if ANNOTATIONS[tool.name] == READ else "[WRITE]"
        assert tool.description is not None and tool.description.startswith(tag + " "), tool.name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", tool.name


async def test_initialize_reports_name_version_and_instructions(pilot_app: PilotApp) -> None:
    server = create_server(pilot_app, actor=Actor("tester"))
    async with sdk_client(server) as session:
        info, capabilities, text = (
            session.server_info,
            session.server_capabilities,
            session.instructions or "",
        )
    assert info is not None and info.name == "vmware-pilot"
    assert info.version == __version__
    assert capabilities.tools is not None
    for word in ("run_workflow", "approve", "pending_dispatch", "--dispatch", "confirm=true", "preview"):
        assert word in text


async def test_instructions_say_which_mode_this_server_runs_in(settings: Settings) -> None:
    from tests.support.fakes import ScriptedDispatcher

    for dispatcher, expected in (
        (None, "runs without --dispatch"),
        (ScriptedDispatcher(), "runs with --dispatch"),
    ):
        app = build_app(settings, dispatcher=dispatcher)
        try:
            server = create_server(app, actor=Actor("tester"))
            async with sdk_client(server) as session:
                instructions = session.instructions
            assert expected in (instructions or "")
        finally:
            app.close()
