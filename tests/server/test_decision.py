"""The decision summary (``decision`` in get_workflow_status while a gate waits) and eligibility,
through a real MCP client session: who asked and why, the verdict and what approving changes,
the approvals still needed and who gave them, the expiry and the time left."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_types import Implementation

from tests.support.approval_gates import OFF, gate, session
from tests.support.mcp_client import READ_STEP, Client, sdk_client
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.safety.duties import READER, Role
from vmware_pilot.server import create_server

ALICE = Actor("alice", kind="token")
BOB = Actor("bob", kind="token")
FOUR_EYES = Role("operator", "others")
WHY = "Patch window CHG0012345: power web-01 off for the firmware update"


def off(vm: str) -> dict[str, Any]:
    """OFF for another VM: workflows writing one object wait for each other (conflict locks)."""
    return {**OFF, "params": {"vm_name": vm}, "rollback_params": {"vm_name": vm}}


async def at_gate(client: Client, *steps: dict[str, Any], description: str = "test workflow") -> str:
    created = await client.ok("create_workflow", name="decide", description=description, steps=list(steps))
    out = await client.ok("run_workflow", workflow_id=created["workflow_id"])
    assert out["outcome"] == "awaiting_approval"
    return str(created["workflow_id"])


async def test_a_waiting_gate_carries_its_decision_summary(pilot_app: PilotApp) -> None:
    async with session(pilot_app, actor=ALICE) as alice:
        wf = await at_gate(alice, gate(approvals_required=2, expires_in_minutes=60), OFF, description=WHY)
        first = (await alice.status(wf))["decision"]
    async with session(pilot_app, actor=BOB) as bob:
        await bob.ok("approve", workflow_id=wf)
        second = (await bob.status(wf))["decision"]
    assert first["workflow_id"] == wf and first["gate"] == 0
    assert first["requested_by"] == "token:alice" and first["requested_via"] == "mcp"  # the SDK's default
    assert first["why"] == WHY and first["ticket"] == "CHG0012345"
    assert first["message"] == "Power off web-01 for maintenance?"
    assert first["verdict"] in ("succeeds", "fails", "unknown") and first["verdict_summary"]
    assert first["approvals_required"] == 2 and first["approved_by"] == [] and first["approvals_missing"] == 2
    assert first["expires_at"] and first["expired"] is False and not first["plan_changed"]
    assert 0 < first["seconds_left"] <= 3600
    assert second["approved_by"] == ["token:bob"] and second["approvals_missing"] == 1
    assert second["seconds_left"] <= first["seconds_left"]


async def test_the_decision_names_the_agent_a_person_asked_through(pilot_app: PilotApp) -> None:
    agent = Implementation(name="Claude\nCode  ", version="1.0")
    server = create_server(pilot_app, actor=Actor("alice"))
    async with sdk_client(server, name=agent.name) as s:
        client = Client(s)
        wf = await at_gate(client, gate(), OFF)
        decision = (await client.status(wf))["decision"]
        drafted = await client.ok("design_workflow", goal="restart web-01")
        templated = await client.incident()
    assert decision["requested_by"] == "alice" and decision["requested_via"] == "Claude Code"
    for other in (drafted["workflow_id"], templated):
        assert pilot_app.store.workflows.load(other).requested_via == "Claude Code"


async def test_the_decision_lists_the_predicted_changes(pilot_app: PilotApp) -> None:
    async with session(pilot_app) as client:
        wf = await at_gate(client, gate(), OFF)
        status = await client.status(wf)
    decision, prediction = status["decision"], status["prediction"]
    expected = [
        {"step": s["step"], "tool": s["tool"], **c} for s in prediction["steps"] for c in s["changes"]
    ]
    assert decision["changes"] == expected
    assert decision["objects"][: len({c["object"] for c in expected})] == list(
        dict.fromkeys(c["object"] for c in expected)
    )
    assert "web-01" in decision["objects"]
    assert decision["verdict"] == prediction["verdict"]
    assert decision["expires_at"] and not decision["expired"]


async def test_no_decision_once_the_gate_is_passed(pilot_app: PilotApp) -> None:
    async with session(pilot_app) as client:
        wf = await at_gate(client, gate(), OFF)
        await client.ok("approve", workflow_id=wf, approver="carol")
        status = await client.status(wf)
    assert "decision" not in status
    assert pilot_app.service.decision(wf) is None


def _why(app: PilotApp, actor: Actor, wf: str, role: Role | None = None) -> tuple[bool, str]:
    seen = app.service.eligibility(actor, wf, role)
    return seen.may_approve, seen.approve_refused


async def test_eligibility_says_who_may_approve_and_why_not(pilot_app: PilotApp) -> None:
    async with session(pilot_app, actor=ALICE) as alice:
        wf = await at_gate(alice, gate(approvals_required=2), OFF)
    assert _why(pilot_app, ALICE, wf, FOUR_EYES) == (False, "creator_four_eyes")
    assert _why(pilot_app, BOB, wf, READER) == (False, "role_cannot_approve")
    assert _why(pilot_app, BOB, wf, FOUR_EYES) == (True, "")
    async with session(pilot_app, actor=BOB) as bob:
        await bob.ok("approve", workflow_id=wf)
    assert _why(pilot_app, BOB, wf, FOUR_EYES) == (False, "already_approved")
    seen = pilot_app.service.eligibility(BOB, wf, FOUR_EYES)
    assert "someone else" in seen.approve_why and seen.may_reject
    assert not pilot_app.service.eligibility(BOB, wf, READER).may_reject


async def test_eligibility_of_an_expired_or_changed_gate(pilot_app: PilotApp) -> None:
    async with session(pilot_app) as client:
        expiring = await at_gate(client, gate(expires_in_minutes=0.001), off("web-01"))
        changed = await at_gate(client, gate(), off("web-02"))
        await asyncio.sleep(0.1)
        expired = (await client.status(expiring))["decision"]
    stored = pilot_app.store.workflows.load(changed)
    stored.steps[1].rollback_tool = ""
    pilot_app.store.workflows.save(stored)
    assert expired["expired"] is True and expired["seconds_left"] == 0
    assert _why(pilot_app, BOB, expiring) == (False, "gate_expired")
    assert pilot_app.service.eligibility(BOB, expiring).may_reject
    assert _why(pilot_app, BOB, changed) == (False, "plan_changed")
    assert pilot_app.service.decision(changed).plan_changed  # type: ignore[union-attr]


async def test_a_tokens_name_is_shown_everywhere_and_a_real_secret_stays_masked(pilot_app: PilotApp) -> None:
    async with session(pilot_app, actor=ALICE) as alice:
        wf = await at_gate(alice, gate(), OFF, description="Reboot; login with password=hunter2-note")
    async with session(pilot_app, actor=BOB) as bob:
        approved = await bob.ok("approve", workflow_id=wf)
        after_approve = await bob.status(wf)
        rolled = await bob.call("rollback", workflow_id=wf, confirm=True)
        after_rollback = await bob.status(wf)
    assert approved["approved_by"] == "token:bob"
    for status in (after_approve, rolled.payload, after_rollback):
        assert status["created_by"] == "token:alice" and status["approved_by"] == "token:bob"
        assert status["steps"][0]["result"] == {"approved_by": "token:bob"}
        assert status["params"]["description"] == "Reboot; login with password=***"
        assert "hunter2" not in str(status) and "token:***" not in str(status)
    actors = {e["actor"] for e in after_rollback["audit_log"]}
    assert {"token:alice", "token:bob"} <= actors
    (line,) = [e["detail"] for e in after_rollback["audit_log"] if e["action"] == "approved"]
    assert "token:bob" in line


DAY = 1440 * 60


async def test_a_gate_releasing_a_destructive_step_expires_after_the_default(pilot_app: PilotApp) -> None:
    async with session(pilot_app) as client:
        default = await at_gate(client, gate(), off("web-01"))
        shorter = await at_gate(client, gate(expires_in_minutes=60), off("web-02"))
        longer = await at_gate(client, gate(expires_in_minutes=3000), off("web-03"))
        reads = await at_gate(client, gate(), READ_STEP)
        read_own = await at_gate(client, gate(expires_in_minutes=3000), READ_STEP)
        left = {
            wf: (await client.status(wf))["decision"]["seconds_left"] for wf in (default, shorter, longer)
        }
        no_expiry = (await client.status(reads))["decision"]
        own = (await client.status(read_own))["decision"]
    assert DAY - 60 < left[default] <= DAY and DAY - 60 < left[longer] <= DAY
    assert 3500 < left[shorter] <= 3600
    assert no_expiry["seconds_left"] is None and no_expiry["expires_at"] == ""
    assert 3000 * 60 - 60 < own["seconds_left"] <= 3000 * 60


async def test_no_default_expiry_when_the_setting_is_zero(settings: Settings) -> None:
    app = build_app(Settings(home=settings.home, gate_expiry_minutes=0))
    try:
        async with session(app) as client:
            wf = await at_gate(client, gate(), OFF)
            decision = (await client.status(wf))["decision"]
    finally:
        app.close()
    assert decision["seconds_left"] is None and decision["expires_at"] == ""


async def test_an_expired_gate_is_listed_as_expired_and_its_expiry_recorded_once(pilot_app: PilotApp) -> None:
    async with session(pilot_app) as client:
        expiring = await at_gate(client, gate(expires_in_minutes=0.001), off("web-01"))
        live = await at_gate(client, gate(), off("web-02"))
        await asyncio.sleep(0.1)
        listed = (await client.ok("list_workflows"))["active_workflows"]
        refused = await client.refused("approve", workflow_id=expiring, approver="carol")
        status = await client.status(expiring)
        again = (await client.ok("list_workflows"))["active_workflows"]
    flags = {row["id"]: row.get("expired") for row in listed}
    assert flags == {expiring: True, live: None}
    assert [row.get("expired") for row in again if row["id"] == expiring] == [True]
    assert refused["refused"] == "gate_expired"
    expired = [e for e in status["audit_log"] if e["action"] == "gate_expired"]
    assert len(expired) == 1 and expired[0]["actor"] == "vmware-pilot"
    assert "step 0 expired" in expired[0]["detail"]


async def test_an_approval_comment_is_recorded_and_audited(pilot_app: PilotApp) -> None:
    async with session(pilot_app, actor=BOB) as bob:
        wf = await at_gate(bob, gate(approvals_required=2), OFF)
        await bob.ok("approve", workflow_id=wf, comment="Checked with the app team; window agreed")
        status = await bob.status(wf)
    (approval,) = status["gates"][0]["approvals"]
    assert approval["approver"] == "token:bob"
    assert approval["comment"] == "Checked with the app team; window agreed"
    (line,) = [e["detail"] for e in status["audit_log"] if e["action"] == "approval_recorded"]
    assert "comment: Checked with the app team; window agreed" in line


async def test_the_approval_form_shows_the_decision_summary_first(settings: Settings) -> None:
    from tests.support.approval_gates import Person

    app = build_app(Settings(home=settings.home, approvals="elicit"))
    person = Person({"decision": "approve", "comment": "LB drained first"})
    try:
        async with session(app, person, actor=BOB) as bob:
            wf = await at_gate(bob, gate(approvals_required=2), OFF, description=WHY)
            await bob.ok("approve", workflow_id=wf, comment="the agent's words")
            status = await bob.status(wf)
    finally:
        app.close()
    lines = person.forms[0].message.splitlines()
    assert lines[0].startswith(f"Approve the gate at step 0 of workflow {wf}")
    assert lines[1] == f"Asked by token:bob via mcp — {WHY}"
    assert lines[2].startswith("Verdict: ") and any(
        line.startswith("Approvals: 0 of 2") for line in lines[:8]
    )
    assert lines.index("Details:") < lines.index("Gate message: Power off web-01 for maintenance?")
    (approval,) = status["gates"][0]["approvals"]
    assert approval["comment"] == "LB drained first"  # the person's words, never the agent's
    assert person.forms[0].requested_schema["properties"]["comment"]["type"] == "string"


async def test_eligibility_says_when_the_policy_does_not_accept_the_approver(
    settings: Settings, pilot_app: PilotApp
) -> None:
    from tests.support.approval_gates import OPERATORS, write_policy

    write_policy(settings, OPERATORS)
    async with session(pilot_app) as client:
        wf = await at_gate(client, gate(), OFF)
    refused = pilot_app.service.eligibility(ALICE, wf)
    assert (refused.may_approve, refused.approve_refused) == (False, "policy")
    assert "operator" in refused.approve_why and refused.may_reject
    olga = Actor("olga", kind="oidc", role="reader-plus", groups=("operator",))
    assert pilot_app.service.eligibility(olga, wf).may_approve
