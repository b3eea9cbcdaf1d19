"""Pilot's own MCP server carries the approval card (the factory wires vmware_pilot.card in: the
lines are in the mcp2-card report; this module needs the server on the 2.x SDK): through the SDK's
in-memory client, the extension is advertised, the card is listed beside the
``pilot://`` resources and read, ``run_workflow``, ``approve`` and ``get_workflow_status`` name
it, and what the tools answer is the same for a client with MCP Apps and one without."""

from __future__ import annotations

import json
from typing import Any

from mcp.client import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from tests.support.card_host import WHY
from tests.support.prediction import gate, restart
from vmware_pilot.app import build_app
from vmware_pilot.card import CARD_URI, card_html
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.server import create_server
from vmware_pilot.tooltable import TOOL_NAMES

CONSOLE = "https://pilot.example.com"
APPS_CLIENT = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})


def _payload(result: Any) -> dict[str, Any]:
    [block] = result.content
    payload: dict[str, Any] = json.loads(block.text)
    assert result.structured_content == payload
    return payload


async def test_pilots_server_advertises_lists_serves_and_names_the_card(settings: Settings) -> None:
    app = build_app(Settings(home=settings.home, public_url=CONSOLE))
    try:
        server = create_server(app, actor=Actor("alice"))
        async with Client(server, extensions=[APPS_CLIENT]) as client:
            extensions = client.server_capabilities.extensions or {}
            tools = {t.name: t for t in (await client.list_tools()).tools}
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            [contents] = (await client.read_resource(CARD_URI)).contents
            catalog = await client.read_resource("pilot://catalog")
    finally:
        app.close()
    assert EXTENSION_ID in extensions
    assert listed == ["pilot://templates", "pilot://catalog", CARD_URI]
    assert contents.mime_type == APP_MIME_TYPE and contents.text == card_html(CONSOLE)
    assert catalog.contents[0].mime_type == "application/json"
    for name in TOOL_NAMES:
        ui = (tools[name].meta or {}).get("ui")
        if name in ("run_workflow", "approve", "get_workflow_status"):
            assert ui == {"resourceUri": CARD_URI}, name
        else:
            assert ui is None, name


async def test_the_tools_answer_the_same_with_and_without_mcp_apps(settings: Settings) -> None:
    app = build_app(settings)
    answers: dict[str, list[dict[str, Any]]] = {}
    try:
        # One VM each: two workflows writing one VM would wait for each other (conflict locks).
        for label, extensions, vm in (("apps", [APPS_CLIENT], "web-01"), ("plain", [], "web-02")):
            steps = [gate(expires_in_minutes=90), *restart(vm)]
            server = create_server(app, actor=Actor("alice"))
            async with Client(server, extensions=extensions) as client:
                created = _payload(
                    await client.call_tool(
                        "create_workflow", {"name": "restart", "description": WHY, "steps": steps}
                    )
                )
                wid = created["workflow_id"]
                run = _payload(await client.call_tool("run_workflow", {"workflow_id": wid}))
                status = _payload(await client.call_tool("get_workflow_status", {"workflow_id": wid}))
            answers[label] = [run, status]
    finally:
        app.close()
    for apps, plain in zip(answers["apps"], answers["plain"], strict=True):
        assert list(apps) == list(plain)  # the same keys, in the same order
        assert apps["state"] == plain["state"] == "awaiting_approval"
    assert list(answers["apps"][1]["decision"]) == list(answers["plain"][1]["decision"])
