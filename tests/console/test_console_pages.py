"""The console's pages in-process (the HTTP app over ASGI, no browser, no process): the decision
summary, controls that know who is looking, expired gates, the inbox and its search, the banner
of a failed run and the rollback preview. The same behaviour in real Chromium is in
test_console_browser.py (slow, lab)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fakes import ScriptedDispatcher
from tests.support.prechecks import count_prechecks
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RunRequest
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.console.words import change_lines, evidence_line, for_people
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore

ROLES = "roles:\n  operator:\n    approve: others\n    tools: '*'\n"
PEOPLE = {"alice": "admin", "bob": "admin", "olga": "operator"}
Client = Callable[[str], Awaitable[httpx.AsyncClient]]


def gate(**options: Any) -> dict[str, Any]:
    params = {"message": "Power off web-01 for maintenance?", **options}
    return {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": params}


def off(vm: str = "web-01") -> dict[str, Any]:
    return {
        "action": f"off_{vm}",
        "skill": "aiops",
        "tool": "power_off_vm",
        "params": {"vm_name": vm, "confirm": True},
        "rollback_tool": "power_on_vm",
        "rollback_params": {"vm_name": vm},
    }


def on(vm: str) -> dict[str, Any]:
    return {"action": f"on_{vm}", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": vm}}


async def failed_run(
    app: PilotApp, dispatcher: ScriptedDispatcher, error: str, name: str = "off-then-on"
) -> str:
    """A workflow by bob, approved by alice, whose power-on of web-02 fails with ``error`` after
    the power-off of web-01 ran."""
    dispatcher.answers["power_on_vm"] = StepOutcome(OutcomeKind.FAILED, {"error": error}, error)
    wid = await at_gate(app, "bob", [gate(), off("web-01"), on("web-02")], f"{name} for the app")
    digest = app.service.pending_gate(wid).gate.digest
    await app.service.approve(ApproveRequest(person("alice"), wid, door="console", expected_digest=digest))
    assert app.service.get_workflow_status(wid).payload()["state"] == "failed"
    dispatcher.answers.pop("power_on_vm")
    return wid


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def text_of(html: str) -> str:
    """The page's visible words, tags dropped and spaces folded."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.fixture
async def console(
    settings: Settings, pilot_home: Path
) -> AsyncIterator[tuple[PilotApp, Client, ScriptedDispatcher]]:
    (pilot_home / "roles.yaml").write_text(ROLES)
    tokens = TokenStore(pilot_home / "tokens.json")
    secrets = {name: tokens.create(name, role) for name, role in PEOPLE.items()}
    dispatcher = ScriptedDispatcher()
    app = build_app(settings, dispatcher=dispatcher)
    asgi = build_http_app(
        app, HttpOptions("http"), 8080, tokens, RoleBook(pilot_home / "roles.yaml", TOOL_NAMES)
    )
    opened: list[httpx.AsyncClient] = []

    async def signed_in(who: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1:8080", follow_redirects=False
        )
        opened.append(client)
        form = await client.get("/console/login")
        answer = await client.post("/console/login", data={"csrf": csrf_of(form.text), "token": secrets[who]})
        assert answer.status_code == 303, answer.text
        return client

    try:
        yield app, signed_in, dispatcher
    finally:
        for client in opened:
            await client.aclose()
        app.close()


