"""The console's defences against a real `vmware-pilot mcp --transport http` process (no browser):
form bodies bounded before they are read, sessions that end with their token and follow its role,
pages that honour the role's read rights, approvals bound to the plan shown, bad query values."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.support.console_team import VM_OF, Team, at_gate, make_pilot_home, run
from tests.support.server_proc import start_server
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.transports.client import connect_http
from vmware_pilot.transports.tokens import TokenStore

ROLES = (
    "roles:\n"
    "  operator:\n    approve: others\n    tools: '*'\n"
    "  designer:\n    approve: none\n    tools: [design_workflow]\n"
)
PEOPLE = {
    "alice": "admin",
    "bob": "admin",
    "carl": "admin",
    "dave": "admin",
    "rita": "reader",
    "dina": "designer",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    folder = tmp_path_factory.mktemp("console-security")
    home, tokens = make_pilot_home(folder, PEOPLE)
    (home / "roles.yaml").write_text(ROLES)
    with start_server(folder, ["--transport", "http"], env={"VMWARE_PILOT_HOME": str(home)}) as server:
        yield Team(server, tokens, home)


def state_of(team: Team, wid: str) -> str:
    async def go() -> str:
        async with connect_http(team.server.url, team.tokens["bob"]) as client:
            return str((await client.call("get_workflow_status", {"workflow_id": wid})).payload["state"])

    return run(go())


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def digest_of(html: str) -> str:
    found = re.search(r'id="digest">([^<]+)<', html)
    assert found, html[:2000]
    return found.group(1)


@contextmanager
def signed_in(team: Team, who: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=team.base, follow_redirects=False, timeout=30) as client:
        form = client.get("/console/login")
        answer = client.post("/console/login", data={"csrf": csrf_of(form.text), "token": team.tokens[who]})
        assert answer.status_code == 303, answer.text
        yield client


# --- form bodies ------------------------------------------------------------------------------
FORM_ROUTES = [
    "/console/login",
    "/console/logout",
    "/console/workflows/x/approve",
    "/console/workflows/x/reject",
]


def _head(team: Team, path: str, extra: str, kind: str = "application/x-www-form-urlencoded") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{team.server.port}\r\nContent-Type: {kind}\r\n{extra}\r\n"
    ).encode()


def _status(sock: socket.socket) -> int:
    """The status of the response read from ``sock``; 0 when the server closed without one."""
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return 0
        data += chunk
    return int(data.split(b" ", 2)[1])


def _stream_chunks(sock: socket.socket, total: int, part: bytes = b"") -> None:
    """Send ``part`` then ``total`` bytes in chunks, never the last chunk (the server must answer first)."""
    chunk = b"x" * 65536
    try:
        if part:
            sock.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        sent = 0
        while sent <= total:
            sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            sent += len(chunk)
    except OSError:
        pass  # the server answered and closed


@pytest.mark.parametrize("path", FORM_ROUTES)
def test_a_console_form_declared_over_the_limit_is_refused_before_its_body_is_sent(
    served: Team, path: str
) -> None:
    for kind in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=b"):
        with socket.create_connection(("127.0.0.1", served.server.port), timeout=30) as sock:
            # 900 MB announced and never sent: the answer cannot wait for it.
            sock.sendall(_head(served, path, f"Content-Length: {900 * 1000 * 1000}\r\n", kind))
            assert _status(sock) == 413, (path, kind)


@pytest.mark.parametrize("path", FORM_ROUTES)
def test_a_chunked_console_form_is_cut_off_once_it_passes_the_limit(served: Team, path: str) -> None:
    multipart = b'--b\r\nContent-Disposition: form-data; name="csrf"; filename="f"\r\n\r\n'
    for kind, part in (
        ("application/x-www-form-urlencoded", b"csrf=x&token="),
        ("multipart/form-data; boundary=b", multipart),
    ):
        with socket.create_connection(("127.0.0.1", served.server.port), timeout=30) as sock:
            sock.sendall(_head(served, path, "Transfer-Encoding: chunked\r\n", kind))
            _stream_chunks(sock, 2 * MAX_REQUEST_BYTES, part)
            assert _status(sock) == 413, (path, kind)


def test_a_multipart_console_form_under_the_limit_is_refused_unparsed(served: Team) -> None:
    with httpx.Client(base_url=served.base, timeout=30) as client:
        form = client.get("/console/login")
        files = {"token": ("t.txt", b"x" * 1000)}
        sent = client.post("/console/login", data={"csrf": csrf_of(form.text)}, files=files)
        assert sent.status_code == 415 and "x-www-form-urlencoded" in sent.text
        # A plain form still signs in.
        plain = client.post(
            "/console/login",
            data={"csrf": csrf_of(form.text), "token": served.tokens["alice"]},
            follow_redirects=False,
        )
        assert plain.status_code == 303


# --- sessions follow their token --------------------------------------------------------------
def test_a_session_ends_when_its_token_is_revoked_or_replaced(served: Team) -> None:
    wid = at_gate(served)
    tokens = TokenStore(served.pilot_home / "tokens.json")
    with signed_in(served, "carl") as client:
        page = client.get(f"/console/workflows/{wid}/gate")
        assert page.status_code == 200
        tokens.revoke("carl")
        # Same name again, another secret: the session stays bound to the revoked one.
        served.tokens["carl"] = tokens.create("carl", "admin")
        listing = client.get("/console/workflows")
        assert listing.status_code == 303 and "ended=1" in listing.headers["location"]
        approve = client.post(
            f"/console/workflows/{wid}/approve",
            data={"csrf": csrf_of(page.text), "digest": digest_of(page.text)},
        )
        assert approve.status_code == 303 and approve.headers["location"].startswith("/console/login")
        assert "token you signed in with was revoked" in client.get(approve.headers["location"]).text
    assert state_of(served, wid) == "awaiting_approval"


def test_a_session_takes_its_tokens_new_role_at_the_next_request(served: Team) -> None:
    wid = at_gate(served)
    tokens = TokenStore(served.pilot_home / "tokens.json")
    with signed_in(served, "dave") as client:
        page = client.get(f"/console/workflows/{wid}/gate")
        assert page.status_code == 200 and "may not" not in page.text
        tokens.set_role("dave", "reader")
        again = client.get(f"/console/workflows/{wid}/gate")
        assert "Role &#39;reader&#39; may not call approve" in again.text
        refused = client.post(
            f"/console/workflows/{wid}/approve",
            data={"csrf": csrf_of(page.text), "digest": digest_of(page.text)},
        )
        assert refused.status_code == 403 and "Refused: Role" in refused.text
        tokens.set_role("dave", "no-such-role")
        assert client.get("/console/workflows").status_code == 403
    assert state_of(served, wid) == "awaiting_approval"


# --- read rights ------------------------------------------------------------------------------
def test_pages_show_only_what_the_role_may_read(served: Team) -> None:
    wid = at_gate(served)
    pages = [
        "/console/workflows",
        "/console/events",
        f"/console/workflows/{wid}",
        f"/console/workflows/{wid}/gate",
        f"/console/workflows/{wid}/events",
        f"/console/workflows/{wid}/steps/0",
    ]
    with signed_in(served, "dina") as client:
        for path in pages:
            answer = client.get(path)
            assert answer.status_code == 403, (path, answer.status_code)
            assert VM_OF[wid] not in answer.text
    with signed_in(served, "rita") as client:
        for path in pages:
            if path.endswith("events"):
                with client.stream("GET", path) as stream:
                    assert stream.status_code == 200, path
            else:
                assert client.get(path).status_code == 200, path


# --- approvals bind to the plan shown ---------------------------------------------------------
def test_an_approval_without_the_digest_the_page_showed_is_refused(served: Team) -> None:
    wid = at_gate(served)
    with signed_in(served, "alice") as client:
        page = client.get(f"/console/workflows/{wid}/gate")
        for data in ({"csrf": csrf_of(page.text)}, {"csrf": csrf_of(page.text), "digest": " "}):
            refused = client.post(f"/console/workflows/{wid}/approve", data=data)
            assert refused.status_code == 400 and "no plan digest" in refused.text
        assert state_of(served, wid) == "awaiting_approval"
        done = client.post(
            f"/console/workflows/{wid}/approve",
            data={"csrf": csrf_of(page.text), "digest": digest_of(page.text)},
        )
        assert done.status_code == 303 and "notice=approved" in done.headers["location"]


# --- query values -----------------------------------------------------------------------------
def test_a_bad_page_number_or_state_is_a_400_saying_what_is_allowed(served: Team) -> None:
    with signed_in(served, "alice") as client:
        for value in ("1e21", "99999999999999999999999", "0", "-1", "abc", "\uff11", ""):
            answer = client.get("/console/workflows", params={"page": value})
            assert answer.status_code == 400, (value, answer.text[:500])
            assert "page must be a whole number from 1 to" in answer.text
        assert client.get("/console/workflows", params={"page": "2"}).status_code == 200
        unknown = client.get("/console/workflows", params={"state": "<b>nope</b>"})
        assert unknown.status_code == 400 and "state must be one of draft" in unknown.text
        assert "<b>nope" not in unknown.text
        for state in ("", "cancelled"):
            assert client.get("/console/workflows", params={"state": state}).status_code == 200
