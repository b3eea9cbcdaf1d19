"""The SDK internals ``server/sdk.py`` relies on are still there (fails when an SDK release moves them)."""

from __future__ import annotations

import inspect

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata

from tests.support.mcp_client import sdk_client
from vmware_pilot.server import sdk


def test_mcpserver_keeps_its_low_level_server_with_run_and_request_handlers() -> None:
    server = MCPServer("probe", version="9.9.9")
    low = sdk.lowlevel(server)
    assert isinstance(low, Server)
    assert list(inspect.signature(low.run).parameters)[:3] == [
        "read_stream",
        "write_stream",
        "initialization_options",
    ]
    assert low.create_initialization_options().server_version == "9.9.9"
    assert low.get_request_handler("tools/call") is not None


def test_mcpserver_keeps_its_tool_manager_and_a_tool_keeps_its_argument_model() -> None:
    server = MCPServer("probe")

    @server.tool()
    def probe(count: int) -> str:
        return str(count)

    tool = sdk.find_tool(server, "probe")
    assert isinstance(tool, Tool) and sdk.find_tool(server, "absent") is None
    assert isinstance(tool.fn_metadata, FuncMetadata)
    assert issubclass(tool.fn_metadata.arg_model, ArgModelBase)
    closed = sdk.close_arguments(tool)
    assert closed.parameters["additionalProperties"] is False
    assert closed.fn_metadata.arg_model.model_config.get("strict") is True
    assert list(inspect.signature(tool.run).parameters)[:2] == ["arguments", "context"]
    declared = sdk.with_output_schema(closed, {"type": "object"})
    assert declared.output_schema == {"type": "object"} and tool.output_schema != declared.output_schema


async def test_a_built_tool_can_be_added_to_mcpserver_as_it_is() -> None:
    def later(text: str) -> str:
        return text

    tool = Tool.from_function(later, title="Later")
    server = MCPServer("probe")
    sdk.add_tools(server, [tool])
    assert sdk.find_tool(server, "later") is tool
    assert [(t.name, t.title) for t in await server.list_tools()] == [("later", "Later")]


async def test_a_request_s_session_leads_to_its_connection_and_the_client_s_name() -> None:
    seen: list[tuple[str, object, bool]] = []
    server = MCPServer("probe")

    async def remember(ctx: object, call_next: object) -> object:
        token = sdk.REQUEST.set(ctx)  # type: ignore[arg-type]
        try:
            return await call_next(ctx)  # type: ignore[operator]
        finally:
            sdk.REQUEST.reset(token)

    server.middleware.append(remember)  # type: ignore[arg-type]

    @server.tool()
    def probe() -> str:
        ctx = sdk.request_in_flight()
        assert ctx is not None
        connection = sdk.connection_of(ctx.session)
        seen.append((sdk.client_name(), connection.state, hasattr(connection.exit_stack, "callback")))
        return "ok"

    async with sdk_client(server, name="probe-client") as client:
        await client.call_tool("probe", {})
        await client.call_tool("probe", {})
    assert [(name, ok) for name, _, ok in seen] == [("probe-client", True)] * 2
    assert seen[0][1] is seen[1][1]  # one connection, one state
    assert sdk.request_in_flight() is None and sdk.client_name() == ""


def test_no_module_but_sdk_reaches_into_sdk_internals() -> None:
    import re
    from pathlib import Path

    import vmware_pilot

    root = Path(vmware_pilot.__file__).parent
    reach = re.compile(
        r"\._(lowlevel_server|mcp_server|tool_manager|resource_manager|prompt_manager|connection)\b|fn_metadata"
    )
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "sdk.py" and reach.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
