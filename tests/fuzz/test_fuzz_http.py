"""The HTTP front door of a real `vmware-pilot mcp --transport http` process, fuzzed.

Random methods, paths, headers and bodies, and tool calls with hostile arguments sent as raw
JSON inside a real MCP session (so lone surrogates and odd keys arrive exactly as written). Every
request gets an HTTP answer that is not a server error, bounded in size and free of tracebacks;
tool results pass ``checks.check_answer``. Afterwards the server logged no error of its own,
`vmware-pilot audit verify` passes and every stored workflow loads.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.fuzz_checks import MAX_RESULT_BYTES, check_answer
from tests.support.fuzz_strategies import TOOLS, arguments_for, json_values, resolve, text
from tests.support.mcp_client import INCIDENT
from tests.support.server_proc import PILOT, PilotProcess, clean_env, start_server
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.transports.tokens import TokenStore

# A server process of its own: with the multi-process tests, out of the fast tier.
pytestmark = pytest.mark.slow

ACCEPT = "application/json, text/event-stream"


@dataclass
class Front:
    server: PilotProcess
    home: Path
    token: str
    http: httpx.Client
    session: str = ""
    ids: list[str] = field(default_factory=list)
    next_id: int = 1

    def headers(self, *, in_session: bool = True, **extra: str) -> dict[str, str]:
        base = {
            "host": f"127.0.0.1:{self.server.port}",
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
            "accept": ACCEPT,
        }
        if self.session and in_session:
            base |= {"mcp-session-id": self.session, "mcp-protocol-version": "2025-06-18"}
        return base | extra

    def post(self, body: bytes, **extra: str) -> httpx.Response:
        response = self.http.post(self.server.url, content=body, headers=self.headers(**extra))
        _check_http(response)
        return response

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """One JSON-RPC request in the session; its reply message (None: refused as too large)."""
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        # ensure_ascii: lone surrogates and control characters travel as JSON escapes.
        body = json.dumps(message, ensure_ascii=True).encode()
        response = self.post(body)
        if len(body) > MAX_REQUEST_BYTES:
            assert response.status_code == 413, response.text[:500]
            return None
        if response.status_code == 400:  # a lone surrogate escape: refused before the SDK, as on stdio
            refused: dict[str, Any] = response.json()
            assert refused["error"]["code"] == -32600 and refused["id"] == self.next_id, refused
            return refused
        assert response.status_code == 200, response.text[:500]
        return _reply(response)


def _check_http(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    assert len(response.content) <= MAX_RESULT_BYTES
    assert b"Traceback" not in response.content


def _reply(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        # SSE lines end at CR, LF or CRLF only (str.splitlines would also split at U+2028 and
        # others, which JSON carries unescaped).
        lines = re.split(r"\r\n|\r|\n", response.text)
        data = [line[5:].strip() for line in lines if line.startswith("data:")]
        messages = [json.loads(d) for d in data if d]
        replies = [m for m in messages if "id" in m and "method" not in m]
        assert len(replies) == 1, messages
        return replies[0]  # type: ignore[no-any-return]
    return response.json()  # type: ignore[no-any-return]


def _verify(home: Path) -> None:
    verified = subprocess.run(
        [str(PILOT), "audit", "verify"],
        env=clean_env(home),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    app = build_app(Settings(home=home / ".vmware"))
    try:
        for summary in app.service.store.workflows.list_all():
            app.service.store.workflows.load(summary["id"])
    finally:
        app.close()


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Front]:
    home = tmp_path_factory.mktemp("front")
    (home / ".vmware").mkdir(mode=0o700)
    token = TokenStore(home / ".vmware" / "tokens.json").create("fuzzer", "admin")
    with start_server(home, ["--transport", "http"]) as server, httpx.Client(timeout=600) as http:
        front = Front(server, home, token, http)
        init = front.post(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "fuzz", "version": "1"},
                    },
                }
            ).encode()
        )
        front.session = init.headers["mcp-session-id"]
        front.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        created = front.rpc(
            "tools/call",
            {
                "name": "create_workflow_from_template",
                "arguments": {"workflow_type": "incident_response", "params": INCIDENT},
            },
        )
        assert created is not None
        front.ids.append(created["result"]["structuredContent"]["workflow_id"])
        yield front
        assert server.stop() == 0, server.stderr()
    errors = [line for line in server.stderr().splitlines() if " ERROR " in line]
    # The SDK logs a client closing its event stream as an error; that is the client's doing.
    assert all("Error in standalone SSE writer" in line for line in errors), server.stderr()[-6000:]
    _verify(home)


_header_values = st.one_of(
    # httpx refuses to send a value with whitespace at either end.
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80).map(str.strip),
    st.sampled_from(["", "Bearer", "Bearer x", "LOCALHOST", "null", "a" * 9000]),
)
_HEADER_NAMES = [
    "host",
    "origin",
    "authorization",
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "content-encoding",
    "last-event-id",
    "x-forwarded-for",
]
_bodies = st.one_of(
    st.binary(max_size=2000),
    json_values.map(lambda v: json.dumps(v, ensure_ascii=True).encode()),
    st.builds(
        lambda rid, method, params: json.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, ensure_ascii=True
        ).encode(),
        json_values,
        st.sampled_from(["initialize", "tools/call", "tools/list", "ping", "resources/list", "x"]) | text,
        json_values,
    ),
    st.sampled_from([b"", b"[" * 5000, b"{" * 300 + b"}" * 300, b"x" * (MAX_REQUEST_BYTES + 10)]),
)


@given(
    method=st.sampled_from(["POST", "POST", "GET", "DELETE", "PUT", "OPTIONS"]),
    path=st.sampled_from(["/mcp", "/mcp/", "/healthz", "/", "/mcp?x=1", "/../etc/passwd", "/%00"]),
    headers=st.dictionaries(st.sampled_from(_HEADER_NAMES), _header_values, max_size=5),
    body=_bodies,
)
def test_front_door_answers_any_request(
    front: Front, method: str, path: str, headers: dict[str, str], body: bytes
) -> None:
    request = front.http.build_request(
        method,
        front.server.base + path,
        content=body if method in ("POST", "PUT") else None,
        # Outside the shared session: a DELETE with its id would end it for the other test.
        headers=front.headers(in_session=False, **headers),
    )
    if method == "GET" and request.url.path.startswith("/mcp"):
        # A GET on /mcp opens the session's server-to-client event stream: read only its head.
        with front.http.stream("GET", request.url, headers=request.headers) as response:
            assert response.status_code < 500
        return
    _check_http(front.http.send(request))


@given(data=st.data())
def test_tool_calls_with_raw_hostile_json_are_answered(front: Front, data: st.DataObject) -> None:
    tool = data.draw(st.sampled_from(TOOLS), label="tool")
    arguments = resolve(data.draw(arguments_for(tool), label="arguments"), front.ids)
    if data.draw(st.booleans(), label="surrogate key"):
        arguments[data.draw(st.sampled_from(["\ud800", "k\udfff", "\x00"]))] = "v"
    reply = front.rpc("tools/call", {"name": tool, "arguments": arguments})
    if reply is None:
        return
    if "error" in reply:  # a JSON-RPC error (not a tool result): bounded and readable
        assert isinstance(reply["error"]["message"], str) and len(reply["error"]["message"]) <= 4096
        return
    result = reply["result"]
    assert len(result["content"]) == 1
    payload = check_answer(
        tool, arguments, result["content"][0]["text"], result.get("structuredContent"), result["isError"]
    )
    wf = payload.get("workflow_id")
    if not result["isError"] and isinstance(wf, str) and wf not in front.ids:
        front.ids.append(wf)
