"""The HTTP transport's ASGI app in this process: its lifespan run around a block (it starts the
MCP session manager), and an httpx client speaking to it through ``httpx.ASGITransport`` (the
fast-tier counterpart of a real `vmware-pilot mcp --transport http` process)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from starlette.types import ASGIApp, Message

from vmware_pilot.app import PilotApp
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.client import PilotClient
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore

PORT = 8080
BASE = f"http://127.0.0.1:{PORT}"


@asynccontextmanager
async def lifespan(app: ASGIApp) -> AsyncIterator[None]:
    """Run the app's lifespan (it starts the MCP session manager) around a block: httpx's ASGI
    transport sends requests only."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()

    async def receive() -> Message:
        return await inbox.get()

    async def send(message: Message) -> None:
        await outbox.put(message)

    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send))
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await task


@asynccontextmanager
async def loopback_http(
    pilot_app: PilotApp, pilot_home: Path, tokens: TokenStore
) -> AsyncIterator[httpx.AsyncClient]:
    """The loopback HTTP transport's app (the default roles) as `--transport http` serves it on
    port 8080, and a client sending to it."""
    asgi = build_http_app(
        pilot_app, HttpOptions("http"), PORT, tokens, RoleBook(pilot_home / "roles.yaml", TOOL_NAMES)
    )
    async with lifespan(asgi):
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url=BASE, timeout=30) as client:
            yield client


@asynccontextmanager
async def mcp_session(asgi: ASGIApp, base: str, token: str, **headers: str) -> AsyncIterator[PilotClient]:
    """The SDK's streamable HTTP client on the app (its lifespan running), sending ``token`` as the
    bearer: ``connect_http`` with httpx2's ASGI transport (the SDK's HTTP client) instead of a socket."""
    transport = httpx2.ASGITransport(app=asgi)
    all_headers = {**headers, "Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(transport=transport, base_url=base, headers=all_headers, timeout=30) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        yield PilotClient(session, init.server_info.name, init.server_info.version)
