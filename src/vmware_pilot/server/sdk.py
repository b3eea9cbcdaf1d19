"""The MCP SDK internals Pilot relies on, in one place (FastMCP has no public door for these).

Nothing else in ``src`` reads a private attribute of an SDK object or replaces an SDK method:
FastMCP's low-level server (``_mcp_server``) and tool manager (``_tool_manager`` and its ``_tools``), the argument
model inside a tool's metadata (``Tool.fn_metadata.arg_model``), and the low-level server's
``run``, ``get_capabilities`` and ``request_handlers``. A test (tests/server/test_sdk.py) fails when an SDK release
moves or retypes any of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, cast

from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.tools import Tool
from mcp.server.fastmcp.utilities.func_metadata import ArgModelBase
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import request_ctx
from mcp.shared.message import SessionMessage
from mcp.types import ServerCapabilities
from pydantic import ConfigDict

__all__ = [
    "add_tools",
    "client_name",
    "close_arguments",
    "declare_subscriptions",
    "find_tool",
    "lowlevel",
    "run_on_streams",
    "set_version",
    "wrap_requests",
    "wrap_run",
]

RunFn = Callable[..., Awaitable[Any]]


def client_name() -> str:
    """The name the client of the request being handled gave at ``initialize`` (clientInfo), or
    "" outside a request."""
    try:
        params = request_ctx.get().session.client_params
    except LookupError:
        return ""
    return params.clientInfo.name if params is not None else ""


def lowlevel(server: FastMCP[Any]) -> Server[Any, Any]:
    """The low-level server under FastMCP (where resources, prompts, completions, logging and
    subscriptions are registered, and whose ``run`` serves one session)."""
    return server._mcp_server


def find_tool(server: FastMCP[Any], name: str) -> Tool | None:
    """The registered tool called ``name``, or None (FastMCP only offers calling it by name)."""
    return server._tool_manager.get_tool(name)


def add_tools(server: FastMCP[Any], tools: list[Tool]) -> None:
    """Register ``tools`` as built (FastMCP's ``add_tool`` builds a tool anew from a function)."""
    for tool in tools:
        server._tool_manager._tools[tool.name] = tool


def set_version(server: FastMCP[Any], version: str) -> None:
    """Report ``version`` in ``initialize`` (FastMCP otherwise reports the SDK's own version)."""
    lowlevel(server).version = version


def close_arguments(tool: Tool) -> Tool:
    """The same tool with a closed, strict input model.

    Unknown arguments are refused (schema: additionalProperties false) and nothing is coerced:
    ``"yes"`` is not ``true``, ``true`` is not ``1``, ``"5"`` is not ``5``. Objects and arrays sent
    as JSON text are still accepted (FastMCP parses them before validation).
    """
    base = tool.fn_metadata.arg_model
    config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)
    closed = cast(type[ArgModelBase], type(base.__name__, (base,), {"model_config": config}))
    metadata = tool.fn_metadata.model_copy(update={"arg_model": closed})
    return tool.model_copy(
        update={"fn_metadata": metadata, "parameters": closed.model_json_schema(by_alias=True)}
    )


def wrap_run(server: Server[Any, Any], wrapper: Callable[[RunFn], RunFn]) -> None:
    """Replace the low-level server's ``run`` (one session over a pair of message streams, used by
    stdio, streamable HTTP and the in-memory transport alike) with ``wrapper(original run)``."""
    server.run = wrapper(server.run)  # type: ignore[method-assign,assignment]


def wrap_requests(server: Server[Any, Any], around: Callable[[Any], AbstractContextManager[Any]]) -> None:
    """Handle every request the low-level server serves inside ``around(request)``."""
    for kind, handler in list(server.request_handlers.items()):
        server.request_handlers[kind] = _around(handler, around)


def _around(
    handler: Callable[[Any], Awaitable[Any]], around: Callable[[Any], AbstractContextManager[Any]]
) -> Any:
    async def wrapped(request: Any) -> Any:
        with around(request):
            return await handler(request)

    return wrapped


def declare_subscriptions(server: Server[Any, Any]) -> None:
    """Declare ``resources.subscribe`` in the capabilities (the SDK never declares it itself)."""
    declared = server.get_capabilities

    def capabilities(*args: Any, **kwargs: Any) -> ServerCapabilities:
        caps = declared(*args, **kwargs)
        if caps.resources is not None:
            caps.resources.subscribe = True
        return caps

    server.get_capabilities = capabilities  # type: ignore[method-assign]


async def run_on_streams(
    server: FastMCP[Any],
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
    write: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Serve one session over message streams framed by the caller (what ``run_stdio_async`` does
    over the SDK's own stdio framing)."""
    low = lowlevel(server)
    await low.run(read, write, low.create_initialization_options())
