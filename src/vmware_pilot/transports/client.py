"""A small MCP client for Pilot's own tools (demo, benchmarks): start `vmware-pilot mcp`, call tools.

It talks to the server exactly as an MCP client would: a subprocess over stdio, or streamable
HTTP(S) with a bearer token; one session each.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

__all__ = ["PilotClient", "ToolReply", "connect_http", "connect_stdio", "server_command"]


@dataclass(frozen=True)
class ToolReply:
    """One tool result: the JSON payload and whether the server flagged it an error."""

    payload: dict[str, Any]
    is_error: bool


class PilotClient:
    """A connected session to a Pilot server."""

    def __init__(self, session: ClientSession, server_name: str, server_version: str) -> None:
        self.session = session
        self.server_name = server_name
        self.server_version = server_version

    async def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolReply:
        result = await self.session.call_tool(tool, dict(arguments or {}))
        payload: dict[str, Any]
        if isinstance(result.structured_content, dict):
            payload = result.structured_content
        else:
            text = "".join(block.text for block in result.content if isinstance(block, TextContent))
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            payload = parsed if isinstance(parsed, dict) else {"error": text}
        return ToolReply(payload=payload, is_error=bool(result.is_error))


def server_command() -> tuple[str, list[str]]:
    """How to start this installation's server: the `vmware-pilot` script beside this Python."""
    script = Path(sys.executable).with_name("vmware-pilot")
    if script.is_file() and os.access(script, os.X_OK):
        return str(script), ["mcp"]
    return sys.executable, ["-m", "vmware_pilot", "mcp"]


@asynccontextmanager
async def connect_stdio(
    command: str,
    args: list[str],
    env: Mapping[str, str] | None = None,
    errlog: TextIO = sys.stderr,
    *,
    inherit_env: bool = True,
) -> AsyncIterator[PilotClient]:
    """Start the server subprocess, initialize a session; stop the process on exit.

    ``env`` is added to this process's environment, or (``inherit_env=False``) is the server's
    whole environment."""
    whole = {**os.environ, **(env or {})} if inherit_env else dict(env or {})
    params = StdioServerParameters(command=command, args=args, env=whole)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        yield PilotClient(session, init.server_info.name, init.server_info.version)


@asynccontextmanager
async def connect_http(
    url: str,
    token: str,
    *,
    verify: ssl.SSLContext | bool = True,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[PilotClient]:
    """Open a session to ``url`` (``…/mcp``) sending ``token`` as the bearer; closes it on exit."""
    all_headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=all_headers, verify=verify, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        yield PilotClient(session, init.server_info.name, init.server_info.version)
