"""The Pilot started as an MCP stdio server process, with a client session on it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.mcp_client import Client


@asynccontextmanager
async def serve(command: str, args: list[str], home: Path) -> AsyncIterator[tuple[Client, str, str]]:
    """Start the server process; leaving the block closes its stdin and waits for (or kills) it."""
    env = {**os.environ, "VMWARE_PILOT_HOME": str(home)}
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        yield Client(session), init.serverInfo.name, init.serverInfo.version
