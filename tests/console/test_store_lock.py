"""No store write on the event loop: while another connection holds SQLite's write lock, every
console and MCP write path of a real HTTP server (the transport's app under uvicorn, on a thread
of this process) waits for it in a worker thread, and unrelated requests (``/healthz``) are
answered meanwhile.

The lock is a raw connection's ``BEGIN IMMEDIATE``, held until the reads are answered. Each
request is written in full on a connection of its own; the reads start once the server's store
has asked for the write lock (a SQLAlchemy event on its engine). A write made on the event loop
would keep the loop from answering them until it gave up on the lock (the store's busy timeout),
so it would fail while the lock is still held; a write in a worker thread waits, and succeeds
once the lock is released.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.support.console_locking import Answer, InProcess, Sent, serving, while_locked, write_begins
from tests.support.console_team import GATE, OFF, at_gate, make_pilot_home, run
from tests.support.server_proc import INIT
from vmware_pilot.config import Settings
from vmware_pilot.transports.client import connect_http

READ = {"action": "read", "skill": "aiops", "tool": "get_vm_info", "params": {"vm_name": "web-01"}}


@dataclass
class Team:
    server: InProcess
    tokens: dict[str, str]
    pilot_home: Path

    @property
    def base(self) -> str:
        return self.server.base


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Team]:
    home, tokens = make_pilot_home(tmp_path, {"alice": "admin", "bob": "admin"})
    with serving(Settings(home=home)) as server:
        yield Team(server, tokens, home)


def locked_in(team: Team, send: Callable[[], Sent], *, waits: bool = True) -> Answer:
    with write_begins(team.server.app) as asking:
        return while_locked(team.server, team.pilot_home / "pilot.db", send, asking, waits=waits)


# --- the console ------------------------------------------------------------------------------
def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def form(team: Team, path: str, fields: dict[str, str], cookies: httpx.Cookies) -> Callable[[], Sent]:
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    headers = {"content-type": "application/x-www-form-urlencoded", "cookie": cookie}
    return lambda: Sent(team.server, path, urlencode(fields).encode(), headers)


@contextmanager
def console(team: Team, who: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=team.base, follow_redirects=False, timeout=30) as client:
        page = client.get("/console/login")
        signed = client.post("/console/login", data={"csrf": csrf_of(page.text), "token": team.tokens[who]})
        assert signed.status_code == 303
        yield client


def test_console_sign_in_waits_for_the_lock_off_the_event_loop(served: Team) -> None:
    with httpx.Client(base_url=served.base, follow_redirects=False, timeout=30) as client:
        page = client.get("/console/login")
        fields = {"csrf": csrf_of(page.text), "token": served.tokens["alice"]}
        answer = locked_in(served, form(served, "/console/login", fields, client.cookies))
        assert answer.status == 303 and "pilot_console=" in answer.headers.get("set-cookie", "")


@pytest.mark.slow
def test_console_sign_out_reject_and_approve_wait_for_the_lock_off_the_event_loop(served: Team) -> None:
    with console(served, "alice") as client:
        csrf = csrf_of(client.get("/console/workflows").text)
        # Reject: the workflow is cancelled once the lock is released.
        wid = at_gate(served)
        answer = locked_in(
            served,
            form(served, f"/console/workflows/{wid}/reject", {"csrf": csrf, "reason": "no"}, client.cookies),
        )
        assert answer.status == 303 and "notice=rejected" in answer.headers["location"], answer.body[:500]
        assert status(served, wid)["state"] == "cancelled"
        # Approve: answered at once (the approval runs detached), saved once the lock is released.
        wid = at_gate(served)
        digest = re.search(
            r'name="digest" value="([^"]+)"', client.get(f"/console/workflows/{wid}/gate").text
        )
        assert digest
        fields = {"csrf": csrf, "digest": digest.group(1)}
        answer = locked_in(
            served, form(served, f"/console/workflows/{wid}/approve", fields, client.cookies), waits=False
        )
        assert answer.status == 303 and "notice=approved" in answer.headers["location"], answer.body[:500]
        assert status(served, wid)["steps"][0]["status"] == "success"
        # Sign-out.
        answer = locked_in(served, form(served, "/console/logout", {"csrf": csrf}, client.cookies))
        assert answer.status == 303 and answer.headers["location"] == "/console/login"
        assert client.get("/console/workflows").status_code == 303


# --- MCP --------------------------------------------------------------------------------------


def call(team: Team, who: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with connect_http(team.server.url, team.tokens[who]) as client:
            done = await client.call(tool, arguments)
            assert not done.is_error, done.payload
            return dict(done.payload)

    return run(go())


def status(team: Team, wid: str) -> dict[str, Any]:
    return call(team, "bob", "get_workflow_status", {"workflow_id": wid})


class McpSession:
    """A raw MCP session over HTTP, so a tool call can be written in full before the reads start."""

    def __init__(self, team: Team, who: str) -> None:
        self.team = team
        self.headers = {
            "authorization": f"Bearer {team.tokens[who]}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        with httpx.Client(base_url=team.base, timeout=30) as http:
            started = http.post("/mcp", json=INIT, headers=self.headers)
            assert started.status_code == 200, started.text
            self.headers["mcp-session-id"] = started.headers["mcp-session-id"]
            self.headers["mcp-protocol-version"] = "2025-06-18"
            done = http.post(
                "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
            )
            assert done.status_code == 202, done.text

    def tool(self, name: str, arguments: dict[str, Any]) -> Callable[[], Sent]:
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        return lambda: Sent(self.team.server, "/mcp", json.dumps(body).encode(), self.headers)


def answer_of(answer: Answer) -> dict[str, Any]:
    """The structured result of a tool call's answer (JSON or one server-sent event)."""
    assert answer.status == 200, answer.body[:500]
    text = answer.body.decode()
    data = next((line[5:] for line in text.splitlines() if line.startswith("data:")), text)
    message = json.loads(data)
    result = message["result"]
    assert not result.get("isError"), result
    return dict(result["structuredContent"])


