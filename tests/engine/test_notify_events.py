"""Webhook events a chat can use, against a real HTTP receiver: every event names the workflow's
console link, who asked, why and who acted; a failure carries its error and what it changed; a
rejection who and why; a partial approval, an expired gate (once, whichever Pilot notices) and a
changed prediction have events of their own; Slack and Teams bodies are valid messages.

Each receiver test waits out a loopback HTTP server's shutdown: one stays in the fast tier, the
others are slow; the cheap in-process checks of the chat bodies are at the end."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chatschema import slack_problems, teams_problems
from tests.support.fakes import ScriptedDispatcher, failed
from tests.support.receiver import Receiver, serve
from vmware_pilot.adapters.chat import render
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RejectRequest, RunRequest
from vmware_pilot.engine.sweeper import Sweeper

ALICE = Actor("alice", kind="token")
BOB = Actor("bob", kind="token")
CAROL = Actor("carol", kind="token")
CONSOLE = "https://pilot.example.com"
WHY = "Patch window CHG0012345: firmware update on web-01"


def gate(**options: Any) -> dict[str, Any]:
    params = {"message": "Power off web-01?", **options}
    return {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": params}


def off(vm: str = "web-01", tool: str = "power_off_vm") -> dict[str, Any]:
    return {
        "action": "off",
        "skill": "aiops",
        "tool": tool,
        "params": {"vm_name": vm},
        "rollback_tool": "power_on_vm",
        "rollback_params": {"vm_name": vm},
    }


def vm_info(power: str) -> StepOutcome:
    data = {"name": "web-01", "power_state": power, "cpu": 2, "memory_mb": 4096, "host": "esx-1"}
    return StepOutcome(OutcomeKind.SUCCEEDED, data)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serve(Receiver()) as r:
        yield r


def notifying(
    backend_settings: Settings, receiver: Receiver, dispatcher: Any = None, **extra: Any
) -> PilotApp:
    values = {"notify_url": receiver.url, "notify_timeout": 2.0, "public_url": CONSOLE, **extra}
    return build_app(
        Settings(home=backend_settings.home, **values), dispatcher=dispatcher or ScriptedDispatcher()
    )


async def at_gate(app: PilotApp, steps: list[dict[str, Any]], who: Actor = ALICE) -> str:
    wid: str = app.service.create_workflow(CreateRequest(who, "patch-web", WHY, steps)).payload()[
        "workflow_id"
    ]
    out = (await app.service.run_workflow(RunRequest(who, wid))).payload()
    assert out["outcome"] == "awaiting_approval", out
    return wid


def by_name(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["event"]: e for e in events}


async def test_every_event_says_who_asked_why_and_who_acted(
    backend_settings: Settings, receiver: Receiver
) -> None:
    app = notifying(backend_settings, receiver)
    try:
        wid = await at_gate(app, [gate(approvals_required=2), off()])
        (
            await app.service.approve(ApproveRequest(BOB, wid, comment="Window agreed with the app team"))
        ).payload()
        app.service.reject(RejectRequest(CAROL, wid, "Wrong host: web-01 is the primary")).payload()
        events = [r.event for r in receiver.wait_for(3)]
    finally:
        app.close()
    assert [e["event"] for e in events] == ["awaiting_approval", "approval_partial", "cancelled"]
    for event in events:
        assert event["requested_by"] == "token:alice" and event["description"] == WHY
        assert event["link"].startswith(f"{CONSOLE}/console/workflows/{wid}")
        assert "approve" not in event["link"]  # a link to read, never a one-click approval
    waiting, partial, rejected = events
    assert waiting["link"] == f"{CONSOLE}/console/workflows/{wid}/gate" and waiting["actor"] == "token:alice"
    assert (
        waiting["decision"]["requested_by"] == "token:alice" and waiting["decision"]["ticket"] == "CHG0012345"
    )
    assert waiting["approvals_missing"] == 2
    assert partial["actor"] == "token:bob" and partial["approver"] == "token:bob"
    assert partial["approved_by"] == ["token:bob"] and partial["approvals_missing"] == 1
    assert partial["comment"] == "Window agreed with the app team"
    assert rejected["rejected"] is True and rejected["rejected_by"] == "token:carol"
    assert rejected["reason"] == "Wrong host: web-01 is the primary" and rejected["actor"] == "token:carol"
    assert rejected["link"] == f"{CONSOLE}/console/workflows/{wid}"


@pytest.mark.slow
async def test_a_failure_carries_its_error_and_what_was_already_changed(
    backend_settings: Settings, receiver: Receiver
) -> None:
    dispatcher = ScriptedDispatcher(
        answers={"reboot_vm": failed("VM web-02 is locked by task-42; password=hunter2")}
    )
    app = notifying(backend_settings, receiver, dispatcher)
    try:
        wid = await at_gate(app, [gate(), off("web-01"), off("web-02", tool="reboot_vm")])
        out = (await app.service.approve(ApproveRequest(BOB, wid))).payload()
        events = by_name([r.event for r in receiver.wait_for(2)])
    finally:
        app.close()
    assert out["outcome"] == "failed"
    failure = events["failed"]
    assert failure["step"] == 2 and failure["actor"] == "token:bob"
    assert failure["error"].startswith("VM web-02 is locked by task-42") and "hunter2" not in failure["error"]
    assert failure["failed_step"] == {"index": 2, "skill": "aiops", "tool": "reboot_vm", "status": "failed"}
    assert [(c["index"], c["tool"]) for c in failure["changed"]] == [(1, "power_off_vm")]
    assert failure["effect_unknown"] == []


@pytest.mark.slow
async def test_an_expired_gate_is_announced_once_whichever_pilot_notices(
    backend_settings: Settings, receiver: Receiver
) -> None:
    first = notifying(backend_settings, receiver)
    second = notifying(backend_settings, receiver)  # another Pilot on the same database
    try:
        wid = await at_gate(first, [gate(expires_in_minutes=0.001), off()])
        await asyncio.sleep(0.1)
        first.service.notice_expiry(wid)
        second.service.notice_expiry(wid)
        sweep = Sweeper(lambda: second.service.runner, interval=10)
        noticed = await sweep.notice_expired_gates(second.service.runner)
        second.service.get_workflow_status(wid).payload()
        receiver.wait_for(2)
    finally:
        first.close()
        second.close()  # both drain the outbox: a second announcement would arrive by now
    events = [r.event for r in receiver.received]
    assert [e["event"] for e in events] == ["awaiting_approval", "gate_expired"]
    expired = events[1]
    assert expired["step"] == 0 and expired["actor"] == "vmware-pilot" and expired["expires_at"]
    assert expired["link"] == f"{CONSOLE}/console/workflows/{wid}" and noticed == []


@pytest.mark.slow
async def test_the_sweep_announces_a_gate_that_expired_unnoticed(
    backend_settings: Settings, receiver: Receiver
) -> None:
    app = notifying(backend_settings, receiver)
    try:
        wid = await at_gate(app, [gate(expires_in_minutes=0.001), off()])
        await asyncio.sleep(0.1)
        noticed = await Sweeper(lambda: app.service.runner, interval=10).notice_expired_gates(
            app.service.runner
        )
        events = [r.event["event"] for r in receiver.wait_for(2)]
    finally:
        app.close()
    assert noticed == [wid] and events == ["awaiting_approval", "gate_expired"]


@pytest.mark.slow
async def test_a_changed_prediction_is_announced_with_the_voided_approvals(
    backend_settings: Settings, receiver: Receiver
) -> None:
    dispatcher = ScriptedDispatcher(answers={"get_vm_info": vm_info("poweredOn")})
    app = notifying(backend_settings, receiver, dispatcher)
    try:
        wid = await at_gate(app, [gate(approvals_required=2), off()])
        (await app.service.approve(ApproveRequest(BOB, wid))).payload()
        dispatcher.answers["get_vm_info"] = vm_info("poweredOff")
        (await app.service.show_gate(CAROL, wid)).payload()
        events = by_name([r.event for r in receiver.wait_for(3)])
    finally:
        app.close()
    changed = events["plan_changed"]
    assert changed["voided"] == ["token:bob"] and changed["approved_by"] == []
    assert changed["actor"] == "token:carol" and "no longer count" in changed["detail"]


def _hostile_description() -> str:
    return "<!channel> see <https://evil.example|here> & *now*"


@pytest.mark.slow
async def test_slack_bodies_are_valid_block_kit(backend_settings: Settings, receiver: Receiver) -> None:
    dispatcher = ScriptedDispatcher(answers={"reboot_vm": failed("locked")})
    app = notifying(backend_settings, receiver, dispatcher, notify_format="slack")
    try:
        wid = app.service.create_workflow(
            CreateRequest(ALICE, "patch-web", _hostile_description(), [gate(), off(tool="reboot_vm")])
        ).payload()["workflow_id"]
        (await app.service.run_workflow(RunRequest(ALICE, wid))).payload()
        (await app.service.approve(ApproveRequest(BOB, wid))).payload()
        bodies = [r.event for r in receiver.wait_for(2)]
    finally:
        app.close()
    for body in bodies:
        assert slack_problems(body) == [], body
        text = str(body)
        assert "<!channel>" not in text and "&lt;!channel&gt;" in text and "<https://evil" not in text
        (actions,) = [b for b in body["blocks"] if b["type"] == "actions"]
        assert next(e["url"] for e in actions["elements"]).startswith(f"{CONSOLE}/console/workflows/{wid}")
    waiting, failure = bodies
    assert waiting["blocks"][0]["text"]["text"].startswith("Approval needed: patch-web")
    assert "Asked by token:alice" in waiting["blocks"][1]["text"]["text"]
    assert "Verdict:" in waiting["blocks"][1]["text"]["text"]
    assert "Error: locked" in failure["blocks"][1]["text"]["text"]


@pytest.mark.slow
async def test_teams_bodies_are_adaptive_cards(backend_settings: Settings, receiver: Receiver) -> None:
    app = notifying(backend_settings, receiver, notify_format="teams")
    try:
        wid = await at_gate(app, [gate(), off()])
        app.service.reject(RejectRequest(CAROL, wid, "not today")).payload()
        bodies = [r.event for r in receiver.wait_for(2)]
    finally:
        app.close()
    for body in bodies:
        assert teams_problems(body) == [], body
        card = body["attachments"][0]["content"]
        assert card["actions"][0]["url"].startswith(f"{CONSOLE}/console/workflows/{wid}")
    texts = [b["inlines"][0]["text"] for b in bodies[1]["attachments"][0]["content"]["body"]]
    assert (
        texts[0].startswith("Rejected by token:carol: patch-web")
        and "Rejected by token:carol: not today" in texts
    )


def test_the_validators_catch_broken_messages() -> None:
    # The validators themselves must fail on what Slack and Teams reject.
    long_header = {"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}
    assert slack_problems({"text": "t", "blocks": [long_header]})
    assert slack_problems(
        {"text": "t", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]}
    )
    assert slack_problems({"text": "t", "blocks": [{"type": "image"}]})
    assert slack_problems({"text": "t", "blocks": [{"type": "divider"}] * 51})
    assert slack_problems({"blocks": [{"type": "divider"}]})
    assert teams_problems({"type": "message", "attachments": [{"contentType": "x", "content": {}}]})
    old_card = {"type": "AdaptiveCard", "version": "1.0", "body": [{"type": "RichTextBlock", "inlines": []}]}
    message = {"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive"}]}
    message["attachments"][0]["content"] = old_card
    assert len(teams_problems(message)) == 2  # no inlines; RichTextBlock before version 1.2


EVENT = {
    "event": "awaiting_approval",
    "workflow_id": "wf-1",
    "workflow_type": "patch-web",
    "state": "awaiting_approval",
    "step": 0,
    "link": f"{CONSOLE}/console/workflows/wf-1/gate",
    "requested_by": "token:alice",
    "requested_via": "Claude Code",
    "description": _hostile_description(),
    "actor": "token:alice",
    "decision": {
        "workflow_id": "wf-1",
        "gate": 0,
        "verdict": "succeeds",
        "verdict_summary": "SUCCEEDS: powers web-01 off",
        "changes": [
            {
                "step": 1,
                "tool": "power_off_vm",
                "object": f"vm-{i}",
                "field": "power_state",
                "before": "on",
                "after": "off",
            }
            for i in range(40)
        ],
        "requested_by": "token:alice",
        "approvals_required": 2,
        "approved_by": [],
        "approvals_missing": 2,
        "expires_at": "2026-12-03T10:00:00+00:00",
        "seconds_left": 3600.0,
    },
    "gate": {
        "alerts": [{"severity": "danger", "kind": "step_fails", "object": "step 1", "text": "x" * 5000}] * 9
    },
    "ts": "2026-12-02T10:00:00+00:00",
    "event_id": "e1",
}


@pytest.mark.parametrize("fmt", ["slack", "teams"])
def test_a_large_event_renders_within_the_chats_limits(fmt: str) -> None:
    body = render(EVENT, fmt)  # type: ignore[arg-type]
    assert (slack_problems if fmt == "slack" else teams_problems)(body) == []
    text = str(body)
    assert "Asked by token:alice via Claude Code" in text and "1 h 0 min left" in text
    assert "vm-0 power_state on → off" in text
    if fmt == "slack":
        assert "<!channel>" not in text and "&lt;!channel&gt;" in text
    else:
        kinds = {b["type"] for b in body["attachments"][0]["content"]["body"]}
        assert kinds == {"RichTextBlock"}  # plain text runs: no markdown link can be forged
