"""Resources under pilot://: listed as resources and templates, read like the tools, errors by JSON-RPC."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import TextResourceContents

from tests.support.mcp_client import ERAS, LEGACY, MODERN, Client, connect, sdk_client
from tests.support.raw import raw_session
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.card import CARD_URI
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.safety.duties import BUILTIN_ROLES, Role
from vmware_pilot.server import create_server


async def read_json(client: Client, uri: str) -> Any:
    result = await client.session.read_resource(uri)  # type: ignore[arg-type]
    (content,) = result.contents
    assert isinstance(content, TextResourceContents) and content.mime_type == "application/json"
    return json.loads(content.text)


async def read_error(client: Client, uri: str) -> Any:
    with pytest.raises(MCPError) as refused:
        await client.session.read_resource(uri)  # type: ignore[arg-type]
    return refused.value.error


async def test_resources_and_templates_are_listed(client: Client) -> None:
    resources = (await client.session.list_resources()).resources
    assert sorted(str(r.uri) for r in resources) == ["pilot://catalog", "pilot://templates", CARD_URI]
    templates = (await client.session.list_resource_templates()).resource_templates
    assert sorted(t.uri_template for t in templates) == [
        "pilot://templates/{name}",
        "pilot://workflows/{workflow_id}",
        "pilot://workflows/{workflow_id}/audit",
    ]
    pilots = [r for r in resources if str(r.uri) != CARD_URI]  # the approval card is HTML (tests/card)
    assert all(r.description and r.mime_type == "application/json" for r in [*pilots, *templates])


async def test_each_resource_reads_what_its_tool_returns(client: Client) -> None:
    workflow_id = await client.incident()
    await client.ok("run_workflow", workflow_id=workflow_id)
    resource = await read_json(client, f"pilot://workflows/{workflow_id}")
    resource["decision"] = {k: v for k, v in resource["decision"].items() if k not in ("seconds_left", "at")}
    assert resource == await client.stored(workflow_id)  # the same, but for what moves with the clock
    listed = await client.ok("list_workflows")
    assert await read_json(client, "pilot://templates") == {"templates": listed["templates"]}
    assert await read_json(client, "pilot://catalog") == await client.ok("get_skill_catalog")
    one = await read_json(client, "pilot://templates/incident_response")
    assert one == next(t for t in listed["templates"] if t["name"] == "incident_response")
    audit = await read_json(client, f"pilot://workflows/{workflow_id}/audit")
    assert audit["workflow_id"] == workflow_id and audit["intact"] is True
    status = await client.status(workflow_id)
    assert [e["action"] for e in audit["events"]] == [e["action"] for e in status["audit_log"]]
    assert all(e["hash"] and e["workflow_id"] == workflow_id for e in audit["events"])


async def test_a_secret_reads_masked_as_in_the_tool(client: Client) -> None:
    params = {
        "vm_names": ["web-01"],
        "patch_local_path": "/p/fix.rpm",
        "patch_guest_path": "/tmp/fix.rpm",
        "install_command": "rpm -i /tmp/fix.rpm",
        "username": "root",
        "password": "hunter2-literal",
    }
    created = await client.ok(
        "create_workflow_from_template", workflow_type="patch_deployment", params=params
    )
    text = json.dumps(await read_json(client, f"pilot://workflows/{created['workflow_id']}"))
    assert "hunter2-literal" not in text and "***" in text


@pytest.mark.parametrize(
    "uri",
    ["pilot://nothing", "pilot://workflows/wf-missing", "pilot://workflows/wf-missing/audit", "file:///etc/passwd",
     "pilot://templates/no_such_template"],
)  # fmt: skip
@pytest.mark.parametrize("era", ERAS)
async def test_an_unknown_uri_gets_resource_not_found_with_a_hint(
    pilot_app: PilotApp, uri: str, era: str
) -> None:
    async with connect(pilot_app, era=era) as client:
        error = await read_error(client, uri)
    # 2026-07-28 retired -32002 for Invalid Params (SEP-2164); 2025-11-25 keeps it.
    assert error.code == (-32002 if era == LEGACY else -32602)
    assert error.data["hint"] and error.data["uri"] == uri


@pytest.fixture
def watched_app(settings: Settings) -> Any:
    app = build_app(Settings(home=settings.home, watch_interval=0.25))
    yield app
    app.close()


async def test_2026_reads_of_the_templates_and_the_catalog_carry_a_cache_hint(watched_app: PilotApp) -> None:
    async with connect(watched_app, era=MODERN) as client:
        workflow_id = await client.incident()
        for uri in ("pilot://templates", "pilot://templates/incident_response", "pilot://catalog"):
            read = await client.session.read_resource(uri)  # type: ignore[arg-type]
            # As fresh as a subscriber is told of a change: the watch interval.
            assert (read.ttl_ms, read.cache_scope) == (250, "private"), uri
        read = await client.session.read_resource(f"pilot://workflows/{workflow_id}")  # type: ignore[arg-type]
        assert read.ttl_ms == 0  # a workflow changes at any moment: immediately stale


async def test_2025_reads_carry_no_cache_hint(watched_app: PilotApp) -> None:
    async with raw_session(create_server(watched_app, actor=Actor("t")), protocol=LEGACY) as peer:
        for uri in ("pilot://templates", "pilot://catalog"):
            answer = await peer.request("resources/read", {"uri": uri})
            assert answer["result"]["contents"], answer
            assert "ttlMs" not in answer["result"] and "cacheScope" not in answer["result"], answer


@asynccontextmanager
async def as_role(app: PilotApp, role: Role) -> AsyncIterator[Client]:
    server = create_server(app, actor=Actor("rita", kind="token", role=role.name), role_of=lambda _: role)
    async with sdk_client(server) as session:
        yield Client(session)


async def test_a_reader_reads_everything_a_role_without_read_tools_nothing(pilot_app: PilotApp) -> None:
    async with connect(pilot_app) as admin:
        workflow_id = await admin.incident()
    async with as_role(pilot_app, BUILTIN_ROLES["reader"]) as reader:
        assert (await read_json(reader, f"pilot://workflows/{workflow_id}"))["id"] == workflow_id
        assert len((await reader.session.list_resource_templates()).resource_templates) == 3
    planner = Role("planner", "none", frozenset({"list_workflows", "design_workflow"}))
    async with as_role(pilot_app, planner) as limited:
        error = await read_error(limited, f"pilot://workflows/{workflow_id}")
        assert error.code == -32600 and "get_workflow_status" in error.data["hint"]
        assert (await read_error(limited, "pilot://catalog")).code == -32600
        assert "templates" in await read_json(limited, "pilot://templates")
        assert [str(r.uri) for r in (await limited.session.list_resources()).resources] == [
            "pilot://templates",
            CARD_URI,  # the approval card holds no data: listed to every caller
        ]
        templates = (await limited.session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["pilot://templates/{name}"]