@pytest.mark.slow
def test_every_mcp_write_waits_for_the_lock_off_the_event_loop(served: Team) -> None:
    bob, alice = McpSession(served, "bob"), McpSession(served, "alice")

    def locked(session: McpSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return answer_of(locked_in(served, session.tool(tool, arguments)))

    made = locked(bob, "create_workflow", {"name": "lock", "description": "t", "steps": [GATE, OFF]})
    wid = str(made["workflow_id"])
    assert status(served, wid)["state"] == "pending"
    assert locked(bob, "run_workflow", {"workflow_id": wid})["state"] == "awaiting_approval"
    assert locked(alice, "approve", {"workflow_id": wid})["steps"][0]["status"] == "success"
    rolled = locked(alice, "rollback", {"workflow_id": wid, "confirm": True})
    assert rolled["action"] in ("rolled_back", "rollback_incomplete"), rolled
    other = at_gate(served)
    assert locked(alice, "cancel_workflow", {"workflow_id": other, "confirm": True})["state"] == "cancelled"
    draft = str(locked(bob, "design_workflow", {"goal": "power off web-01"})["workflow_id"])
    assert status(served, draft)["state"] == "draft"
    locked(bob, "update_draft", {"workflow_id": draft, "steps": [READ]})
    assert len(status(served, draft)["steps"]) == 1
    assert locked(bob, "confirm_draft", {"workflow_id": draft})["state"] == "pending"
    templated = locked(
        bob,
        "create_workflow_from_template",
        {"workflow_type": "incident_response", "params": {"alert_entity": "esxi-07", "alert_name": "CPU"}},
    )
    assert status(served, str(templated["workflow_id"]))["state"] == "pending"
