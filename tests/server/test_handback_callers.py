"""Hand-back mode with several callers: steps go to one caller, literal secrets only to the creator.

Two (or more) MCP sessions with different token identities on one server, and two Pilot
processes' worth of services on one store for the cross-process race.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.support.mcp_client import GATE, READ_STEP, connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor

ALICE = Actor("alice", kind="token")
BOB = Actor("bob", kind="token")
SECRET = "hunter2-very-secret"
READ_AGAIN = {"action": "info", "skill": "monitor", "tool": "get_vm_info", "params": {"vm_name": "web-01"}}
WITH_LITERAL = {
    "action": "list",
    "skill": "aiops",
    "tool": "list_virtual_machines",
    "params": {"vc_password": SECRET},
}
WITH_REFERENCE = {**WITH_LITERAL, "params": {"vc_password": {"$env": "VC_PASSWORD"}}}


def _text(payload: dict[str, Any]) -> str:
    return json.dumps(payload)


async def test_steps_handed_to_one_caller_are_refused_to_another_and_relisted_to_the_first(
    pilot_app: PilotApp,
) -> None:
    async with connect(pilot_app, ALICE) as alice, connect(pilot_app, BOB) as bob:
        wf = await alice.custom([READ_STEP, READ_AGAIN])
        first = await alice.ok("run_workflow", workflow_id=wf)
        assert first["outcome"] == "dispatch_required"
        assert [s["index"] for s in first["pending_dispatch"]] == [0, 1]

        refused = await bob.refused("run_workflow", workflow_id=wf)
        assert "pending_dispatch" not in refused
        assert "another caller" in refused["error"] and refused["handed_to"] == "token:alice"
        assert [s["index"] for s in refused["with_another_caller"]] == [0, 1]
        assert "cancel_workflow" in refused["hint"]

        # The first caller retrying is handed the same steps again (the 2.4.0 re-listing).
        again = await alice.ok("run_workflow", workflow_id=wf)
        assert again["pending_dispatch"] == first["pending_dispatch"]
        status = await bob.status(wf)
        assert status["state"] == "pending"
        run_events = [e["actor"] for e in status["audit_log"] if e["action"] == "run_started"]
        assert run_events == ["token:alice", "token:alice"]  # the refused run changed nothing


@pytest.mark.slow
async def test_racing_callers_get_the_steps_once(pilot_app: PilotApp) -> None:
    async with connect(pilot_app, ALICE) as owner:
        wf = await owner.custom([READ_STEP, READ_AGAIN])
    callers = [Actor(f"caller{i}", kind="token") for i in range(6)]

    async def run_as(actor: Actor) -> dict[str, Any]:
        async with connect(pilot_app, actor) as client:
            return (await client.call("run_workflow", workflow_id=wf)).payload

    # A second round in the opposite order: a caller that comes later must not get them either.
    order = callers + callers[::-1]
    replies = await asyncio.gather(*(run_as(a) for a in callers))
    replies += await asyncio.gather(*(run_as(a) for a in callers[::-1]))
    winners = {a.label for a, r in zip(order, replies, strict=True) if "pending_dispatch" in r}
    assert len(winners) == 1, winners
    for reply in replies:
        if "pending_dispatch" not in reply:
            assert reply["error"]


async def test_two_pilot_processes_on_one_store_hand_the_steps_to_one_caller(
    pilot_app: PilotApp, settings: Settings
) -> None:
    other_app = build_app(settings)  # another Pilot process's service on the same database
    try:
        async with connect(pilot_app, ALICE) as alice:
            wf = await alice.custom([READ_STEP, READ_AGAIN])
        for _ in range(3):
            async with connect(pilot_app, ALICE) as alice, connect(other_app, BOB) as bob:
                a, b = await asyncio.gather(
                    alice.call("run_workflow", workflow_id=wf), bob.call("run_workflow", workflow_id=wf)
                )
            got = [who for who, r in (("alice", a), ("bob", b)) if "pending_dispatch" in r.payload]
            assert len(got) <= 1, (a.payload, b.payload)
        async with connect(pilot_app, ALICE) as alice:
            status = await alice.status(wf)
        holders = {e["actor"] for e in status["audit_log"] if e["action"] == "step_not_executed"}
        assert len(holders) == 1, status["audit_log"]
        assert status["state"] == "pending"
    finally:
        other_app.close()


async def test_a_cancel_by_another_caller_does_not_hand_out_the_steps(pilot_app: PilotApp) -> None:
    async with connect(pilot_app, ALICE) as alice, connect(pilot_app, BOB) as bob:
        wf = await alice.custom([WITH_LITERAL])
        assert SECRET in _text(await alice.ok("run_workflow", workflow_id=wf))
        cancelled = await bob.ok("cancel_workflow", workflow_id=wf, confirm=True, reason="stop")
        assert "pending_dispatch" not in cancelled
        assert [s["index"] for s in cancelled["with_another_caller"]] == [0]
        assert SECRET not in _text(cancelled)


# --- literal secrets --------------------------------------------------------------------------
async def test_a_literal_secret_is_handed_only_to_the_creator(pilot_app: PilotApp) -> None:
    async with connect(pilot_app, ALICE) as alice, connect(pilot_app, BOB) as bob:
        wf = await alice.custom([WITH_LITERAL])
        refused = await bob.refused("run_workflow", workflow_id=wf)
        assert SECRET not in _text(refused)
        assert "literal secret" in refused["error"] and "token:alice" in refused["error"]
        assert '{"$env"' in refused["hint"]
        assert refused["creator_only"] == [
            {"index": 0, "skill": "aiops", "tool": "list_virtual_machines", "params": ["params.vc_password"]}
        ]
        status = await bob.status(wf)
        assert status["state"] == "pending" and status["steps"][0]["status"] == "pending"

        mine = await alice.ok("run_workflow", workflow_id=wf)
        assert mine["pending_dispatch"][0]["params"] == {"vc_password": SECRET}


async def test_releasing_a_gate_before_a_literal_secret_is_refused_to_anyone_but_the_creator(
    pilot_app: PilotApp,
) -> None:
    async with connect(pilot_app, ALICE) as alice, connect(pilot_app, BOB) as bob:
        wf = await alice.custom([GATE, WITH_LITERAL])
        assert (await alice.ok("run_workflow", workflow_id=wf))["state"] == "awaiting_approval"
        before = await bob.status(wf)

        refused = await bob.refused("approve", workflow_id=wf)
        assert SECRET not in _text(refused)
        assert '{"$env"' in refused["hint"]
        after = await bob.status(wf)
        assert after["state"] == "awaiting_approval"
        assert after["audit_log"] == before["audit_log"]  # nothing was recorded

        approved = await alice.ok("approve", workflow_id=wf)
        assert approved["pending_dispatch"][0]["params"] == {"vc_password": SECRET}


async def test_a_secret_by_reference_is_handed_to_any_caller(pilot_app: PilotApp) -> None:
    async with connect(pilot_app, ALICE) as alice, connect(pilot_app, BOB) as bob:
        wf = await alice.custom([GATE, WITH_REFERENCE])
        await alice.ok("run_workflow", workflow_id=wf)
        approved = await bob.ok("approve", workflow_id=wf)
        assert approved["pending_dispatch"][0]["params"] == {"vc_password": {"$env": "VC_PASSWORD"}}
        # ...and from then on the released steps are bob's.
        refused = await alice.refused("run_workflow", workflow_id=wf)
        assert refused["handed_to"] == "token:bob"


async def test_an_oauth_caller_is_the_same_caller_whatever_display_name_its_token_carries(
    pilot_app: PilotApp,
) -> None:
    before = Actor("sub-123", kind="oidc", display="Alice Example")
    renamed = Actor("sub-123", kind="oidc", display="Alice Smith")
    async with connect(pilot_app, before) as first, connect(pilot_app, renamed) as second:
        wf = await first.custom([WITH_LITERAL])
        handed = await first.ok("run_workflow", workflow_id=wf)
        again = await second.ok("run_workflow", workflow_id=wf)
        assert again["pending_dispatch"] == handed["pending_dispatch"]
        assert again["pending_dispatch"][0]["params"] == {"vc_password": SECRET}