async def settled(app: PilotApp, wid: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The workflow's status once ``done`` holds: the console carries approvals and rollbacks out
    after its answer, on the event loop (a few turns of it, no timer)."""
    for _ in range(2000):
        status = app.service.get_workflow_status(wid).payload()
        if done(status):
            return status
        await asyncio.sleep(0.001)
    raise AssertionError(f"never settled: {status['state']}")


def person(name: str) -> Actor:
    return Actor(name, kind="token", role=PEOPLE[name])


async def at_gate(app: PilotApp, who: str, steps: list[dict[str, Any]], description: str = "") -> str:
    made = app.service.create_workflow(
        CreateRequest(person(who), "maintenance", description or "ticket CHG-1", steps)
    ).payload()
    wid = str(made["workflow_id"])
    ran = (await app.service.run_workflow(RunRequest(person(who), wid))).payload()
    assert ran["state"] == "awaiting_approval", ran
    return wid


async def test_the_gate_starts_with_the_decision_summary_and_the_creator_is_told_why_not(
    console: Any,
) -> None:
    app, signed_in, _ = console
    wid = await at_gate(
        app, "olga", [gate(approvals_required=2, expires_in_minutes=90), off()], "Patch window, CHG-42"
    )
    olga = await signed_in("olga")
    page = await olga.get(f"/console/workflows/{wid}/gate")
    assert page.status_code == 200
    words = text_of(page.text)
    # The summary comes before the steps, and says who asked, why, approvals needed and time left.
    assert words.index("Decision summary") < words.index("What you release")
    assert "Asked by token:olga" in words and "Why Patch window, CHG-42" in words
    assert "2 more needed (0 of 2)" in words
    assert re.search(r"1 h (29|30) min left", words), words
    assert 'data-expires="' in page.text
    # olga created it and her role approves only others' work: no Approve button, the reason instead.
    assert 'id="approve"' not in page.text
    assert "Role 'operator' approves only workflows someone else created; you created" in words
    # Rejecting stays open to her, with a reason required.
    assert 'id="reject"' in page.text and "Reason to reject (required" in words


async def test_after_one_of_two_approvals_the_page_says_how_many_more_and_who(console: Any) -> None:
    app, signed_in, _ = console
    wid = await at_gate(app, "bob", [gate(approvals_required=2), off()])
    alice = await signed_in("alice")
    page = await alice.get(f"/console/workflows/{wid}/gate")
    digest = re.search(r'name="digest" value="([^"]+)"', page.text)
    assert digest
    sent = await alice.post(
        f"/console/workflows/{wid}/approve",
        data={
            "csrf": csrf_of(page.text),
            "digest": digest.group(1),
            "gate_step": "0",
            "comment": "checked the maintenance window",
        },
    )
    assert sent.status_code == 303
    done = await settled(app, wid, lambda s: bool(s["gates"][0]["approvals"]))
    assert done["gates"][0]["approvals"][0]["comment"] == "checked the maintenance window"
    after = text_of((await alice.get(f"/console/workflows/{wid}?notice=approved")).text)
    assert (
        "Your approval was recorded: 1 more needed before the run goes on (approved so far by token:alice)"
        in after
    )
    assert "follows the run" not in after
    again = await alice.get(f"/console/workflows/{wid}/gate")
    words = text_of(again.text)
    assert "1 more needed (1 of 2: approved by token:alice)" in words
    assert 'id="approve"' not in again.text and "You already approved this gate" in words
    # bob may still approve (admin, and not the same person as alice).
    bob = await signed_in("bob")
    assert 'id="approve"' in (await bob.get(f"/console/workflows/{wid}/gate")).text


async def test_an_expired_gate_is_shown_and_listed_as_expired_with_no_decision_control(console: Any) -> None:
    app, signed_in, _ = console
    wid = await at_gate(app, "bob", [gate(expires_in_minutes=0.0001), off("db-07")])
    alice = await signed_in("alice")
    page = await alice.get(f"/console/workflows/{wid}/gate")
    words = text_of(page.text)
    assert "Expired: this gate can no longer be approved." in words
    assert 'id="approve"' not in page.text, words
    assert "The gate expired at" in words and "it can only be rejected or cancelled" in words
    refused = await alice.post(
        f"/console/workflows/{wid}/approve",
        data={"csrf": csrf_of(page.text), "digest": "x", "gate_step": "0"},
    )
    assert refused.status_code == 409 and "expired" in refused.text
    inbox = text_of((await alice.get("/console/workflows")).text)
    assert "Expired db-07" not in inbox  # the state and target are separate facts
    row = inbox[inbox.index(wid) - 80 : inbox.index(wid) + 400]
    assert "Expired" in row and "Decide" not in row.split(wid)[1][:300]


async def test_the_inbox_puts_waiting_gates_first_and_searches_by_target_requester_and_text(
    console: Any,
) -> None:
    app, signed_in, dispatcher = console
    failed = {"workflow_id": await failed_run(app, dispatcher, "host is in maintenance", "restart-app")}
    waiting = await at_gate(app, "bob", [gate(expires_in_minutes=600), off("web-09")], "kernel patch CHG-77")
    alice = await signed_in("alice")
    page = await alice.get("/console/workflows")
    words = text_of(page.text)
    assert words.index(waiting) < words.index(str(failed["workflow_id"]))
    row = words[words.index("Waiting for approval maintenance") :]
    assert "Asked by token:bob" in row and "Targets web-09" in row and "Highest risk destructive" in row
    assert re.search(r"Time left (9 h 59 min|10 h 0 min) left", row), row[:400]
    assert "Failed maintenance" in words  # words and an icon, never colour alone
    for query, found, not_found in (
        ("web-09", waiting, failed["workflow_id"]),
        ("web-02", failed["workflow_id"], waiting),
        ("chg-77", waiting, failed["workflow_id"]),
        (waiting[-6:], waiting, failed["workflow_id"]),
    ):
        hits = (await alice.get("/console/workflows", params={"q": query})).text
        assert found in hits and str(not_found) not in hits, query


async def test_a_failed_run_says_where_with_the_whole_error_and_offers_the_rollback_preview(
    console: Any,
) -> None:
    app, signed_in, dispatcher = console
    long_error = "guest shutdown timed out after 300 s; unsaved guest data can be lost " + "x" * 400 + " END"
    wid = await failed_run(app, dispatcher, long_error)
    alice = await signed_in("alice")
    page = await alice.get(f"/console/workflows/{wid}?notice=approved")
    words = text_of(page.text)
    assert "Failed at step 2 (aiops.power_on_vm)" in words and long_error in page.text  # never cut off
    assert "Already changed before it stopped: step 1 (aiops.power_off_vm)" in words
    assert "approval was recorded" not in words
    preview = await alice.get(f"/console/workflows/{wid}/rollback")
    shown = text_of(preview.text)
    assert "What would be undone (1)" in shown
    assert "Pilot would call aiops.power_on_vm on web-01" in shown
    assert "Step 2 (aiops.power_on_vm)" not in shown.split("What cannot be undone")[0]
    done = await alice.post(f"/console/workflows/{wid}/rollback", data={"csrf": csrf_of(preview.text)})
    assert done.status_code == 400  # the confirmation box was not ticked
    confirmed = await alice.post(
        f"/console/workflows/{wid}/rollback", data={"csrf": csrf_of(preview.text), "confirm": "yes"}
    )
    assert confirmed.status_code == 303
    await settled(app, wid, lambda s: bool(s["rollback_results"]) and s["state"] == "failed")
    assert ("aiops", "power_on_vm", {"vm_name": "web-01"}) in dispatcher.calls
    rolled = text_of((await alice.get(f"/console/workflows/{wid}")).text)
    assert "Rolled back Undid 1 step(s)." in rolled


def test_evidence_lines_say_what_was_found_not_the_envelope_counters() -> None:
    envelope = {
        "items": [{"name": "web-01"}, {"name": "web-02"}, {"name": "db-01"}, {"name": "x"}],
        "returned": 4,
        "total": 9,
        "truncated": True,
        "limit": 4,
    }
    assert (
        evidence_line(envelope, "list_vms")
        == "Found 4 vms (showing 4 of 9): web-01, web-02, db-01 and 1 more."
    )
    assert (
        evidence_line({"items": [], "returned": 0, "total": 0, "truncated": False}, "list_alarms")
        == "Found no alarms."
    )
    assert "returned" not in evidence_line({"name": "web-01", "power_state": "poweredOn", "returned": 1})


def test_sentences_aimed_at_the_agent_are_left_out_for_people() -> None:
    said = (
        "VMware Tools is not running in the guest, so a graceful shutdown cannot be delivered. force=True is a "
        "hard power-off (like pulling the plug; unsaved guest data can be lost) — preview it and decide with the user."
    )
    plain = for_people(said)
    assert "with the user" not in plain and plain.endswith("unsaved guest data can be lost).")


def test_changes_are_told_plainly_and_a_running_step_is_running_not_of_unknown_effect() -> None:
    report = {
        "changed": [{"index": 1, "tool": "power_off_vm", "object": "web-01", "status": "success"}],
        "unknown_effects": [{"index": 2, "tool": "power_on_vm", "object": "web-02", "status": "running"}],
        "pending": [{"index": 3, "tool": "snapshot_vm", "status": "pending"}],
    }
    assert change_lines(report) == [
        "Changed by Pilot: step 1 (power_off_vm on web-01).",
        "Running now: step 2 (power_on_vm on web-02).",
    ]
    assert change_lines({"changed": [], "unknown_effects": []}) == ["Nothing changed yet."]


def digest_on(html: str) -> str:
    found = re.search(r'name="digest" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


async def test_the_gate_page_predicts_once_and_an_approval_runs_the_precheck_once(
    console: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One read of the gate for the page (view, decision summary, what the person may do); the
    approval is one request to the service, checked once before the answer page, recorded with it."""
    app, signed_in, _ = console
    wid = await at_gate(app, "bob", [gate(), off()])
    alice = await signed_in("alice")
    predictions: list[int] = []
    real = gate_records.prediction_of

    def counted(*args: Any, **kwargs: Any) -> Any:
        predictions.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gate_records, "prediction_of", counted)
    page = await alice.get(f"/console/workflows/{wid}/gate")
    assert page.status_code == 200 and 'id="approve"' in page.text
    assert len(predictions) == 1, "the view, the summary and the controls share one prediction"

    prechecks = count_prechecks(monkeypatch)
    wrong = await alice.post(
        f"/console/workflows/{wid}/approve",
        data={"csrf": csrf_of(page.text), "digest": digest_on(page.text), "gate_step": "1"},
    )
    assert wrong.status_code == 409 and "not the gate waiting for approval" in text_of(wrong.text)
    assert prechecks == [wid]
    done = await alice.post(
        f"/console/workflows/{wid}/approve",
        data={"csrf": csrf_of(page.text), "digest": digest_on(page.text), "gate_step": "0"},
    )
    assert done.status_code == 303 and done.headers["location"].endswith("?notice=approved")
    await settled(app, wid, lambda s: s["state"] != "awaiting_approval")
    assert prechecks == [wid, wid], "one per approval: the refused one and the recorded one"


async def test_the_role_refuses_an_approval_in_the_service_with_the_consoles_403(console: Any) -> None:
    app, signed_in, _ = console
    wid = await at_gate(app, "olga", [gate(), off()])
    olga = await signed_in("olga")
    page = await olga.get(f"/console/workflows/{wid}/gate")
    refused = await olga.post(
        f"/console/workflows/{wid}/approve", data={"csrf": csrf_of(page.text), "digest": "sha256:x"}
    )
    assert refused.status_code == 403
    assert "Refused: Role 'operator' approves only workflows someone else created" in text_of(refused.text)
    assert app.service.get_workflow_status(wid).payload()["state"] == "awaiting_approval"
