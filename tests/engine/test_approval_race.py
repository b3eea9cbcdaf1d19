"""Approvals of one gate given at the same time on two replicas sharing one database (issue 31):
each is counted toward the quorum, or refused for a reason that is true, never lost as "running in
another Pilot process" while the workflow only waits at its gate."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Workflow

QUORUM_GATE = {
    "action": "require_approval",
    "skill": "pilot",
    "tool": "approve",
    "params": {"message": "Two people, please", "approvals_required": 2},
}
WRITE = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "a"}}


def _hold_first_save(app: PilotApp, until: threading.Event, monkeypatch: pytest.MonkeyPatch) -> None:
    """``app``'s next save waits (in its worker thread) until ``until`` is set: its approval holds
    the run lease while the other replica's approval comes in."""
    save = app.store.workflows.save
    held = threading.Event()

    def waiting(wf: Workflow, *args: Any, **kwargs: Any) -> None:
        if not held.is_set():
            held.set()
            until.wait(timeout=30)
        save(wf, *args, **kwargs)

    monkeypatch.setattr(app.store.workflows, "save", waiting)


async def _approve_at_once(
    alice: Any, bob: Any, held: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Alice and Bob approve the quorum-2 gate of a new workflow at once, Alice's save held (on
    ``held``) until Bob is answered: ``(alice's answer, bob's answer, the status after)``."""
    made = await alice.ok("create_workflow", name="q", description="t", steps=[QUORUM_GATE, WRITE])
    wid = str(made["workflow_id"])
    assert (await alice.ok("run_workflow", workflow_id=wid))["outcome"] == "awaiting_approval"
    bob_answered = threading.Event()
    _hold_first_save(held, bob_answered, monkeypatch)

    async def bob_approves() -> dict[str, Any]:
        await asyncio.sleep(0.3)  # alice's approval holds the run lease by then (or not: both fine)
        try:
            return dict((await bob.call("approve", workflow_id=wid, approver="bob", gate_step=0)).payload)
        finally:
            bob_answered.set()

    by_alice, by_bob = await asyncio.gather(
        alice.call("approve", workflow_id=wid, approver="alice", gate_step=0), bob_approves()
    )
    assert "error" not in by_bob, by_bob
    assert "error" not in by_alice.payload, by_alice.payload
    return dict(by_alice.payload), by_bob, await alice.status(wid)


async def test_two_approvers_of_a_quorum_2_gate_on_two_replicas_at_once_are_both_counted(
    backend_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatchers = ScriptedDispatcher(), ScriptedDispatcher()
    first = build_app(backend_settings, dispatcher=dispatchers[0])
    second = build_app(backend_settings, dispatcher=dispatchers[1])
    try:
        async with connect(first, Actor("alice")) as alice, connect(second, Actor("bob")) as bob:
            by_alice, by_bob, status = await _approve_at_once(alice, bob, first, monkeypatch)
    finally:
        first.close()
        second.close()
    gate = next(g for g in status["gates"] if g["index"] == 0)
    assert sorted(a["approver"] for a in gate["approvals"]) == ["alice", "bob"]
    assert status["state"] == "completed" and status["steps"][1]["status"] == "success"
    calls = [c[1] for d in dispatchers for c in d.step_calls]
    assert calls == ["power_on_vm"], "the released write ran once, on one replica"
    assert {by_bob.get("outcome"), by_alice.get("outcome")} == {"awaiting_approval", "completed"}


async def test_two_approvers_of_a_quorum_2_gate_on_one_replica_at_once_are_both_counted(
    backend_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatcher = ScriptedDispatcher()
    app = build_app(backend_settings, dispatcher=dispatcher)
    try:
        async with connect(app, Actor("alice")) as alice, connect(app, Actor("bob")) as bob:
            _, _, status = await _approve_at_once(alice, bob, app, monkeypatch)
    finally:
        app.close()
    gate = next(g for g in status["gates"] if g["index"] == 0)
    assert sorted(a["approver"] for a in gate["approvals"]) == ["alice", "bob"]
    assert status["state"] == "completed"
    assert [c[1] for c in dispatcher.step_calls] == ["power_on_vm"]
