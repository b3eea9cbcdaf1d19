"""The approval card (vmware_pilot.card) served over MCP: an in-memory client of the 2.x SDK
against a server carrying the card's MCP Apps extension lists and reads the ``ui://`` resource as
``text/html;profile=mcp-app``, sees the extension advertised and the card on the tools whose
result can show a gate; the page allows only its own script and style and has no control."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import mcp_types as types
from mcp.client import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID, client_supports_apps
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context, MCPServer

from vmware_pilot.card import CARD_MIME_TYPE, CARD_TOOLS, CARD_URI, approval_card, card_html, card_meta
from vmware_pilot.tooltable import TOOL_NAMES

CONSOLE = "https://pilot.example.com"
APPS_CLIENT = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})


def server_with_card(console_url: str = CONSOLE) -> MCPServer:
    """A small server: the card's extension and one tool registered as Pilot's tools are, with
    ``card_meta``; it answers whether the calling client negotiated MCP Apps."""
    server = MCPServer("card-probe", extensions=[approval_card(console_url)])

    def get_workflow_status(workflow_id: str, ctx: Context) -> dict[str, Any]:
        return {"id": workflow_id, "apps": client_supports_apps(ctx)}

    server.add_tool(get_workflow_status, meta=card_meta("get_workflow_status"))
    return server


async def test_the_card_is_listed_and_read_as_an_mcp_app_resource_and_the_extension_advertised() -> None:
    async with Client(server_with_card(), extensions=[APPS_CLIENT]) as client:
        advertised = client.server_capabilities.extensions or {}
        listed = (await client.list_resources()).resources
        read = await client.read_resource(CARD_URI)
    assert EXTENSION_ID in advertised
    [card] = [r for r in listed if str(r.uri) == CARD_URI]
    assert card.mime_type == APP_MIME_TYPE == CARD_MIME_TYPE
    assert card.name == "approval-card" and card.description and "approves" in card.description
    assert (card.meta or {}).get("ui") == {"prefersBorder": True}  # no domain asked for: no fetch
    [contents] = read.contents
    assert contents.mime_type == APP_MIME_TYPE
    assert contents.text == card_html(CONSOLE)
    assert f'data-console="{CONSOLE}"' in contents.text


async def test_the_tools_that_can_show_a_gate_name_the_card_and_a_client_negotiates_apps() -> None:
    async with Client(server_with_card(), extensions=[APPS_CLIENT]) as apps_client:
        [tool] = (await apps_client.list_tools()).tools
        negotiated = await apps_client.call_tool("get_workflow_status", {"workflow_id": "wf-1"})
    async with Client(server_with_card()) as plain_client:
        plain = await plain_client.call_tool("get_workflow_status", {"workflow_id": "wf-1"})
    assert (tool.meta or {}).get("ui") == {"resourceUri": CARD_URI}
    assert negotiated.structured_content == {"id": "wf-1", "apps": True}
    assert plain.structured_content == {"id": "wf-1", "apps": False}


async def test_a_server_with_its_own_resource_handlers_lists_and_reads_the_same_card() -> None:
    """Pilot answers resources/list and resources/read itself (its pilot:// resources): beside
    its own, it lists ``listing()`` and answers ``read()``, the same as the SDK's own handlers."""
    card = approval_card(CONSOLE)
    own = types.Resource(uri="pilot://catalog", name="catalog", mime_type="application/json")

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[own, *card.listing()])

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        found = await card.read(str(params.uri))
        assert found is not None, params.uri
        return found

    lowlevel: Server[Any] = Server("own-handlers")
    lowlevel.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    lowlevel.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
    async with Client(lowlevel) as client:
        listed = (await client.list_resources()).resources
        read = await client.read_resource(CARD_URI)
    async with Client(server_with_card(CONSOLE)) as client:
        expected_listing = (await client.list_resources()).resources
        expected_read = await client.read_resource(CARD_URI)
    assert [r.uri for r in listed] == ["pilot://catalog", CARD_URI]
    assert listed[1] == expected_listing[0]
    assert read.contents == expected_read.contents
    assert await card.read("pilot://catalog") is None


def test_card_meta_names_the_card_for_the_status_run_and_approve_tools_only() -> None:
    assert set(CARD_TOOLS) == {"get_workflow_status", "run_workflow", "approve"}
    assert set(CARD_TOOLS) <= set(TOOL_NAMES)
    for name in TOOL_NAMES:
        meta = card_meta(name)
        assert (meta == {"ui": {"resourceUri": CARD_URI}}) is (name in CARD_TOOLS), name
        assert (meta is None) is (name not in CARD_TOOLS), name


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_allows_only_its_own_script_and_style_and_fetches_nothing() -> None:
    html = card_html(CONSOLE)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp is not None
    policy = csp.group(1).replace("&#39;", "'")
    [script] = re.findall(r"<script>(.*?)</script>", html, re.S)
    [style] = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert f"script-src {_sha256(script)};" in policy and f"style-src {_sha256(style)};" in policy
    for directive in ("default-src 'none'", "connect-src 'none'", "form-action 'none'", "base-uri 'none'"):
        assert directive in policy
    assert not re.search(r"\b(src|href)=\"(https?:)?//", html), "no external fetch"
    assert "fetch(" not in script and "XMLHttpRequest" not in script and "innerHTML" not in script


def test_the_card_has_no_control_and_calls_no_tool_but_the_status_read() -> None:
    for html in (card_html(CONSOLE), card_html("")):
        for tag in ("<button", "<form", "<input", "<select", "<textarea"):
            assert tag not in html
    script = re.findall(r"<script>(.*?)</script>", card_html(""), re.S)[0]
    called = re.findall(r'request\("tools/call", \{ name: "(\w+)"', script)
    assert called == ["get_workflow_status"]
    assert 'createElement("button")' not in script and 'createElement("form")' not in script


def test_the_console_address_is_escaped_into_the_page() -> None:
    html = card_html('https://pilot.example.com/"><script>alert(1)</script>')
    assert "<script>alert(1)" not in html
    assert 'data-console="https://pilot.example.com/&#34;&gt;&lt;script&gt;alert(1)&lt;' in html
    assert 'data-console=""' in card_html("")
    assert f'data-console="{CONSOLE}"' in card_html(CONSOLE + "/")  # one base, no trailing slash
