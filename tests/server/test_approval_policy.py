"""The approvals policy through a real MCP client session, one that answers elicitation forms.

``elicit``: approve asks the person through a form and records their answer; ``human``: approve
is refused and names the CLI; ``agent``: 2.4.0's behaviour. Plus plan changes, expiry and
quorum seen from an MCP client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_types import ElicitRequestFormParams, ElicitResult

from tests.support.approval_gates import OFF, Person, gate, session
from tests.support.mcp_client import READ_STEP, Client
from tests.support.prechecks import count_prechecks
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest


def policy_app(settings: Settings, policy: str) -> PilotApp:
    return build_app(Settings(home=settings.home, approvals=policy))


@pytest.fixture
def elicit_app(settings: Settings) -> Iterator[PilotApp]:
    app = policy_app(settings, "elicit")
    yield app
    app.close()


async def at_gate(client: Client, *steps: dict[str, Any]) -> str:
    wf = await client.custom(list(steps) or [gate(), OFF])
    out = await client.ok("run_workflow", workflow_id=wf)
    assert out["outcome"] == "awaiting_approval"
    return wf


def audit(status: dict[str, Any], action: str) -> list[str]:
    return [e["detail"] for e in status["audit_log"] if e["action"] == action]


# --- elicit ------------------------------------------------------------------------------
async def test_elicit_shows_the_gate_and_records_the_persons_answer(elicit_app: PilotApp) -> None:
    person = Person({"decision": "approve", "approver": "carol"})
    async with session(elicit_app, person) as client:
        wf = await at_gate(client)
        digest = (await client.status(wf))["gates"][0]["digest"]
        out = await client.ok("approve", workflow_id=wf, approver="agent-bot")
        status = await client.status(wf)
    assert out["outcome"] == "dispatch_required" and out["approved_by"] == "carol"
    (form,) = person.forms
    for shown in ("Power off web-01 for maintenance?", "aiops.power_off_vm", digest, wf):
        assert shown in form.message
    assert "[write]" in form.message or "[destructive]" in form.message
    assert form.requested_schema["properties"]["decision"]["enum"] == ["approve", "reject"]
    (approved,) = audit(status, "approved")
    assert "carol" in approved and digest in approved and "agent-bot" not in approved
    assert [(a["approver"], a["channel"]) for a in status["gates"][0]["approvals"]] == [("carol", "elicit")]


async def test_a_gate_message_cannot_add_lines_to_the_form(elicit_app: PilotApp) -> None:
    forged = "Routine check.\nIt releases:\n  (no steps: approving finishes this part of the workflow)"
    person = Person("decline")
    async with session(elicit_app, person) as client:
        wf = await at_gate(client, gate(message=forged), OFF)
        await client.refused("approve", workflow_id=wf)
    lines = person.forms[0].message.splitlines()
    assert [line for line in lines if line.startswith("It releases:")] == ["It releases:"]
    assert "Gate message: Routine check. It releases: (no steps" in person.forms[0].message
    at = lines.index("  step 1: aiops.power_off_vm [destructive]")
    assert lines[at + 1].startswith("    params: {") and '"vm_name": "web-01"' in lines[at + 1]
    assert lines[at + 2].startswith("    undo: No rollback will undo this step: it is the workflow's last")


@pytest.mark.parametrize("typed", ["", "ann", "token:ann"])
async def test_elicit_for_a_signed_in_caller_asks_no_name_and_records_the_identity(
    elicit_app: PilotApp, typed: str
) -> None:
    # A token caller decides as its token: the form asks for no name (one typed there could not be
    # recorded instead), says who decides, and a client that sends the caller's own name anyway is fine.
    person = Person({"decision": "approve", **({"approver": typed} if typed else {})})
    async with session(elicit_app, person, Actor("ann", kind="token")) as client:
        wf = await at_gate(client)
        out = await client.ok("approve", workflow_id=wf)
        status = await client.status(wf)
    (form,) = person.forms
    assert set(form.requested_schema["properties"]) == {"decision", "reason", "comment", "despite"}
    assert "You decide as token:ann" in form.message and "Leave your name empty" not in form.message
    assert out["approved_by"] == "token:ann"
    assert [(a["approver"], a["channel"]) for a in status["gates"][0]["approvals"]] == [
        ("token:ann", "elicit")
    ]


async def test_elicit_refuses_another_name_for_a_signed_in_caller_instead_of_dropping_it(
    elicit_app: PilotApp,
) -> None:
    person = Person({"decision": "approve", "approver": "Alice Smith"})
    async with session(elicit_app, person, Actor("ann", kind="token")) as client:
        wf = await at_gate(client)
        out = await client.refused("approve", workflow_id=wf)
        status = await client.status(wf)
    assert out["error"] == "approver 'Alice Smith' differs from the authenticated caller 'token:ann'"
    assert status["state"] == "awaiting_approval" and status["gates"][0]["approvals"] == []


async def test_elicit_with_no_name_records_the_caller(elicit_app: PilotApp) -> None:
    person = Person({"decision": "approve"})
    async with session(elicit_app, person) as client:
        wf = await at_gate(client)
        out = await client.ok("approve", workflow_id=wf, approver="agent-bot")
    assert out["approved_by"] == "tester"
    assert "tester" in person.forms[0].message


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicit_decline_leaves_the_gate_waiting(elicit_app: PilotApp, action: str) -> None:
    async with session(elicit_app, Person(action)) as client:
        wf = await at_gate(client)
        out = await client.refused("approve", workflow_id=wf, approver="agent-bot")
        status = await client.status(wf)
    assert out["refused"] == "declined" and out["state"] == "awaiting_approval"
    assert status["state"] == "awaiting_approval" and status["gates"][0]["approvals"] == []
    assert audit(status, "approved") == [] and audit(status, "cancelled") == []


async def test_elicit_reject_with_a_reason_cancels_the_workflow(elicit_app: PilotApp) -> None:
    person = Person({"decision": "reject", "approver": "carol", "reason": "web-01 serves traffic now"})
    async with session(elicit_app, person) as client:
        wf = await at_gate(client)
        out = await client.ok("approve", workflow_id=wf, approver="agent-bot")
        status = await client.status(wf)
    assert (out["state"], out["outcome"], out["action"], out["rejected_by"]) == (
        "cancelled",
        "cancelled",
        "cancelled",
        "carol",
    )
    assert "blast_radius" in out
    assert audit(status, "rejected") == ["carol rejected the gate at step 0: web-01 serves traffic now"]
    assert status["steps"][1]["status"] == "skipped"


async def test_elicit_reject_without_a_reason_keeps_the_gate_waiting(elicit_app: PilotApp) -> None:
    async with session(elicit_app, Person({"decision": "reject"})) as client:
        wf = await at_gate(client)
        out = await client.refused("approve", workflow_id=wf)
        assert "reason" in out["error"]
        assert (await client.status(wf))["state"] == "awaiting_approval"


async def test_elicit_refuses_a_client_without_elicitation_and_names_the_cli(elicit_app: PilotApp) -> None:
    async with session(elicit_app) as client:
        wf = await at_gate(client)
        out = await client.refused("approve", workflow_id=wf, approver="agent-bot")
        status = await client.status(wf)
    assert out["refused"] == "elicitation_unsupported"
    assert (
        f"vmware-pilot approve {wf}" in out["hint"] and out["approve_command"] == f"vmware-pilot approve {wf}"
    )
    assert status["state"] == "awaiting_approval"


async def test_elicit_refuses_unacknowledged_handed_out_steps_before_asking(elicit_app: PilotApp) -> None:
    person = Person({"decision": "approve", "approver": "carol"})
    async with session(elicit_app, person) as client:
        wf = await at_gate(client, READ_STEP, gate(), OFF)
        out = await client.refused("approve", workflow_id=wf)
        assert out["not_executed_before_gate"] == [
            {"index": 0, "skill": "aiops", "tool": "list_virtual_machines"}
        ]
        assert person.forms == []
        done = await client.ok("approve", workflow_id=wf, acknowledge_not_executed=True)
    assert done["steps"][0]["status"] == "reported_done"
    assert "list_virtual_machines (not_executed)" in person.forms[0].message
    # The person, not only the agent, is told what approving states about those steps.
    assert "step 0 (aiops.list_virtual_machines)" in person.forms[0].message
    assert "Approving states that they were performed" in person.forms[0].message


async def test_a_plan_changed_while_the_form_was_open_is_refused(elicit_app: PilotApp) -> None:
    async def edit_then_approve(params: ElicitRequestFormParams) -> ElicitResult:
        # Another writer of the database changes the released step while the person reads.
        wf = elicit_app.store.workflows.load(wf_id[0])
        wf.steps[1].params["vm_name"] = "db-01"
        await asyncio.to_thread(elicit_app.store.workflows.save, wf)
        return ElicitResult(action="accept", content={"decision": "approve", "approver": "carol"})

    wf_id: list[str] = []
    async with session(elicit_app, Person(edit_then_approve)) as client:
        wf_id.append(await at_gate(client))
        out = await client.refused("approve", workflow_id=wf_id[0])
        status = await client.status(wf_id[0])
    assert out["refused"] == "plan_changed"
    assert out["approved_digest"] == status["gates"][0]["digest"] != out["current_digest"]
    assert status["state"] == "awaiting_approval" and audit(status, "approved") == []


async def test_a_form_answered_after_another_gate_came_to_wait_is_refused_naming_it(
    elicit_app: PilotApp,
) -> None:
    async def dave_approves_meanwhile(params: ElicitRequestFormParams) -> ElicitResult:
        # While carol reads the form for the first gate, dave approves it at the terminal.
        (
            await elicit_app.service.approve(
                ApproveRequest(Actor("dave"), wf_id[0], approver="dave", door="cli", gate_step=0)
            )
        ).payload()
        return ElicitResult(action="accept", content={"decision": "approve", "approver": "carol"})

    wf_id: list[str] = []
    person = Person(dave_approves_meanwhile)
    async with session(elicit_app, person) as client:
        wf_id.append(await at_gate(client, gate(), READ_STEP, gate(message="The second gate"), OFF))
        out = await client.refused("approve", workflow_id=wf_id[0])
        status = await client.status(wf_id[0])
    assert (out["refused"], out["gate_step"], out["waiting_gate"]) == ("not_the_waiting_gate", 0, 2)
    assert "The second gate" in out["error"], out
    assert [g["approvals"] for g in status["gates"] if g["index"] == 2] == [[]], "carol approved nothing"


async def test_a_plan_changed_after_the_gate_is_refused_without_asking(elicit_app: PilotApp) -> None:
    person = Person({"decision": "approve", "approver": "carol"})
    async with session(elicit_app, person) as client:
        wf = await at_gate(client)
        stored = elicit_app.store.workflows.load(wf)
        stored.steps[1].rollback_tool = ""
        elicit_app.store.workflows.save(stored)
        out = await client.refused("approve", workflow_id=wf)
    assert out["refused"] == "plan_changed" and person.forms == []


async def test_an_expired_gate_is_refused_without_asking_and_status_says_expired(
    elicit_app: PilotApp,
) -> None:
    person = Person({"decision": "approve", "approver": "carol"})
    async with session(elicit_app, person) as client:
        wf = await at_gate(client, gate(expires_in_minutes=0.001), OFF)
        await asyncio.sleep(0.1)
        out = await client.refused("approve", workflow_id=wf)
        status = await client.status(wf)
        cancelled = await client.ok("cancel_workflow", workflow_id=wf, reason="expired", confirm=True)
    assert out["refused"] == "gate_expired" and person.forms == []
    assert status["gates"][0]["expired"] is True and status["gates"][0]["expires_at"]
    assert cancelled["state"] == "cancelled"


async def test_a_quorum_gate_needs_distinct_people(elicit_app: PilotApp) -> None:
    names = iter(["carol", "carol", "dave"])

    async def next_person(params: ElicitRequestFormParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"decision": "approve", "approver": next(names)})

    person = Person(next_person)
    async with session(elicit_app, person) as client:
        wf = await at_gate(client, gate(approvals_required=2), OFF)
        first = await client.ok("approve", workflow_id=wf)
        again = await client.refused("approve", workflow_id=wf)
        last = await client.ok("approve", workflow_id=wf)
    assert (first["outcome"], first["approvals_missing"]) == ("awaiting_approval", 1)
    assert first["pending_gate"]["approvals"][0]["approver"] == "carol"
    assert again["refused"] == "same_approver"
    assert last["outcome"] == "dispatch_required" and last["approved_by"] == "carol, dave"
    assert "so far: carol" in person.forms[1].message


async def test_a_token_caller_is_the_approver_and_is_not_asked_twice(elicit_app: PilotApp) -> None:
    person = Person({"decision": "approve"})  # the form asks a token caller for no name
    async with session(elicit_app, person, Actor("dave", kind="token")) as client:
        wf = await at_gate(client, gate(approvals_required=2), OFF)
        first = await client.ok("approve", workflow_id=wf)
        again = await client.refused("approve", workflow_id=wf)
    assert first["pending_gate"]["approvals"][0]["approver"] == "token:dave"
    assert again["refused"] == "same_approver"
    assert len(person.forms) == 1, "the second approval was refused without asking the person again"


# --- human and agent ---------------------------------------------------------------------
async def test_human_policy_refuses_the_tool_and_names_the_cli(settings: Settings) -> None:
    app = policy_app(settings, "human")
    person = Person({"decision": "approve", "approver": "carol"})
    try:
        async with session(app, person) as client:
            wf = await at_gate(client)
            out = await client.refused("approve", workflow_id=wf, approver="alice")
            status = await client.status(wf)
    finally:
        app.close()
    assert out["refused"] == "human_approval_required"
    assert f"vmware-pilot approve {wf}" in out["hint"]
    assert person.forms == [] and status["state"] == "awaiting_approval"


async def test_agent_policy_records_the_agents_approver_without_a_form(settings: Settings) -> None:
    app = policy_app(settings, "agent")
    person = Person({"decision": "approve", "approver": "carol"})
    try:
        async with session(app, person) as client:
            wf = await at_gate(client)
            out = await client.ok("approve", workflow_id=wf, approver="alice")
    finally:
        app.close()
    assert out["approved_by"] == "alice" and person.forms == []


async def test_a_signed_in_caller_the_policy_does_not_accept_is_refused_without_asking(
    settings: Settings, elicit_app: PilotApp
) -> None:
    settings.resolved_policies_path.write_text(
        "approvals:\n  - name: operators\n    match: {tool: 'aiops.*'}\n    approvers: [operator]\n",
        encoding="utf-8",
    )
    person = Person({"decision": "approve"})
    async with session(elicit_app, person, Actor("ann", kind="token", role="admin")) as client:
        wf = await at_gate(client)
        out = await client.refused("approve", workflow_id=wf)
    assert out["refused"] == "policy_approvers" and out["rule"] == "operators"
    assert person.forms == []


async def test_an_approval_through_the_elicitation_form_runs_the_precheck_once(
    elicit_app: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked before the person is asked, not again after the form (the form's answer is checked
    by the record in the save: four eyes, the acknowledgment of a predicted failure)."""
    person = Person({"decision": "approve", "approver": "carol"})
    async with session(elicit_app, person) as client:
        wf = await at_gate(client)
        prechecks = count_prechecks(monkeypatch)
        out = await client.ok("approve", workflow_id=wf)
    assert out["approved_by"] == "carol" and len(person.forms) == 1
    assert prechecks == [wf]


async def test_a_refusal_through_the_form_door_comes_before_the_form_from_the_one_precheck(
    elicit_app: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    person = Person({"decision": "approve", "approver": "carol"})
    async with session(elicit_app, person) as client:
        wf = await at_gate(client, gate(), OFF)
        prechecks = count_prechecks(monkeypatch)
        refused = await client.refused("approve", workflow_id=wf, gate_step=1)
    assert refused["refused"] == "not_the_waiting_gate" and person.forms == []
    assert prechecks == [wf]
