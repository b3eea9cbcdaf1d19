"""Approvals by URL: ``VMWARE_PILOT_APPROVALS=elicit`` on a 2026-07-28 connection (server/referral.py).

The SDK's 2.x client pinned to 2026-07-28, with an elicitation callback standing for the person:
``approve`` answers an input request whose URL is the console's gate page of the workflow; the
person decides there (the console's door, as the signed-in person) and the client's retry
completes with the approval's or the rejection's result; a retry before any decision asks again;
an expired gate is refused; a 2025-11-25 client still gets the form. The person's answer at the
client never decides the gate.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from mcp.server import request_state
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

from tests.support.approval_gates import OFF, gate
from tests.support.asgi import BASE, loopback_http
from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import MODERN, Client, sdk_client
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import BeforeSend, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest, RejectRequest
from vmware_pilot.server import create_server
from vmware_pilot.transports.tokens import TokenStore

CONSOLE = BASE  # the console of the loopback HTTP app (tests.support.asgi), as its public URL


@pytest.fixture
def url_app(settings: Settings) -> Iterator[PilotApp]:
    # Looks at a workflow's version every 50 ms while a retry waits for the console's save.
    app = build_app(Settings(home=settings.home, approvals="elicit", public_url=CONSOLE, watch_interval=0.05))
    yield app
    app.close()


def gate_page(workflow_id: str) -> str:
    return f"{CONSOLE}/console/workflows/{workflow_id}/gate"


def signed_in(name: str) -> Actor:
    """A person signed in to the console (as a token's holder)."""
    return Actor(name, kind="token")


async def decide_in_console(app: PilotApp, workflow_id: str, who: str, *, reject: str = "") -> None:
    """The console's door: ``who`` approves the gate page's plan (or rejects with a reason)."""
    if reject:
        app.service.reject(RejectRequest(signed_in(who), workflow_id, reject))
        return
    shown = app.service.pending_gate(workflow_id).gate
    request = ApproveRequest(
        signed_in(who), workflow_id, door="console", expected_digest=shown.digest, gate_step=shown.index
    )
    await app.service.approve(request)


class Person:
    """The person at the 2026-07-28 client: shown each link, does what ``visit`` says (decide in
    the console, or nothing), then answers ``action``."""

    def __init__(self, visit: Callable[[str], Awaitable[None]] | None = None, action: str = "accept") -> None:
        self.links: list[ElicitRequestURLParams] = []
        self.forms: list[ElicitRequestFormParams] = []
        self.visit = visit
        self.action = action

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        if isinstance(params, ElicitRequestFormParams):
            self.forms.append(params)
            return ElicitResult(action="accept", content={"decision": "approve", "approver": "carol"})
        assert isinstance(params, ElicitRequestURLParams)
        self.links.append(params)
        if self.visit is not None:
            await self.visit(params.url)
        return ElicitResult(action=self.action)  # type: ignore[arg-type]


@asynccontextmanager
async def session(app: PilotApp, person: Person, era: str = MODERN) -> AsyncIterator[Client]:
    server = create_server(app, actor=Actor("agent"))
    async with sdk_client(server, era=era, elicitation_callback=person) as s:
        yield Client(s)


async def at_gate(client: Client, *steps: dict[str, Any]) -> str:
    wf = await client.custom(list(steps) or [gate(), OFF])
    out = await client.ok("run_workflow", workflow_id=wf)
    assert out["outcome"] == "awaiting_approval"
    return wf


def payload_of(result: CallToolResult) -> dict[str, Any]:
    (block,) = result.content
    assert isinstance(block, TextContent)
    data = json.loads(block.text)
    assert data == result.structured_content
    return dict(data)


async def first_round(client: Client, workflow_id: str) -> InputRequiredResult:
    """``approve`` driven by hand: the first round's input request."""
    out = await client.session.session.call_tool(
        "approve", {"workflow_id": workflow_id}, allow_input_required=True
    )
    assert isinstance(out, InputRequiredResult), out
    return out


async def retry(
    client: Client, workflow_id: str, asked: InputRequiredResult, action: str = "accept"
) -> CallToolResult | InputRequiredResult:
    """The client's retry of that round, the person having answered ``action``."""
    return await client.session.session.call_tool(
        "approve",
        {"workflow_id": workflow_id},
        input_responses={"console": ElicitResult(action=action)},  # type: ignore[arg-type]
        request_state=asked.request_state,
        allow_input_required=True,
    )


def link_of(asked: InputRequiredResult) -> ElicitRequestURLParams:
    assert asked.input_requests is not None and set(asked.input_requests) == {"console"}
    request = asked.input_requests["console"]
    assert isinstance(request, ElicitRequest) and isinstance(request.params, ElicitRequestURLParams)
    return request.params


# --- the whole walk, as the SDK's client drives it ------------------------------------------------
async def test_the_person_is_sent_to_the_gate_page_and_the_call_completes_with_their_approval(
    url_app: PilotApp,
) -> None:
    async def approve_there(url: str) -> None:
        await decide_in_console(url_app, url.split("/")[-2], "alice")

    person = Person(approve_there)
    async with session(url_app, person) as client:
        wf = await at_gate(client)
        approved = await client.ok("approve", workflow_id=wf)
        status = await client.status(wf)
    assert [link.url for link in person.links] == [gate_page(wf)]
    assert wf in person.links[0].message and person.forms == []
    # The approval's result, as the approve tool gives it: the released step handed to this caller.
    assert approved["outcome"] == "dispatch_required" and approved["state"] == "pending"
    assert [p["index"] for p in approved["pending_dispatch"]] == [1]
    # Decided in the console, by the signed-in person: the agent's client recorded nothing.
    assert [(a["approver"], a["channel"]) for a in status["gates"][0]["approvals"]] == [
        ("token:alice", "console")
    ]


async def test_a_rejection_in_the_console_completes_the_call_with_the_rejection(url_app: PilotApp) -> None:
    async def reject_there(url: str) -> None:
        await decide_in_console(url_app, url.split("/")[-2], "alice", reject="wrong host")

    async with session(url_app, Person(reject_there)) as client:
        wf = await at_gate(client)
        rejected = await client.ok("approve", workflow_id=wf)
    assert (rejected["state"], rejected["outcome"], rejected["action"]) == (
        "cancelled",
        "cancelled",
        "cancelled",
    )
    assert rejected["rejected_by"] == "token:alice"


def form_value(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


async def approve_on_the_page(console: httpx.AsyncClient, token: str, url: str) -> None:
    """A person following the link: signs in to the console with ``token``, opens the gate page
    and approves the plan it shows (the page's digest and gate step)."""
    login = await console.get("/console/login")
    signed = await console.post(
        "/console/login", data={"csrf": form_value(login.text, "csrf"), "token": token, "next": ""}
    )
    assert signed.status_code == 303, signed.text
    page = await console.get(url)
    assert page.status_code == 200, page.text
    data = {name: form_value(page.text, name) for name in ("csrf", "digest", "gate_step")}
    answered = await console.post(url.removesuffix("/gate") + "/approve", data=data)
    assert answered.status_code in (200, 303), answered.text


async def test_the_link_is_the_real_console_gate_page_and_approving_there_completes_the_call(
    url_app: PilotApp, pilot_home: Path
) -> None:
    tokens = TokenStore(pilot_home / "tokens.json")
    alice = tokens.create("alice", "admin")
    async with loopback_http(url_app, pilot_home, tokens) as console:

        async def follow(url: str) -> None:
            await approve_on_the_page(console, alice, url)

        person = Person(follow)
        async with session(url_app, person) as client:
            wf = await at_gate(client)
            approved = await client.ok("approve", workflow_id=wf)
            status = await client.status(wf)
    assert [link.url for link in person.links] == [gate_page(wf)]
    assert approved["outcome"] == "dispatch_required" and [
        p["index"] for p in approved["pending_dispatch"]
    ] == [1]
    assert [(a["approver"], a["channel"]) for a in status["gates"][0]["approvals"]] == [
        ("token:alice", "console")
    ]


# --- each round, driven by hand ----------------------------------------------------------------
async def test_accepting_the_link_decides_nothing_and_the_retry_asks_again(url_app: PilotApp) -> None:
    async with session(url_app, Person()) as client:
        wf = await at_gate(client)
        before = await client.stored(wf)
        asked = await first_round(client, wf)
        assert link_of(asked).url == gate_page(wf)
        # The state names the workflow and its gate, sealed: nothing in it reads as plain JSON.
        assert asked.request_state and wf not in asked.request_state
        again = await retry(client, wf, asked)
        assert isinstance(again, InputRequiredResult) and link_of(again).url == gate_page(wf)
        after = await client.stored(wf)
        # Then decided in the console: the next retry completes with the approval's result.
        await decide_in_console(url_app, wf, "alice")
        done = await retry(client, wf, again)
    assert after == before  # "I went there" at the client approved nothing
    assert isinstance(done, CallToolResult) and not done.is_error
    assert payload_of(done)["outcome"] == "dispatch_required"


async def test_the_person_may_take_longer_in_the_console_than_the_sdks_ten_minutes(
    url_app: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with session(url_app, Person()) as client:
        wf = await at_gate(client)
        asked = await first_round(client, wf)
        an_hour_later = time.time() + 3600  # the SDK's boundary reads the wall clock for expiry
        monkeypatch.setattr(request_state, "time", SimpleNamespace(time=lambda: an_hour_later))
        await decide_in_console(url_app, wf, "alice")
        done = await retry(client, wf, asked)
    assert isinstance(done, CallToolResult) and not done.is_error
    assert payload_of(done)["outcome"] == "dispatch_required"


async def test_four_eyes_one_approval_in_the_console_keeps_the_call_waiting(url_app: PilotApp) -> None:
    async with session(url_app, Person()) as client:
        wf = await at_gate(client, gate(approvals_required=2), OFF)
        asked = await first_round(client, wf)
        await decide_in_console(url_app, wf, "alice")
        waiting = await retry(client, wf, asked)
        assert isinstance(waiting, InputRequiredResult) and link_of(waiting).url == gate_page(wf)
        await decide_in_console(url_app, wf, "bob")
        done = await retry(client, wf, waiting)
        status = await client.status(wf)
    assert isinstance(done, CallToolResult) and not done.is_error
    assert payload_of(done)["outcome"] == "dispatch_required"
    approvers = [a["approver"] for a in status["gates"][0]["approvals"]]
    assert approvers == ["token:alice", "token:bob"]


async def test_declining_the_link_leaves_the_gate_waiting(url_app: PilotApp) -> None:
    async with session(url_app, Person()) as client:
        wf = await at_gate(client)
        asked = await first_round(client, wf)
        declined = await retry(client, wf, asked, action="decline")
        status = await client.status(wf)
    assert isinstance(declined, CallToolResult) and declined.is_error
    out = payload_of(declined)
    assert out["refused"] == "declined" and out["hint"]
    assert status["state"] == "awaiting_approval" and status["gates"][0]["approvals"] == []


async def test_a_forged_request_state_is_refused(url_app: PilotApp) -> None:
    async with session(url_app, Person()) as client:
        wf = await at_gate(client)
        forged = InputRequiredResult(request_state=json.dumps({"workflow_id": wf, "gate_step": 0}))
        with pytest.raises(Exception, match="Invalid or expired requestState"):
            await retry(client, wf, forged)
        assert (await client.status(wf))["state"] == "awaiting_approval"


class HeldDispatcher(ScriptedDispatcher):
    """Runs the released power-off only once ``go`` is set (``started`` says it was sent)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self.go = asyncio.Event()

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        if tool == "power_off_vm":
            self.started.set()
            await self.go.wait()
        return await super().call(skill, tool, params, before_send)


async def test_with_dispatch_the_call_waits_for_the_run_the_console_released(settings: Settings) -> None:
    held = HeldDispatcher()
    app = build_app(
        Settings(home=settings.home, approvals="elicit", public_url=CONSOLE, watch_interval=0.05),
        dispatcher=held,
    )
    try:
        async with session(app, Person()) as client:
            wf = await at_gate(client)
            asked = await first_round(client, wf)
            console = asyncio.create_task(decide_in_console(app, wf, "alice"))
            await held.started.wait()  # approved in the console; the released step is being sent
            answer = asyncio.create_task(retry(client, wf, asked))
            await asyncio.sleep(0.1)
            assert not answer.done()  # the approval's result is not known before its run stops
            held.go.set()
            await console
            done = await answer
    finally:
        app.close()
    assert isinstance(done, CallToolResult) and not done.is_error
    out = payload_of(done)
    assert (out["state"], out["outcome"]) == ("completed", "completed")


async def test_a_run_that_stops_while_the_retry_reads_it_still_answers_the_call(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The released run stops (and is saved) just after the retry read it as running: the retry's
    wait counts that save rather than waiting for one that never comes."""
    held = HeldDispatcher()
    app = build_app(
        Settings(home=settings.home, approvals="elicit", public_url=CONSOLE, watch_interval=0.05),
        dispatcher=held,
    )
    console: asyncio.Task[None] | None = None
    read = app.service.referred_approval
    seen: list[str] = []

    async def read_then_the_run_stops(*args: Any, **kwargs: Any) -> Any:
        became = await read(*args, **kwargs)
        seen.append(became if isinstance(became, str) else "result")
        if became == "running" and console is not None and not held.go.is_set():
            held.go.set()
            await console  # the run stopped and was saved, after this read
        return became

    monkeypatch.setattr(app.service, "referred_approval", read_then_the_run_stops)
    try:
        async with session(app, Person()) as client:
            wf = await at_gate(client)
            asked = await first_round(client, wf)
            console = asyncio.create_task(decide_in_console(app, wf, "alice"))
            await held.started.wait()
            done = await retry(client, wf, asked)
    finally:
        app.close()
    assert seen == ["running", "result"]
    assert isinstance(done, CallToolResult) and not done.is_error
    assert payload_of(done)["outcome"] == "completed"


# --- refusals ----------------------------------------------------------------------------------
async def test_without_a_console_address_the_approval_is_refused_with_what_to_set(settings: Settings) -> None:
    app = build_app(Settings(home=settings.home, approvals="elicit"))
    try:
        person = Person()
        async with session(app, person) as client:
            wf = await at_gate(client)
            out = await client.refused("approve", workflow_id=wf)
    finally:
        app.close()
    assert out["refused"] == "console_not_configured" and person.links == []
    assert "VMWARE_PILOT_PUBLIC_URL" in out["hint"] and out["approve_command"] == f"vmware-pilot approve {wf}"


async def test_a_refusal_before_anyone_is_sent_to_the_console(url_app: PilotApp) -> None:
    person = Person()
    async with session(url_app, person) as client:
        wf = await client.custom([{**OFF, "action": "read", "tool": "get_vm_info"}, gate(), OFF])
        await client.ok("run_workflow", workflow_id=wf)  # hands out step 0, stops at the gate
        out = await client.refused("approve", workflow_id=wf)
    assert [s["index"] for s in out["not_executed_before_gate"]] == [0] and person.links == []


# --- the other era -----------------------------------------------------------------------------
async def test_a_2025_11_25_client_still_gets_the_form(url_app: PilotApp) -> None:
    person = Person()
    async with session(url_app, person, era="2025-11-25") as client:
        wf = await at_gate(client)
        approved = await client.ok("approve", workflow_id=wf)
        status = await client.status(wf)
    assert person.links == [] and len(person.forms) == 1
    assert approved["outcome"] == "dispatch_required"
    assert status["gates"][0]["approvals"][0]["channel"] == "elicit"


# --- expiry (waits the gate out) ---------------------------------------------------------------
@pytest.mark.slow
async def test_a_gate_that_expires_while_the_person_is_away_ends_the_call_refused(url_app: PilotApp) -> None:
    async with session(url_app, Person()) as client:
        wf = await at_gate(client, gate(expires_in_minutes=0.01), OFF)  # 600 ms
        asked = await first_round(client, wf)
        await asyncio.sleep(0.7)
        expired = await retry(client, wf, asked)
        status = await client.status(wf)
    assert isinstance(expired, CallToolResult) and expired.is_error
    assert payload_of(expired)["refused"] == "gate_expired"
    assert status["gates"][0]["expired"] is True
