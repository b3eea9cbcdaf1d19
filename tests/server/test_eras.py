"""One server, both protocol eras: the SDK's client pinned to 2025-11-25 (the ``initialize``
handshake) and one pinned to 2026-07-28 (no handshake, ``server/discover``, every request carrying
its own ``_meta``) walk the demo and get refusals as results, in memory (the SDK's own in-process
connection for each era). Over real stdio and HTTP processes: tests/transports/test_eras_wire.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import LoggingMessageNotificationParams, Request, RequestParams
from pydantic import TypeAdapter

from tests.support.approval_gates import OFF, gate
from tests.support.eras import demo_walk, refusals
from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import ERAS, INCIDENT, LEGACY, MODERN, Client, connect, sdk_client
from vmware_pilot import __version__
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.server import create_server


@pytest.fixture
def dispatching(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings, dispatcher=ScriptedDispatcher())
    yield app
    app.close()


@pytest.mark.parametrize("era", ERAS)
async def test_each_era_walks_the_demo_with_steps_handed_back(pilot_app: PilotApp, era: str) -> None:
    async with connect(pilot_app, era=era) as client:
        assert client.session.protocol_version == era
        await demo_walk(client, dispatched=False)
        await refusals(client)


@pytest.mark.parametrize("era", ERAS)
async def test_each_era_walks_a_dispatched_run_to_completion(dispatching: PilotApp, era: str) -> None:
    async with connect(dispatching, era=era) as client:
        status = await demo_walk(client, dispatched=True)
    assert status["state"] == "completed"
    assert [s["status"] for s in status["steps"]] == ["success", "success", "success", "success"]


@pytest.mark.parametrize("era", ERAS)
async def test_each_era_sees_the_same_13_tools_with_the_same_schemas(pilot_app: PilotApp, era: str) -> None:
    async with connect(pilot_app) as legacy, connect(pilot_app, era=era) as other:
        expected = [t.model_dump() for t in (await legacy.session.list_tools()).tools]
        listed = [t.model_dump() for t in (await other.session.list_tools()).tools]
    assert listed == expected and len(listed) == 13


async def test_a_client_in_auto_mode_discovers_the_server_and_speaks_2026(pilot_app: PilotApp) -> None:
    async with connect(pilot_app, era="auto") as client:
        version = client.session.protocol_version
        capabilities = client.session.server_capabilities
        instructions = client.session.instructions or ""
        info = client.session.server_info
        listed = (await client.ok("list_workflows"))["templates"]
    assert version == MODERN
    assert capabilities.tools is not None and capabilities.resources is not None
    assert capabilities.prompts is not None and capabilities.completions is not None
    assert "run_workflow" in instructions and listed
    assert info is not None and (info.name, info.version) == ("vmware-pilot", __version__)


async def test_a_2026_run_tells_progress_and_logs_only_to_a_request_that_asked(dispatching: PilotApp) -> None:
    logged: list[dict[str, object]] = []
    progress: list[str | None] = []

    async def log(params: LoggingMessageNotificationParams) -> None:
        logged.append(params.data)

    async def told(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    server = create_server(dispatching, actor=Actor("tester"))
    async with sdk_client(server, era=MODERN, logging_callback=log, log_level="info") as session:
        client = Client(session)
        workflow_id = (
            await client.ok(
                "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
            )
        )["workflow_id"]
        ran = await session.call_tool("run_workflow", {"workflow_id": workflow_id}, progress_callback=told)
    assert ran.structured_content is not None and ran.structured_content["state"] == "awaiting_approval"
    assert progress and logged
    assert all(entry["workflow_id"] == workflow_id for entry in logged)  # type: ignore[index]
    async with sdk_client(server, era=MODERN, logging_callback=log) as session:  # no level asked
        before = len(logged)
        workflow_id = (
            await Client(session).ok(
                "create_workflow_from_template", workflow_type="incident_response", params=INCIDENT
            )
        )["workflow_id"]
        await session.call_tool("run_workflow", {"workflow_id": workflow_id})
    assert len(logged) == before


async def test_each_era_is_told_it_can_subscribe_and_that_no_list_changes(pilot_app: PilotApp) -> None:
    async with connect(pilot_app) as legacy, connect(pilot_app, era="auto") as modern:
        eras = [legacy.session.server_capabilities, modern.session.server_capabilities]
        assert modern.session.protocol_version == "2026-07-28"
    told, also = (caps.resources for caps in eras)
    assert told is not None and told.subscribe is True  # resources/subscribe, 2025-11-25
    assert also is not None and also.subscribe is True  # subscriptions/listen, 2026-07-28
    # Pilot's tools, prompts and resources are fixed while it runs: no era is promised a change.
    for caps in eras:
        assert caps.tools is not None and caps.prompts is not None and caps.resources is not None
        assert not caps.tools.list_changed and not caps.prompts.list_changed
        assert not caps.resources.list_changed


async def test_a_2026_client_that_cannot_open_links_under_elicit_approvals_is_refused_with_the_operator_command(
    settings: Settings,
) -> None:
    """2026-07-28 has no server-to-client requests, so no approval form: the approval sends the
    person to the console's gate page (tests/server/test_approval_by_url.py); a client that declared
    no URL elicitation is refused, naming the operator's command."""
    app = build_app(Settings(home=settings.home, approvals="elicit", public_url="https://pilot.example.com"))
    try:
        async with connect(app, era=MODERN) as client:
            workflow_id = await client.custom([gate(), OFF])
            await client.ok("run_workflow", workflow_id=workflow_id)
            refused = await client.refused("approve", workflow_id=workflow_id, approver="ann")
            status = await client.status(workflow_id)
    finally:
        app.close()
    assert refused["refused"] == "elicitation_unsupported"
    assert refused["approve_command"] == f"vmware-pilot approve {workflow_id}"
    assert status["state"] == "awaiting_approval"  # nothing was approved


class _Unknown(Request[RequestParams, str]):
    method: str
    params: RequestParams


@pytest.mark.parametrize("era", ERAS)
async def test_each_era_gets_its_own_json_rpc_error_codes(pilot_app: PilotApp, era: str) -> None:
    """JSON-RPC errors (not tool refusals, which stay results) carry the era's codes: 2026-07-28
    retired -32002 for a resource that does not exist (SEP-2164); the others are the same."""
    async with connect(pilot_app, era=era) as client:
        with pytest.raises(MCPError) as missing:
            await client.session.read_resource("pilot://workflows/wf-nope")
        with pytest.raises(MCPError) as prompt:
            await client.session.get_prompt("no_such_prompt")
        with pytest.raises(MCPError) as method:
            await client.session.session.send_request(
                _Unknown(method="vmware-pilot/no-such-method", params=RequestParams()), TypeAdapter(Any)
            )
        refusal = await client.refused("get_workflow_status", workflow_id="wf-nope")
    assert missing.value.error.code == (-32002 if era == LEGACY else -32602)
    assert missing.value.error.data["hint"]
    assert prompt.value.error.code == -32602
    assert method.value.error.code == -32601
    assert refusal["error"] == "Workflow 'wf-nope' not found"  # a refusal stays a result on both
