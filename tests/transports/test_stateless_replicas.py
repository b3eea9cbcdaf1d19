"""Stateless HTTP across replicas (issue 30, point 3): two real `vmware-pilot mcp --transport http`
processes on one PostgreSQL database (tests/support/http_replicas.py); in the fast tier, the HTTP
transport's ASGI apps of two Pilots on one database, in this process.

A 2026-07-28 client has no session: its requests, sent to the two replicas in turn, are each
answered by whichever gets it (a workflow created on one is read, run and approved on the other).
With VMWARE_PILOT_REQUEST_STATE_KEYS shared, a call of several rounds (an approval by URL) goes
round by round through both replicas, each accepting the ``requestState`` the other sealed; a
state sealed for the same bearer on those keys (tests/support/request_state.py) is accepted by
either replica, one sealed on other keys by neither.
A 2025-11-25 client keeps its session with the replica that made it: the other does not know it.
"""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitRequestURLParams, ElicitResult, InputRequiredResult
from pydantic import SecretStr

from tests.support.asgi import BASE, PORT, lifespan
from tests.support.backends import Database
from tests.support.eras import demo_walk, refusals
from tests.support.http_replicas import RoundRobin, replicas
from tests.support.mcp_client import LEGACY, MODERN, Client, sdk_client
from tests.support.request_state import sealed
from tests.support.server_proc import PilotProcess
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.server.factory import SERVER_NAME, request_state_security
from vmware_pilot.store.sql import open_store
from vmware_pilot.transports.callers import CallerVerifier
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import DbTokenStore, TokenStore

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
POWER_OFF = {"action": "off", "skill": "aiops", "tool": "power_off_vm", "params": {"vm_name": "web-01"}}
KEYS = "9f" * 24  # the request-state secret every replica shares
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _post(server: PilotProcess, secret: str, body: dict[str, object], **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {secret}"}
    return httpx.post(server.url, json=body, headers={**ACCEPT, **auth, **headers}, timeout=60)


@pytest.mark.slow
@pytest.mark.backends("postgresql")
async def test_a_2026_client_sent_to_two_replicas_in_turn_walks_the_demo(
    database: Database, backend_settings: Settings, tmp_path: Path
) -> None:
    keys = {"VMWARE_PILOT_REQUEST_STATE_KEYS": KEYS}  # shared, as docs/scaling.md says
    with (
        replicas(database.raw_url, tmp_path, keys) as (servers, secret),
        closing(open_store(backend_settings)) as store,
    ):
        # alice as each replica's token verifier knows her, and the boundary a replica on KEYS seals
        # with (request_state_security: what create_server installs), or one on other keys
        alice = await CallerVerifier(DbTokenStore(store.tokens)).verify_token(secret)
        ours, theirs = (
            RequestStateBoundary(security, default_audience=SERVER_NAME)
            for security in (
                request_state_security(SecretStr(KEYS)),
                request_state_security(SecretStr("7" * 40)),
            )
        )
        transport = RoundRobin.over(servers)
        headers = {"Authorization": f"Bearer {secret}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60, transport=transport) as http:
            url = servers[0].url  # the address the client knows; the transport picks the replica
            async with sdk_client(streamable_http_client(url, http_client=http), era=MODERN) as session:
                client = Client(session)
                status = await demo_walk(client, dispatched=False, approver="")
                await refusals(client)
                created = await client.incident()
                seen = [await client.stored(created) for _ in range(2)]  # once on each replica
                # The next round of alice's call, whichever replica sealed its state on KEYS, is
                # accepted by either; a state sealed on other keys by neither.
                arguments = {"workflow_id": created}
                state = await sealed(ours, "get_workflow_status", arguments, alice)
                rounds = [
                    await session.call_tool("get_workflow_status", arguments, request_state=state)
                    for _ in range(2)
                ]
                foreign = await sealed(theirs, "get_workflow_status", arguments, alice)
                refused = []
                for _ in range(2):
                    with pytest.raises(MCPError) as caught:
                        await session.call_tool("get_workflow_status", arguments, request_state=foreign)
                    refused.append(caught.value.error)
        logged = [server.stderr() for server in servers]
    assert status["state"] == "pending" and status["created_by"] == "token:alice"
    assert seen[0] == seen[1] and seen[0]["state"] == "pending"
    assert all(KEYS not in log and KEYS[:32] not in log for log in logged)
    assert [r.structured_content["state"] for r in rounds if r.structured_content] == ["pending", "pending"]
    assert [(e.code, e.message) for e in refused] == [(-32602, "Invalid or expired requestState")] * 2
    rounds_served = [s.replica for s in transport.served if s.method == "tools/call"][-4:]
    assert sorted(rounds_served[:2]) == sorted(rounds_served[2:]) == [0, 1]
    calls = [s for s in transport.served if s.method == "tools/call"]
    # every request answered 200, but the two refused rounds: the SDK's 400 with the JSON-RPC error
    assert [s.status for s in transport.served] == [200] * (len(transport.served) - 2) + [400, 400]
    assert {s.replica for s in calls} == {0, 1}
    # The workflow the walk created on one replica was reviewed on the other, and the status read
    # twice at the end was read once on each: every answer was right wherever it came from.
    names = [s.name for s in calls]
    created_on = calls[names.index("create_workflow_from_template")].replica
    assert calls[names.index("review_workflow")].replica != created_on
    assert (
        calls[-1].name == calls[-2].name == "get_workflow_status" and calls[-1].replica != calls[-2].replica
    )
    assert {"run_workflow", "approve", "rollback"} <= set(names)


@pytest.mark.slow
@pytest.mark.backends("postgresql")
async def test_a_2025_session_is_known_only_to_the_replica_that_made_it(
    database: Database, tmp_path: Path
) -> None:
    with replicas(database.raw_url, tmp_path) as (servers, secret):
        a, b = servers
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        opened = _post(a, secret, init)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        pinned = {"Mcp-Session-Id": session, "Mcp-Protocol-Version": LEGACY}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert _post(a, secret, initialized, **pinned).status_code == 202
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        on_a = _post(a, secret, listing, **pinned)
        on_b = _post(b, secret, listing, **pinned)
        again = _post(a, secret, listing, **pinned)
    assert on_a.status_code == again.status_code == 200
    assert "run_workflow" in on_a.text
    # The other replica answers the SDK's "session not found": 404 and a JSON-RPC error, so a
    # 2025-11-25 client starts a new session (behind a load balancer: keep it on one replica).
    assert on_b.status_code == 404, on_b.text
    error = json.loads(on_b.text)["error"]
    assert "session" in error["message"].lower(), error


async def test_a_2026_client_sent_to_two_in_process_replicas_in_turn_is_answered_by_both(
    backend_settings: Settings, pilot_home: Path
) -> None:
    tokens = TokenStore(pilot_home / "tokens.json")
    secret = tokens.create("ann", "admin")
    roles = RoleBook(pilot_home / "roles.yaml", TOOL_NAMES)
    with closing(build_app(backend_settings)) as a, closing(build_app(backend_settings)) as b:
        apps = [build_http_app(app, HttpOptions("http"), PORT, tokens, roles) for app in (a, b)]
        transport = RoundRobin([httpx2.ASGITransport(app=asgi) for asgi in apps])
        headers = {"Authorization": f"Bearer {secret}"}
        async with (
            lifespan(apps[0]),
            lifespan(apps[1]),
            httpx2.AsyncClient(headers=headers, timeout=30, transport=transport) as http,
            sdk_client(streamable_http_client(f"{BASE}/mcp", http_client=http), era=MODERN) as session,
        ):
            client = Client(session)
            created = await client.incident()
            review = await client.ok("review_workflow", workflow_id=created)
            run = await client.ok("run_workflow", workflow_id=created)
            seen = [await client.stored(created) for _ in range(2)]
    assert review["verdict"] == "approved" and run["state"] == "awaiting_approval"
    assert seen[0] == seen[1] and seen[0]["state"] == "awaiting_approval"
    calls = [s for s in transport.served if s.method == "tools/call"]
    assert [(s.name, s.status) for s in calls][:3] == [
        ("create_workflow_from_template", 200),
        ("review_workflow", 200),
        ("run_workflow", 200),
    ]
    assert calls[0].replica != calls[1].replica != calls[2].replica and calls[-1].replica != calls[-2].replica


@pytest.mark.slow
@pytest.mark.backends("postgresql")
async def test_an_approval_by_url_goes_round_by_round_through_both_replicas(
    database: Database, backend_settings: Settings, tmp_path: Path
) -> None:
    """``approve`` under elicit (server/referral.py): each round's requestState, sealed by the
    replica that answered it, is accepted by the other on the shared keys, until the gate decided
    in the console completes the call."""
    env = {
        "VMWARE_PILOT_REQUEST_STATE_KEYS": KEYS,
        "VMWARE_PILOT_APPROVALS": "elicit",
        "VMWARE_PILOT_PUBLIC_URL": "https://pilot.example.com",
    }

    async def never_asked(context: Any, params: Any) -> ElicitResult:  # it declares URL elicitation
        raise AssertionError("the test answers each round itself")

    with (
        replicas(database.raw_url, tmp_path, env) as (servers, secret),
        closing(build_app(backend_settings)) as console,
    ):
        transport = RoundRobin.over(servers)
        headers = {"Authorization": f"Bearer {secret}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60, transport=transport) as http:
            url = servers[0].url
            async with sdk_client(
                streamable_http_client(url, http_client=http), era=MODERN, elicitation_callback=never_asked
            ) as session:
                client = Client(session)
                workflow_id = await client.custom([GATE, POWER_OFF])
                assert (await client.ok("run_workflow", workflow_id=workflow_id))[
                    "outcome"
                ] == "awaiting_approval"
                arguments = {"workflow_id": workflow_id}

                async def round_of(asked: InputRequiredResult | None) -> CallToolResult | InputRequiredResult:
                    if asked is None:
                        return await session.session.call_tool(
                            "approve", arguments, allow_input_required=True
                        )
                    return await session.session.call_tool(
                        "approve",
                        arguments,
                        input_responses={"console": ElicitResult(action="accept")},
                        request_state=asked.request_state,
                        allow_input_required=True,
                    )

                first = await round_of(None)
                assert isinstance(first, InputRequiredResult), first
                second = await round_of(first)  # the other replica: not decided yet, the link again
                assert isinstance(second, InputRequiredResult), second
                shown = console.service.pending_gate(workflow_id).gate  # the person, in the console
                await console.service.approve(
                    ApproveRequest(
                        Actor("carol", kind="token"), workflow_id, door="console",
                        expected_digest=shown.digest, gate_step=shown.index,
                    )
                )  # fmt: skip
                done = await round_of(second)
                status = await client.status(workflow_id)
    assert isinstance(done, CallToolResult) and not done.is_error, done
    assert done.structured_content is not None and done.structured_content["outcome"] == "dispatch_required"
    assert [(a["approver"], a["channel"]) for a in status["gates"][0]["approvals"]] == [
        ("token:carol", "console")
    ]
    for asked in (first, second):
        assert asked.input_requests is not None
        link = asked.input_requests["console"].params
        assert isinstance(link, ElicitRequestURLParams)
        assert link.url == f"https://pilot.example.com/console/workflows/{workflow_id}/gate"
    rounds = [s for s in transport.served if s.name == "approve"]
    assert [s.status for s in rounds] == [200, 200, 200]
    assert rounds[0].replica != rounds[1].replica != rounds[2].replica  # each round on the other
