"""The HTTP transport's connection guards (transports/connections.py) in this process: uvicorn's
h11 protocol with the guards, fed bytes through an in-memory transport. The same guards at a real
`vmware-pilot mcp --transport http` over sockets: test_http_connections.py (slow tier)."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState

from vmware_pilot.transports.connections import ConnectionLimits, guarded_protocol

DEADLINE = 0.05  # seconds: the guards' deadlines here (waits below are a few of them, no timing asserted)


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole request, then answers ``ok``."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


class Wire(asyncio.Transport):
    """The server's side of one connection from ``address``: what it wrote, whether it closed."""

    def __init__(self, address: str) -> None:
        super().__init__()
        self.address = address
        self.sent = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": (self.address, 40000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sent += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


class Server:
    """One guarded server's protocol class; ``connect`` opens a connection to it."""

    def __init__(self, per_client: int = 100) -> None:
        limits = ConnectionLimits(header_timeout=DEADLINE, body_timeout=DEADLINE, per_client=per_client)
        self.protocol = guarded_protocol(limits)
        self.config = uvicorn.Config(_ok, http=self.protocol, lifespan="off", log_level="warning")
        self.config.load()
        self.state = ServerState()

    def connect(self, address: str = "127.0.0.1") -> tuple[Any, Wire]:
        protocol = self.protocol(config=self.config, server_state=self.state, app_state={})
        wire = Wire(address)
        protocol.connection_made(wire)
        return protocol, wire


async def _until(condition: Any) -> None:
    """Let the loop run until ``condition()`` (a hang guard of 20 s, not a timing assertion)."""
    async with asyncio.timeout(20):
        while not condition():
            await asyncio.sleep(DEADLINE / 5)


async def test_a_connection_that_never_completes_its_headers_is_closed_with_a_408() -> None:
    protocol, wire = Server().connect()
    protocol.data_received(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    await _until(lambda: wire.closed)
    assert wire.sent.startswith(b"HTTP/1.1 408")
    protocol.connection_lost(None)


async def test_a_body_that_never_ends_is_closed_after_its_deadline() -> None:
    protocol, wire = Server().connect()
    protocol.data_received(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc")
    await _until(lambda: wire.closed)
    assert wire.sent == b""  # closed unanswered (the request had started: no 408 is written then)
    protocol.connection_lost(None)


async def test_a_kept_alive_connection_gets_a_fresh_header_deadline_per_request() -> None:
    protocol, wire = Server().connect()
    protocol.data_received(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await _until(lambda: wire.sent.endswith(b"ok"))
    assert wire.sent.startswith(b"HTTP/1.1 200")
    # Idle after a response: the connection is the keep-alive's to close, not the header deadline's.
    await asyncio.sleep(3 * DEADLINE)
    assert not wire.closed
    protocol.data_received(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: 1\r\n")  # never finished
    await _until(lambda: wire.closed)
    assert wire.sent.endswith(
        b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
    protocol.connection_lost(None)


async def test_one_address_cannot_hold_more_than_its_connections_and_others_are_served() -> None:
    server = Server(per_client=2)
    held = [server.connect("127.0.0.2") for _ in range(2)]
    _, refused = server.connect("127.0.0.2")
    assert refused.closed and refused.sent.startswith(b"HTTP/1.1 503")
    assert b"Too many connections" in refused.sent
    _, other = server.connect("127.0.0.3")
    assert not other.closed  # another address is served meanwhile
    # Closing one of them makes room for one more from that address.
    protocol, _ = held.pop()
    protocol.connection_lost(None)
    opened, again = server.connect("127.0.0.2")
    assert not again.closed
    for connection, _ in [*held, (opened, again)]:
        connection.connection_lost(None)
