"""The policy file through a real MCP client session: a denied step is refused at every door,
a gate follows the strictest approval rule (quorum, approvers, requester, validity), every
approval records the policy digest, a policy change never relaxes a waiting gate, and review
reports what applies."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.approval_gates import OPERATORS, write_policy
from tests.support.mcp_client import GATE, READ_STEP, Client, connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import from_iso
from vmware_pilot.engine.gateview import GateView
from vmware_pilot.engine.policy import describe_gate
from vmware_pilot.errors import StartupRefused
from vmware_pilot.policy.load import policy_from_text

DENY_DELETE = """\
deny:
  - name: no-vm-deletes
    match: {tool: "aiops.vm_delete"}      # the pre-2.0 name of aiops.delete_vm
    reason: VMs are deleted through the CMDB, not by agents
"""
DENY_ALARMS = """\
deny:
  - name: no-alarm-acks
    match: {tool: "*.acknowledge_*", target: "web-*"}
    reason: alarms are acknowledged in the NOC
"""
DENY_POWER = """\
deny:
  - name: no-power-off
    match: {tool: "aiops.power_off_vm", risk: [write, destructive]}
    reason: power is managed by the facility team
"""
QUORUM = """\
approvals:
  - name: prod-destructive
    match: {risk: destructive, target: "prod-*"}
    quorum: 2
    requester_may_approve: false
    max_validity_minutes: 240
