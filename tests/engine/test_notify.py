"""Webhook notifications against a real HTTP receiver on a loopback port."""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from tests.support.fakes import ScriptedDispatcher, failed
from tests.support.receiver import Receiver, serve
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RollbackRequest, RunRequest

SECRET = "webhook-key-1"
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
READ = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}
OFF = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "web-01"},
    "rollback_tool": "power_on_vm",
    "rollback_params": {"vm_name": "web-01"},
}


def notifying_app(
    backend_settings: Settings, receiver: Receiver, dispatcher: Any = None, **extra: Any
) -> PilotApp:
    values = {"notify_url": receiver.url, "notify_secret": SECRET, "notify_timeout": 2.0, **extra}
    configured = Settings(home=backend_settings.home, **values)
    return build_app(configured, dispatcher=dispatcher or ScriptedDispatcher())


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serve(Receiver()) as r:
        yield r


def create(app: PilotApp, actor: Actor, steps: list[dict[str, Any]]) -> str:
    wid: str = app.service.create_workflow(CreateRequest(actor, "notify-test", "d", steps)).payload()[
        "workflow_id"
    ]
    return wid


async def test_gate_and_completion_are_posted_signed(
    backend_settings: Settings, receiver: Receiver, actor: Actor
) -> None:
    app = notifying_app(backend_settings, receiver)
    try:
        wid = create(app, actor, [READ, GATE, READ])
        (await app.service.run_workflow(RunRequest(actor, wid))).payload()
        first = receiver.wait_for(1)[0]
        (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
        second = receiver.wait_for(2)[1]
    finally:
        app.close()
    for got in (first, second):
        expected = "sha256=" + hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
        assert got.headers["X-Pilot-Signature"] == expected
        assert got.headers["Content-Type"] == "application/json"
    assert {k: first.event[k] for k in ("event", "workflow_id", "workflow_type", "state", "step")} == {
        "event": "awaiting_approval",
        "workflow_id": wid,
        "workflow_type": "notify-test",
        "state": "awaiting_approval",
        "step": 1,
    }
    assert first.event["ts"] and first.event["event_id"] != second.event["event_id"]
    assert (second.event["event"], second.event["state"]) == ("completed", "completed")
    assert "step" not in second.event
    assert SECRET.encode() not in first.body + second.body


async def test_failure_and_rollback_are_posted(
    backend_settings: Settings, receiver: Receiver, actor: Actor
) -> None:
    dispatcher = ScriptedDispatcher(answers={"power_on_vm": failed("host unreachable")})
    dispatcher.answers["reboot_vm"] = failed("vm locked")
    app = notifying_app(backend_settings, receiver, dispatcher)
    try:
        steps = [GATE, OFF, {**OFF, "tool": "reboot_vm", "rollback_tool": "", "rollback_params": {}}]
        wid = create(app, actor, steps)
        (await app.service.run_workflow(RunRequest(actor, wid))).payload()
        out = (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
        assert out["outcome"] == "failed"
        (await app.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
        events = [r.event for r in receiver.wait_for(3)]
    finally:
        app.close()
    assert [(e["event"], e.get("step")) for e in events] == [
        ("awaiting_approval", 0),
        ("failed", 2),
        ("rollback_incomplete", None),
    ]


@pytest.mark.slow
async def test_a_receiver_failing_at_first_gets_the_event_on_a_retry(
    backend_settings: Settings, actor: Actor
) -> None:
    with serve(Receiver(statuses=[500, 503])) as receiver:
        app = notifying_app(backend_settings, receiver)
        try:
            wid = create(app, actor, [GATE])
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            (got,) = receiver.wait_for(1)
        finally:
            app.close()
    assert receiver.attempts == 3
    assert got.event["event"] == "awaiting_approval"


@pytest.mark.slow
async def test_a_receiver_that_always_fails_never_fails_the_workflow(
    backend_settings: Settings, actor: Actor
) -> None:
    with serve(Receiver(statuses=[500] * 10)) as receiver:
        app = notifying_app(backend_settings, receiver, notify_attempts=2)
        try:
            wid = create(app, actor, [GATE, READ])
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            out = (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
            assert out["outcome"] == "completed"
            receiver.wait_attempts(4)  # two events, two attempts each
        finally:
            assert app.notifier is not None and app.notifier.close(10) is True
            app.close()
    assert receiver.attempts == 4 and receiver.received == []


@pytest.mark.slow
async def test_a_receiver_that_never_answers_does_not_hold_up_the_workflow(
    backend_settings: Settings, actor: Actor
) -> None:
    hold = threading.Event()
    with serve(Receiver(hold=hold)) as receiver:
        app = notifying_app(backend_settings, receiver, notify_timeout=30.0)
        try:
            wid = create(app, actor, [GATE, READ])
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            receiver.wait_attempts(1)  # the awaiting_approval POST is now stuck in the receiver
            out = (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
            assert out["outcome"] == "completed"
            assert receiver.received == [] and not hold.is_set()
        finally:
            hold.set()
            app.close()


def test_notifications_are_off_without_a_url(backend_settings: Settings) -> None:
    app = build_app(backend_settings)
    try:
        assert app.notifier is None and app.service.runner.events is None
    finally:
        app.close()


def test_the_notify_settings_refuse_a_non_http_url_and_hide_the_secret(pilot_home: Any) -> None:
    with pytest.raises(ValidationError, match="NOTIFY_URL"):
        Settings(home=pilot_home, notify_url="ftp://example.com/x")
    configured = Settings(home=pilot_home, notify_url="https://hooks.example.com/p", notify_secret=SECRET)
    assert SECRET not in repr(configured) and SECRET not in str(configured.model_dump())
    app = build_app(configured)
    try:
        assert SECRET not in repr(app.notifier)
    finally:
        app.close()
