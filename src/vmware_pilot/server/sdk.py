"""The MCP SDK internals Pilot relies on, in one place (``MCPServer`` has no public door for these).

Nothing else in ``src`` reads a private attribute of an SDK object: ``MCPServer``'s low-level
server (``_lowlevel_server``, where the resources, prompts, completions, logging and subscription
handlers are registered with its public ``add_request_handler``, and whose ``run`` serves one
connection), its tool manager (``_tool_manager`` and its ``_tools``), the argument model and output
schema inside a tool's metadata (``Tool.fn_metadata``), and the connection behind a request's
session (``ServerSession._connection``: its per-connection ``state`` and ``exit_stack``). A test
(tests/server/test_sdk.py) fails when an SDK release moves or retypes any of them.

The SDK keeps no "request being handled" context variable (1.x had ``request_ctx``): Pilot's
middleware (``server.pipeline``) sets ``request_in_flight`` for the handlers and the transports.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, cast

import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.server.session import ServerSession
from mcp.shared.message import SessionMessage
from pydantic import ConfigDict

__all__ = [
    "REQUEST",
    "add_tools",
    "client_name",
    "close_arguments",
    "connection_of",
    "find_tool",
    "fixed_lists",
    "lowlevel",
    "request_in_flight",
    "run_on_streams",
    "with_output_schema",
]

REQUEST: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar("vmware_pilot_request", default=None)
"""The request being handled, set by Pilot's middleware for the handler's duration."""


def request_in_flight() -> ServerRequestContext[Any, Any] | None:
    """The context of the MCP request being handled, or None outside one."""
    return REQUEST.get()


def client_name() -> str:
    """The name the client of the request being handled gave (``initialize``'s clientInfo, or on
    2026-07-28 the request's ``_meta`` client info), or "" outside a request or when it gave none."""
    ctx = REQUEST.get()
    params = ctx.session.client_params if ctx is not None else None
    info = params.client_info if params is not None else None
    return info.name if info is not None else ""


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server under ``MCPServer`` (its request handlers, and ``run``)."""
    return server._lowlevel_server


def fixed_lists(server: Server[Any]) -> None:
    """Make ``server`` tell every era its tool, prompt and resource lists never change.

    On 2026-07-28 connections the SDK declares ``listChanged`` for all three whenever
    ``subscriptions/listen`` is served; Pilot serves it for workflow changes, but its lists are
    fixed for the life of the process (the tools by the settings' exposure, the resources and
    prompts by the code), so no list-changed notification is ever sent and none is promised.
    ``resources.subscribe`` is left as the SDK derives it."""
    derive = server.get_capabilities

    def capabilities(*args: Any, **kwargs: Any) -> types.ServerCapabilities:
        told = derive(*args, **kwargs)
        for part in (told.tools, told.prompts, told.resources):
            if part is not None:
                part.list_changed = False
        return told

    server.get_capabilities = capabilities  # type: ignore[method-assign]


def find_tool(server: MCPServer[Any], name: str) -> Tool | None:
    """The registered tool called ``name``, or None."""
    return server._tool_manager.get_tool(name)


def add_tools(server: MCPServer[Any], tools: list[Tool]) -> None:
    """Register ``tools`` as built (``MCPServer.add_tool`` builds a tool anew from a function)."""
    for tool in tools:
        server._tool_manager._tools[tool.name] = tool


def close_arguments(tool: Tool) -> Tool:
    """The same tool with a closed, strict input model.

    Unknown arguments are refused (schema: additionalProperties false) and nothing is coerced:
    ``"yes"`` is not ``true``, ``true`` is not ``1``, ``"5"`` is not ``5``. Objects and arrays sent
    as JSON text are still accepted (the SDK parses them before validation).
    """
    base = tool.fn_metadata.arg_model
    config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)
    closed = cast(type[ArgModelBase], type(base.__name__, (base,), {"model_config": config}))
    metadata = tool.fn_metadata.model_copy(update={"arg_model": closed})
    return tool.model_copy(
        update={"fn_metadata": metadata, "parameters": closed.model_json_schema(by_alias=True)}
    )


def with_output_schema(tool: Tool, schema: dict[str, Any] | None) -> Tool:
    """The same tool declaring ``schema`` as its output schema (the SDK derives one from the
    function's return annotation; Pilot writes its own, refusals included)."""
    metadata = tool.fn_metadata.model_copy(update={"output_schema": schema})
    copied = tool.model_copy(update={"fn_metadata": metadata})
    copied.__dict__.pop("output_schema", None)  # a cached property of the copy's source
    return copied


def connection_of(session: ServerSession) -> Connection:
    """The connection a request's session belongs to (its ``state`` dict lives as long as it,
    its ``exit_stack`` unwinds when it ends)."""
    return session._connection


async def run_on_streams(
    server: MCPServer[Any],
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
    write: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Serve one connection over message streams framed by the caller (what ``run_stdio_async``
    does over the SDK's own stdio framing); either era, as the client's first request decides."""
    low = lowlevel(server)
    await low.run(read, write, low.create_initialization_options())