"""
DELETE_PROD = {
    "action": "delete",
    "skill": "aiops",
    "tool": "delete_vm",
    "params": {"vm_name": "prod-web", "confirm": True},
}
OFF = {"action": "off", "skill": "aiops", "tool": "power_off_vm", "params": {"vm_name": "web-01"}}


def _denied(payload: dict[str, Any], rule: str, door: str) -> None:
    assert payload["refused"] == "policy_denied", payload
    assert payload["rule"] == rule and payload["door"] == door
    assert rule in payload["error"] and payload["reason"] in payload["error"]
    assert payload["hint"]


async def test_a_denied_step_is_refused_at_create_and_update(
    settings: Settings, pilot_app: PilotApp, client: Client
) -> None:
    write_policy(settings, DENY_DELETE)
    refused = await client.refused(
        "create_workflow",
        name="cleanup",
        description="d",
        steps=[READ_STEP, GATE, {**DELETE_PROD, "tool": "delete_vm"}],
    )
    _denied(refused, "no-vm-deletes", "create")
    assert refused["tool"] == "aiops.delete_vm" and refused["step_index"] == 2
    assert pilot_app.store.workflows.count_active() == 0  # nothing was created
    draft = await client.ok("design_workflow", goal="clean up")
    refused = await client.refused(
        "update_draft", workflow_id=draft["workflow_id"], steps=[GATE, DELETE_PROD]
    )
    _denied(refused, "no-vm-deletes", "update")
    status = await client.status(draft["workflow_id"])
    assert status["steps"] == []  # nothing was saved


async def test_a_denied_step_is_refused_at_the_template_door(settings: Settings, client: Client) -> None:
    write_policy(settings, DENY_ALARMS)
    refused = await client.refused(
        "create_workflow_from_template",
        workflow_type="incident_response",
        params={"alert_entity": "web-01", "alert_name": "High CPU"},
    )
    _denied(refused, "no-alarm-acks", "template")
    # another entity is not matched by the target glob
    await client.ok(
        "create_workflow_from_template",
        workflow_type="incident_response",
        params={"alert_entity": "db-01", "alert_name": "High CPU"},
    )


async def test_a_policy_that_denies_later_is_refused_at_confirm_run_and_approve(
    settings: Settings, client: Client
) -> None:
    draft = await client.ok("design_workflow", goal="power off")
    await client.ok("update_draft", workflow_id=draft["workflow_id"], name="off", steps=[GATE, OFF])
    pending = await client.custom([GATE, OFF], name="off-2")
    waiting = await client.custom([GATE, OFF], name="off-3")
    await client.ok("run_workflow", workflow_id=waiting)
    write_policy(settings, DENY_POWER)
    _denied(
        await client.refused("confirm_draft", workflow_id=draft["workflow_id"]), "no-power-off", "confirm"
    )
    _denied(await client.refused("run_workflow", workflow_id=pending), "no-power-off", "run")
    _denied(await client.refused("approve", workflow_id=waiting, approver="alice"), "no-power-off", "approve")
    assert (await client.status(waiting))["state"] == "awaiting_approval"
    # review says so too, as a high finding
    review = await client.ok("review_workflow", workflow_id=pending)
    kinds = [(f["kind"], f["severity"], f["step_index"]) for f in review["findings"]]
    assert ("policy_denied", "high", 1) in kinds
    assert review["verdict"] == "needs_revision"
    assert review["policy"]["denied"][0]["rule"] == "no-power-off"


async def test_a_policy_quorum_of_two_beats_the_plans_one_and_is_shown_on_the_gate(
    settings: Settings, pilot_app: PilotApp, client: Client
) -> None:
    write_policy(settings, QUORUM)
    digest = policy_from_text(QUORUM).digest
    wf = await client.custom([{**GATE, "params": {"message": "go?", "approvals_required": 1}}, DELETE_PROD])
    await client.ok("run_workflow", workflow_id=wf)
    status = await client.status(wf)
    [gate] = status["gates"]
    assert gate["approvals_required"] == 2
    assert gate["policy"]["rule"] == "prod-destructive"
    assert gate["policy"]["requester_may_approve"] is False
    assert gate["policy"]["policy_digest"] == digest
    # the policy's validity caps the gate's expiry
    reached, expires = from_iso(gate["reached_at"]), from_iso(gate["expires_at"])
    assert reached is not None and expires is not None and expires - reached == timedelta(minutes=240)
    review = await client.ok("review_workflow", workflow_id=wf)
    assert any(f["kind"] == "policy_approval" and "2 approval(s)" in f["message"] for f in review["findings"])
    # what a person deciding reads (the approval form, the CLI, the console render this view)
    shown = describe_gate(GateView.model_validate(pilot_app.service.pending_gate(wf).payload()))
    assert "policy rule 'prod-destructive': 2 approval(s)" in shown
    assert "the requester may not approve" in shown
    first = await client.ok("approve", workflow_id=wf, approver="alice")
    assert first["state"] == "awaiting_approval" and first["approvals_missing"] == 1
    second = await client.ok("approve", workflow_id=wf, approver="bob")
    assert second["state"] != "awaiting_approval"
    gate = (await client.status(wf))["gates"][0]
    assert [a["approver"] for a in gate["approvals"]] == ["alice", "bob"]
    assert {a["policy_digest"] for a in gate["approvals"]} == {digest}


async def test_the_plan_may_tighten_the_policy_but_not_loosen_it(settings: Settings, client: Client) -> None:
    write_policy(settings, QUORUM)
    wf = await client.custom(
        [
            {**GATE, "params": {"message": "go?", "approvals_required": 3, "expires_in_minutes": 30}},
            DELETE_PROD,
        ]
    )
    await client.ok("run_workflow", workflow_id=wf)
    [gate] = (await client.status(wf))["gates"]
    assert gate["approvals_required"] == 3
    reached, expires = from_iso(gate["reached_at"]), from_iso(gate["expires_at"])
    assert reached is not None and expires is not None and expires - reached == timedelta(minutes=30)


async def test_the_requester_is_excluded_by_policy(settings: Settings, client: Client) -> None:
    write_policy(settings, QUORUM)
    wf = await client.custom([GATE, DELETE_PROD])
    await client.ok("run_workflow", workflow_id=wf)
    refused = await client.refused("approve", workflow_id=wf, approver="tester")  # the creator
    assert refused["refused"] == "policy_requester" and refused["rule"] == "prod-destructive"
    assert (await client.status(wf))["gates"][0]["approvals"] == []
    await client.ok("approve", workflow_id=wf, approver="alice")


async def test_only_the_policys_approvers_may_approve(
    settings: Settings, pilot_app: PilotApp, client: Client
) -> None:
    write_policy(settings, OPERATORS)
    wf = await client.custom([GATE, OFF])
    await client.ok("run_workflow", workflow_id=wf)
    refused = await client.refused("approve", workflow_id=wf, approver="alice")  # role admin
    assert refused["refused"] == "policy_approvers" and refused["approvers"] == ["operator"]
    async with connect(
        pilot_app, Actor("olga", kind="oidc", role="reader-plus", groups=("operator",))
    ) as olga:
        approved = await olga.ok("approve", workflow_id=wf, approver="")
    assert approved["state"] != "awaiting_approval"


async def test_a_policy_change_does_not_relax_a_waiting_gate(settings: Settings, client: Client) -> None:
    write_policy(settings, QUORUM)
    wf = await client.custom([GATE, DELETE_PROD])
    await client.ok("run_workflow", workflow_id=wf)
    write_policy(settings, "# no rules any more\n")
    refused = await client.refused("approve", workflow_id=wf, approver="tester")
    assert refused["refused"] == "policy_requester"  # the recorded rule still holds
    first = await client.ok("approve", workflow_id=wf, approver="alice")
    assert first["approvals_missing"] == 1
    gate = (await client.status(wf))["gates"][0]
    assert gate["approvals"][0]["policy_digest"] == policy_from_text("").digest


async def test_a_stricter_policy_applies_to_a_waiting_gate(settings: Settings, client: Client) -> None:
    wf = await client.custom([GATE, DELETE_PROD])
    await client.ok("run_workflow", workflow_id=wf)
    write_policy(settings, QUORUM)
    first = await client.ok("approve", workflow_id=wf, approver="alice")
    assert first["state"] == "awaiting_approval" and first["approvals_missing"] == 1


def test_a_policy_file_that_cannot_be_used_stops_start_up_naming_its_lines(settings: Settings) -> None:
    write_policy(settings, "deny:\n  - match: {tool: aiops.delete_vm}\napprovals:\n  - quorum: many\n")
    with pytest.raises(StartupRefused) as caught:
        build_app(settings)
    assert "line 2: deny[0].reason" in caught.value.message
    assert "line 4: approvals[0].quorum" in caught.value.message
    assert [p["line"] for p in caught.value.fields["problems"]] == [2, 4]


def test_the_policy_path_setting_names_another_file(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "elsewhere.yaml"
    other.write_text(DENY_DELETE, encoding="utf-8")
    monkeypatch.setenv("VMWARE_PILOT_POLICIES", str(other))
    chosen = Settings()
    assert chosen.resolved_policies_path == other
    app = build_app(chosen)
    try:
        assert app.policies is not None and app.policies.current().deny[0].name == "no-vm-deletes"
    finally:
        app.close()


async def test_review_names_the_window_that_holds_a_write_back(settings: Settings, client: Client) -> None:
    write_policy(
        settings,
        "windows:\n"
        "  - name: long-freeze\n"
        "    blackout: true\n"
        '    match: {target: "web-*"}\n'
        '    dates: [{from: "2000-01-01", to: "2100-01-01"}]\n',
    )
    wf = await client.custom([READ_STEP, GATE, OFF])
    review = await client.ok("review_workflow", workflow_id=wf)
    [finding] = [f for f in review["findings"] if f["kind"] == "policy_window"]
    assert finding["step_index"] == 2 and "long-freeze" in finding["message"]
    assert "2100-01-01" in finding["message"]
    [window] = review["policy"]["windows"]
    assert window["blackout"] is True and window["open_now"] is False
    assert review["policy"]["conflicts"] == {"mode": "refuse", "conflicting": []}
