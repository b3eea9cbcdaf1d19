"""POST bodies at the HTTP transport: over 1 MiB refused, bad bytes a 400. In the fast tier the app
in this process through ``httpx.ASGITransport``; a real `vmware-pilot mcp --transport http` (slow
tier) also shows the refusal comes before the body is sent, over a socket."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.asgi import loopback_http
from tests.support.server_proc import PilotProcess, start_server
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.transports.client import connect_http
from vmware_pilot.transports.http_body import lone_surrogate
from vmware_pilot.transports.tokens import TokenStore

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
BAD_BODIES = [
    b"\x96",
    b"\x00{\x00",
    b"\xff\xfe{\x00}\x00",
    b'{"jsonrpc":"2.0","id":1,"method":"\x96"}',
    b"[" * 5000,
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":' + b"[" * 3000 + b"]" * 3000 + b"}}",
]


@pytest.fixture
async def http(
    settings: Settings, pilot_home: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    """The loopback HTTP app in this process, and the headers of an admin's MCP POST."""
    app = build_app(settings)
    try:
        tokens = TokenStore(pilot_home / "tokens.json")
        headers = {
            "authorization": f"Bearer {tokens.create('alice', 'admin')}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        async with loopback_http(app, pilot_home, tokens) as client:
            yield client, headers
    finally:
        app.close()


async def test_a_body_over_the_limit_is_refused_in_process(
    http: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, headers = http
    body = b"x" * (2 * MAX_REQUEST_BYTES)
    assert (await client.post("/mcp", headers=headers, content=body)).status_code == 413

    async def chunks() -> AsyncIterator[bytes]:  # no length declared: cut off once past the limit
        for _ in range(32):
            yield b"x" * 65536

    assert (await client.post("/mcp", headers=headers, content=chunks())).status_code == 413


@pytest.mark.parametrize("body", BAD_BODIES)
async def test_a_body_the_sdk_cannot_parse_is_a_client_error_in_process(
    http: tuple[httpx.AsyncClient, dict[str, str]], body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    client, headers = http
    assert (await client.post("/mcp", headers=headers, content=body)).status_code == 400
    assert "Error handling POST request" not in caplog.text and "UnicodeDecodeError" not in caplog.text


async def test_a_request_under_the_limit_is_served_in_process(
    http: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, headers = http
    words = ("word " * 12_000)[:60_000]
    arguments = {"workflow_id": "wf-x", **{f"pad{i}": words for i in range(16)}}
    started = await client.post("/mcp", headers=headers, json=INIT)
    assert started.status_code == 200
    session = {
        **headers,
        "mcp-session-id": started.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    await client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "get_workflow_status", "arguments": arguments},
    }
    body = json.dumps(call).encode()
    assert MAX_REQUEST_BYTES - 100_000 < len(body) < MAX_REQUEST_BYTES
    answered = await client.post("/mcp", headers=session, content=body)
    assert answered.status_code == 200
    result = _result(answered)
    assert result["isError"] is True and result["structuredContent"]["field"].startswith("pad")


def _result(response: httpx.Response) -> dict[str, Any]:
    """The result of a JSON-RPC answer, sent as JSON or as one server-sent event."""
    if response.headers["content-type"].startswith("text/event-stream"):
        (data,) = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        message = json.loads(data)
    else:
        message = response.json()
    assert "result" in message, message
    result: dict[str, Any] = message["result"]
    return result


async def test_a_session_ended_with_delete_ends_quietly_in_process(
    http: tuple[httpx.AsyncClient, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    client, headers = http
    session = (await client.post("/mcp", headers=headers, json=INIT)).headers["mcp-session-id"]
    ended = await client.delete("/mcp", headers={**headers, "mcp-session-id": session})
    assert ended.status_code == 200
    assert (await client.get("/healthz")).status_code == 200
    await asyncio.sleep(0)  # the session's task ends
    assert "crashed" not in caplog.text and "ERROR" not in caplog.text


@dataclass
class Served:
    server: PilotProcess
    token: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("limit")
    (home / ".vmware").mkdir(mode=0o700)
    token = TokenStore(home / ".vmware" / "tokens.json").create("alice", "admin")
    with start_server(home, ["--transport", "http"]) as server:
        yield Served(server, token)


# --- a real process, over sockets (slow tier) ---------------------------------------------------


def _head(served: Served, extra: str) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{served.server.port}\r\n"
        f"Authorization: Bearer {served.token}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{extra}\r\n"
    ).encode()


def _status(sock: socket.socket) -> int:
    """The status of the response read from ``sock`` (waits up to 30 s for it)."""
    sock.settimeout(30)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1])


def _connect(served: Served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", served.server.port), timeout=30)


@pytest.mark.slow
def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(served: Served) -> None:
    with _connect(served) as sock:
        # A 2 MiB body is announced but never sent: the answer cannot wait for it.
        sock.sendall(_head(served, f"Content-Length: {2 * MAX_REQUEST_BYTES}\r\n"))
        assert _status(sock) == 413


@pytest.mark.slow
def test_a_streamed_body_is_cut_off_once_it_passes_the_limit(served: Served) -> None:
    chunk = b"x" * 65536
    with _connect(served) as sock:
        sock.sendall(_head(served, "Transfer-Encoding: chunked\r\n"))
        sent = 0
        try:
            # 2 MiB announced in chunks, and the end never sent: the server answers once past 1 MiB.
            while sent <= 2 * MAX_REQUEST_BYTES:
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sent += len(chunk)
        except OSError:
            pass  # the server closed the connection after answering
        assert _status(sock) == 413


@pytest.mark.slow
async def test_a_request_under_the_limit_is_served(served: Served) -> None:
    words = ("word " * 12_000)[:60_000]
    arguments = {"workflow_id": "wf-x", **{f"pad{i}": words for i in range(16)}}
    assert MAX_REQUEST_BYTES - 100_000 < len(json.dumps(arguments)) < MAX_REQUEST_BYTES - 1000
    async with connect_http(served.server.url, served.token) as client:
        reply = await client.call("get_workflow_status", arguments)
        assert reply.is_error and reply.payload["field"].startswith("pad")
        listed = await client.call("list_workflows", {})
        assert not listed.is_error


@pytest.mark.parametrize("body", BAD_BODIES)
@pytest.mark.slow
def test_a_body_the_sdk_cannot_parse_is_a_client_error_not_a_server_error(
    served: Served, body: bytes
) -> None:
    # Found by fuzzing: the SDK parses bodies with json.loads, which raised UnicodeDecodeError
    # or RecursionError on these; it logged a traceback and answered 500.
    with _connect(served) as sock:
        sock.sendall(_head(served, f"Content-Length: {len(body)}\r\n") + body)
        assert _status(sock) == 400
    log = served.server.stderr()
    assert "Error handling POST request" not in log and "UnicodeDecodeError" not in log, log


@pytest.mark.slow
def test_a_session_ended_with_delete_ends_quietly(served: Served) -> None:
    # Found by the HTTP fuzz: the session task crashed with ClosedResourceError (an ERROR with a
    # traceback in the log) whenever a client ended its session, as the SDK's client does on close.
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {
        "host": f"127.0.0.1:{served.server.port}",
        "authorization": f"Bearer {served.token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    with httpx.Client(timeout=30) as http:
        session = http.post(served.server.url, json=init, headers=headers).headers["mcp-session-id"]
        ended = http.delete(served.server.url, headers={**headers, "mcp-session-id": session})
        assert ended.status_code == 200
        # The next request on this connection is served after the session's task has ended.
        assert http.get(served.server.base + "/healthz").status_code == 200
    assert "crashed" not in served.server.stderr()


@pytest.mark.slow
def test_server_logged_no_error_of_its_own(served: Served) -> None:
    assert "ERROR vmware_pilot" not in served.server.stderr()


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_lone_surrogate_escape_is_an_invalid_request_with_its_id_in_process(
    http: tuple[httpx.AsyncClient, dict[str, str]], era: str
) -> None:
    """Python's JSON reads ``\\ud800`` but the SDK's parser does not: the answer is the stdio one,
    ``-32600`` with the request's id, whichever era the request speaks."""
    client, headers = http
    meta = {"io.modelcontextprotocol/protocolVersion": era} if era == "2026-07-28" else {}
    arguments = {"workflow_id": "wf-1", "\ud800": "v"}
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 41,
            "method": "tools/call",
            "params": {"name": "get_workflow_status", "arguments": arguments, "_meta": meta},
        },
        ensure_ascii=True,
    ).encode()
    response = await client.post("/mcp", headers={**headers, "mcp-protocol-version": era}, content=body)
    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] == 41 and answer["error"]["code"] == -32600
    assert "lone surrogate" in answer["error"]["message"]
    paired = body.replace(b"\\ud800", b"\\ud83d\\ude00")  # a pair is one character: handed on
    assert lone_surrogate(paired) == (False, None) and lone_surrogate(body) == (True, 41)
