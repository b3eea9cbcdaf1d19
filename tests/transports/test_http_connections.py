"""Connection guards of a real `vmware-pilot mcp --transport http` process (loopback; slow tier,
the guards in this process: test_connection_guards.py).

Half-open and slow connections (slowloris) are closed after the read deadlines the settings give,
one client address cannot hold more than its share of connections, and the server keeps serving
everyone else meanwhile. Host names are accepted in any letter case. Hostile connections come
from other loopback addresses (127.0.0.x) than the well-behaved client (127.0.0.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from tests.support import asgi
from tests.support.server_proc import INIT, PilotProcess, make_cert, start_server
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.transports.client import connect_http
from vmware_pilot.transports.tokens import TokenStore

# Only a guard against a hang: a connection still open after this is reported as never closed.
_NEVER = 60.0
_INITIALIZE = json.dumps(INIT).encode()


@dataclass
class Served:
    server: PilotProcess
    token: str

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.port}"


def _serve(tmp: Path, tls: bool = False, **settings: str) -> Iterator[Served]:
    pilot_home = tmp / ".vmware"
    pilot_home.mkdir(mode=0o700)
    token = TokenStore(pilot_home / "tokens.json").create("alice", "admin")
    env = {f"VMWARE_PILOT_{k.upper()}": v for k, v in settings.items()}
    args, ca = ["--transport", "http"], None
    if tls:
        ca, key = make_cert(tmp)
        args = ["--transport", "https", "--cert", str(ca), "--key", str(key), "--public-name", "127.0.0.1"]
    with start_server(tmp, args, ca=ca, env=env) as server:
        yield Served(server, token)
        assert server.stop() == 0, server.stderr()


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Short read deadlines (1 s), the default connection cap."""
    yield from _serve(tmp_path_factory.mktemp("quick"), http_header_timeout="1", http_body_timeout="1")


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Four connections per address, deadlines far beyond the test."""
    yield from _serve(
        tmp_path_factory.mktemp("capped"),
        http_header_timeout="600",
        http_body_timeout="600",
        http_max_connections_per_client="4",
    )


async def _works(served: Served) -> None:
    """A well-behaved client gets its tool call answered."""
    with anyio.fail_after(_NEVER):
        async with connect_http(served.server.url, served.token) as client:
            reply = await client.call("list_workflows")
    assert not reply.is_error and "templates" in reply.payload


async def _open(served: Served, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", served.server.port, local_addr=(source, 0))


async def _until_closed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, drip: bytes = b"", within: float = _NEVER
) -> bytes | None:
    """Everything the server sent until it closed the connection (None: still open ``within`` s).

    ``drip`` is sent again and again meanwhile, as a slowloris client keeps a request alive."""

    async def dripping() -> None:
        with contextlib.suppress(OSError):
            while drip:
                await asyncio.sleep(0.2)
                writer.write(drip)
                await writer.drain()

    dripper = asyncio.create_task(dripping())
    received = b""
    try:
        with anyio.move_on_after(within) as scope:
            with contextlib.suppress(ConnectionResetError):
                while chunk := await reader.read(4096):
                    received += chunk
        return None if scope.cancelled_caught else received
    finally:
        dripper.cancel()
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@pytest.mark.slow
async def test_half_open_and_slow_connections_are_closed_and_others_are_served(quick: Served) -> None:
    head = f"POST /mcp HTTP/1.1\r\nHost: {quick.host}\r\n".encode()
    slow_body = (
        f"POST /mcp HTTP/1.1\r\nHost: {quick.host}\r\nAuthorization: Bearer {quick.token}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: 100000\r\n\r\n{"
    ).encode()
    silent, trickling, slow = [], [], []
    for i in range(50):
        reader, writer = await _open(quick, f"127.0.0.{10 + i}")
        if i % 3 == 1:
            writer.write(head)
            trickling.append((reader, writer))
        elif i % 3 == 2:
            writer.write(slow_body)
            slow.append((reader, writer))
        else:
            silent.append((reader, writer))
    await _works(quick)

    outcomes = await asyncio.gather(
        *(_until_closed(r, w) for r, w in silent),
        *(_until_closed(r, w, drip=b"X-Padding: 1\r\n") for r, w in trickling),
        *(_until_closed(r, w, drip=b" ") for r, w in slow),
    )
    assert all(out is not None for out in outcomes), f"{outcomes.count(None)} of 50 were never closed"
    for out in outcomes:
        assert out == b"" or out.startswith(b"HTTP/1.1 408"), out[:200]
    await _works(quick)


@pytest.mark.slow  # in this process: test_connection_guards.py
async def test_a_kept_alive_connection_gets_a_fresh_header_deadline_per_request(quick: Served) -> None:
    reader, writer = await _open(quick, "127.0.0.70")
    writer.write(f"GET /healthz HTTP/1.1\r\nHost: {quick.host}\r\n\r\n".encode())
    first = await reader.readuntil(b'{"status":"ok"}')
    assert first.startswith(b"HTTP/1.1 200")
    writer.write(f"GET /healthz HTTP/1.1\r\nHost: {quick.host}\r\n".encode())  # never finished
    assert await _until_closed(reader, writer, drip=b"X-Padding: 1\r\n") is not None


@pytest.mark.slow
async def test_one_address_cannot_hold_more_than_its_connections_and_others_are_served(
    capped: Served,
) -> None:
    held = [await _open(capped, "127.0.0.2") for _ in range(4)]
    try:
        reader, writer = await _open(capped, "127.0.0.2")
        refused = await _until_closed(reader, writer)
        assert refused is not None and refused.startswith(b"HTTP/1.1 503"), refused
        assert b"Too many connections" in refused
        await _works(capped)  # another address is served meanwhile

        # Closing one of them makes room for one more from that address.
        held_reader, held_writer = held.pop()
        held_writer.close()
        await held_writer.wait_closed()
        assert await held_reader.read() == b""
        transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        async with httpx.AsyncClient(transport=transport) as http:
            with anyio.fail_after(_NEVER):
                # The server learns of the close a moment after this side: until then, 503.
                while (await http.get(f"http://{capped.host}/healthz")).status_code != 200:
                    await asyncio.sleep(0.05)
    finally:
        for _, w in held:
            w.close()


@pytest.mark.parametrize("spelling", ["LOCALHOST", "LocalHost", "127.0.0.1"])
async def test_the_host_and_origin_checks_ignore_letter_case_in_process(
    settings: Settings, pilot_home: Path, spelling: str
) -> None:
    app = build_app(settings)
    try:
        tokens = TokenStore(pilot_home / "tokens.json")
        host = f"{spelling}:{asgi.PORT}"
        headers = {
            "host": host,
            "origin": f"http://{host}",
            "authorization": f"Bearer {tokens.create('alice', 'admin')}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        async with asgi.loopback_http(app, pilot_home, tokens) as http:
            response = await http.post("/mcp", headers=headers, content=_INITIALIZE)
            assert response.status_code == 200, (response.status_code, response.text)
            other = await http.post("/mcp", headers={**headers, "host": "EVIL.example"}, content=b"{}")
            assert other.status_code == 421
    finally:
        app.close()


@pytest.mark.slow
@pytest.mark.parametrize("spelling", ["LOCALHOST", "LocalHost", "127.0.0.1"])
async def test_the_host_and_origin_checks_ignore_letter_case(quick: Served, spelling: str) -> None:
    host = f"{spelling}:{quick.server.port}"
    headers = {
        "host": host,
        "origin": f"http://{host}",
        "authorization": f"Bearer {quick.token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    async with httpx.AsyncClient(timeout=_NEVER) as http:
        response = await http.post(quick.server.url, headers=headers, content=_INITIALIZE)
        assert response.status_code == 200, (response.status_code, response.text)
        other = await http.post(quick.server.url, headers={**headers, "host": "EVIL.example"}, content=b"{}")
        assert other.status_code == 421


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """HTTPS with a 1 s header deadline, which also bounds the TLS handshake."""
    yield from _serve(tmp_path_factory.mktemp("tls"), tls=True, http_header_timeout="1")


@pytest.mark.slow
async def test_a_connection_that_never_starts_tls_is_closed_and_others_are_served(tls: Served) -> None:
    idle = [await _open(tls, f"127.0.0.{80 + i}") for i in range(5)]
    half = await _open(tls, "127.0.0.90")
    half[1].write(b"\x16\x03\x01")  # the first bytes of a ClientHello, and nothing more
    # asyncio's own handshake deadline is 60 s: half of it still tells the two apart.
    outcomes = await asyncio.gather(*(_until_closed(r, w, within=30) for r, w in [*idle, half]))
    assert outcomes.count(None) == 0, f"{outcomes.count(None)} of 6 were never closed"
    with anyio.fail_after(_NEVER):
        async with connect_http(tls.server.url, tls.token, verify=tls.server.verify()) as client:
            assert not (await client.call("list_workflows")).is_error
