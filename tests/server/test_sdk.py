"""The SDK internals ``server/sdk.py`` relies on are still there (fails when an SDK release moves them)."""

from __future__ import annotations

import inspect

from mcp.server.fastmcp import FastMCP
from mcp.server.lowlevel import Server

from vmware_pilot.server.sdk import set_version


def test_fastmcp_keeps_its_low_level_server_with_run_and_initialization_options() -> None:
    server = FastMCP("probe")
    lowlevel = server._mcp_server
    assert isinstance(lowlevel, Server)
    assert list(inspect.signature(lowlevel.run).parameters)[:3] == [
        "read_stream",
        "write_stream",
        "initialization_options",
    ]
    set_version(server, "9.9.9")
    assert lowlevel.create_initialization_options().server_version == "9.9.9"


def test_fastmcp_keeps_its_tool_manager_and_a_tool_keeps_its_argument_model() -> None:
    from mcp.server.fastmcp.tools import Tool
    from mcp.server.fastmcp.utilities.func_metadata import ArgModelBase, FuncMetadata

    from vmware_pilot.server.sdk import close_arguments, find_tool

    server = FastMCP("probe")

    @server.tool()
    def probe(count: int) -> str:
        return str(count)

    tool = find_tool(server, "probe")
    assert isinstance(tool, Tool) and find_tool(server, "absent") is None
    assert isinstance(tool.fn_metadata, FuncMetadata)
    assert issubclass(tool.fn_metadata.arg_model, ArgModelBase)
    closed = close_arguments(tool)
    assert closed.parameters["additionalProperties"] is False
    assert closed.fn_metadata.arg_model.model_config.get("strict") is True
    assert list(inspect.signature(tool.run).parameters)[:2] == ["arguments", "context"]


async def test_a_built_tool_can_be_added_to_fastmcp_as_it_is() -> None:
    from mcp.server.fastmcp.tools import Tool

    from vmware_pilot.server.sdk import add_tools, find_tool

    def later(text: str) -> str:
        return text

    tool = Tool.from_function(later, title="Later")
    server = FastMCP("probe")
    add_tools(server, [tool])
    assert find_tool(server, "later") is tool
    assert [(t.name, t.title) for t in await server.list_tools()] == [("later", "Later")]


def test_the_low_level_server_keeps_replaceable_run_and_capabilities() -> None:
    from mcp.server.lowlevel import NotificationOptions

    from vmware_pilot.server.sdk import declare_subscriptions, lowlevel, wrap_run

    server = FastMCP("probe")
    low = lowlevel(server)
    assert isinstance(low, Server)
    seen: list[str] = []

    def wrapper(original: object) -> object:
        seen.append("wrapped")
        return original

    wrap_run(low, wrapper)  # type: ignore[arg-type]
    assert seen == ["wrapped"]

    @low.list_resources()  # type: ignore[no-untyped-call,untyped-decorator]
    async def _resources() -> list[object]:
        return []

    declare_subscriptions(low)
    caps = low.get_capabilities(NotificationOptions(), {})
    assert caps.resources is not None and caps.resources.subscribe is True


def test_no_module_but_sdk_reaches_into_sdk_internals() -> None:
    import re
    from pathlib import Path

    import vmware_pilot

    root = Path(vmware_pilot.__file__).parent
    reach = re.compile(
        r"\._(mcp_server|tool_manager|resource_manager|prompt_manager)\b|fn_metadata|\.(run|get_capabilities) = "
    )
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "sdk.py" and reach.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


async def test_the_low_level_server_keeps_its_request_handlers_by_request_type() -> None:
    import contextlib
    from collections.abc import Iterator

    from mcp.types import ListToolsRequest

    from vmware_pilot.server.sdk import lowlevel, wrap_requests

    server = FastMCP("probe")
    seen: list[str] = []

    @contextlib.contextmanager
    def around(request: object) -> Iterator[None]:
        seen.append(f"before {getattr(request, 'method', '')}")
        yield
        seen.append("after")

    wrap_requests(lowlevel(server), around)
    handler = lowlevel(server).request_handlers[ListToolsRequest]
    await handler(ListToolsRequest(method="tools/list"))
    assert seen == ["before tools/list", "after"]
