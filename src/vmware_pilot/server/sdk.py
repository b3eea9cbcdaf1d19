"""The MCP SDK internals Pilot relies on, in one place (FastMCP has no public door for these).

A test (tests/server/test_sdk.py) fails when the SDK changes any of them.
"""

from __future__ import annotations

from typing import Any

from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.fastmcp import FastMCP
from mcp.shared.message import SessionMessage

__all__ = ["run_on_streams", "set_version"]


def set_version(server: FastMCP[Any], version: str) -> None:
    """Report ``version`` in ``initialize`` (FastMCP otherwise reports the SDK's own version)."""
    server._mcp_server.version = version


async def run_on_streams(
    server: FastMCP[Any],
    read: MemoryObjectReceiveStream[SessionMessage | Exception],
    write: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Serve one session over message streams framed by the caller (what ``run_stdio_async`` does
    over the SDK's own stdio framing)."""
    lowlevel = server._mcp_server
    await lowlevel.run(read, write, lowlevel.create_initialization_options())
