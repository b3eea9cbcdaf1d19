"""The Pilot started as an MCP stdio server process, with a client session on it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import StdioServerParameters

from tests.support.mcp_client import LEGACY, Client, sdk_client


@asynccontextmanager
async def serve(
    command: str, args: list[str], home: Path, era: str = LEGACY
) -> AsyncIterator[tuple[Client, str, str]]:
    """Start the server process and connect the SDK's client speaking ``era``; leaving the block
    closes its stdin and waits for (or kills) it."""
    env = {**os.environ, "VMWARE_PILOT_HOME": str(home)}
    params = StdioServerParameters(command=command, args=args, env=env)
    async with sdk_client(params, era=era) as session:
        info = session.server_info
        yield Client(session), info.name if info else "", info.version if info else ""
