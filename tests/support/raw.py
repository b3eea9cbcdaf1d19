"""A raw JSON-RPC peer for the real server over in-memory streams, for protocol-edge tests.

Unlike the SDK's client it sends exactly what a test says (unknown methods, cancellations) and
records every message the server sends, so a test can assert what was *not* sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from vmware_pilot.server.pipeline import PilotMCPServer
from vmware_pilot.server.sdk import run_on_streams


class RawPeer:
    def __init__(self, send: Any, receive: Any) -> None:
        self._send = send
        self._receive = receive
        self.received: list[dict[str, Any]] = []
        self._next_id = 100

    async def post(self, message: dict[str, Any]) -> None:
        wire = mcp_types.jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", **message}, by_name=False)
        await self._send.send(SessionMessage(wire))

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.post({"method": method, **({"params": params} if params is not None else {})})

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and wait for the message answering it (result or error)."""
        self._next_id += 1
        request_id = self._next_id
        await self.post({"id": request_id, "method": method, **({"params": params} if params else {})})
        return await self.wait_for(lambda m: m.get("id") == request_id)

    async def next(self) -> dict[str, Any]:
        item = await self._receive.receive()
        message: dict[str, Any] = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
        self.received.append(message)
        return message

    async def wait_for(self, match: Any, timeout: float = 30) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while True:
                message = await self.next()
                if match(message):
                    return message


@asynccontextmanager
async def raw_session(server: PilotMCPServer, protocol: str = "2025-06-18") -> AsyncIterator[RawPeer]:
    """The server running on memory streams, initialized by a raw peer speaking ``protocol``
    (a handshake-era version)."""
    async with (
        create_client_server_memory_streams() as (client, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(run_on_streams, server, server_streams[0], server_streams[1])
        peer = RawPeer(client[1], client[0])
        init = await peer.request(
            "initialize",
            {
                "protocolVersion": protocol,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        assert "result" in init, init
        await peer.notify("notifications/initialized")
        yield peer
        tg.cancel_scope.cancel()
