"""Plan-bound, expiring and quorum gates through PilotService (and the pure gate rules)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import Database
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import from_iso, utcnow
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.requests import (
    ApproveRequest,
    CreateRequest,
    FromTemplateRequest,
    RejectRequest,
    RunRequest,
)
from vmware_pilot.errors import InvalidInput, StateRefused, StepValidationError


def gate(**options: Any) -> dict[str, Any]:
    return {
        "action": "require_approval",
        "skill": "pilot",
        "tool": "approve",
        "params": {"message": "Power off web-01?", **options},
    }


OFF = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "web-01", "vc_password": "hunter2"},
    "rollback_tool": "power_on_vm",
    "rollback_params": {"vm_name": "__from_step_1__:name"},
}
OFF_BY_REF = {**OFF, "params": {"vm_name": "web-01", "vc_password": {"$env": "VC_PASSWORD"}}}


@pytest.fixture(autouse=True)
def _secret_as_the_backend_allows(database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pilots sharing PostgreSQL refuse literal secrets (test_literal_secrets_are_refused_when_
    pilots_share_the_database): there the plan passes its secret by reference."""
    if database.backend != "sqlite":
        monkeypatch.setitem(globals(), "OFF", OFF_BY_REF)


async def at_gate(app: PilotApp, actor: Actor, releases: dict[str, Any] | None = None, **options: Any) -> str:
    steps = [gate(**options), OFF if releases is None else releases]
    out = app.service.create_workflow(CreateRequest(actor, "off-web", "power off web-01", steps)).payload()
    wid: str = out["workflow_id"]
    run = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert run["outcome"] == "awaiting_approval"
    return wid


def audit(app: PilotApp, wid: str) -> list[tuple[str, str]]:
    return [(e["action"], e["detail"]) for e in app.service.get_workflow_status(wid).payload()["audit_log"]]


async def test_reaching_a_gate_records_the_digest_of_what_it_releases(app: PilotApp, actor: Actor) -> None:
    wid = await at_gate(app, actor)
    status = app.service.get_workflow_status(wid).payload()
    (record,) = status["gates"]
    wf = app.store.workflows.load(wid)
    assert record["digest"] == gate_records.plan_digest(wf, 0)
    assert record["digest"].startswith("sha256:") and len(record["digest"]) == 7 + 64
    assert record["approvals_required"] == 1 and record["approvals"] == []
    # A gate releasing a destructive step expires after VMWARE_PILOT_GATE_EXPIRY_MINUTES (a day).
    expiry = from_iso(record["expires_at"]) - from_iso(record["reached_at"])  # type: ignore[operator]
    assert expiry == timedelta(minutes=1440) and record["expired"] is False
    assert any(a == "awaiting_approval" and record["digest"] in d for a, d in audit(app, wid))


@pytest.mark.backends("sqlite")  # literal secrets: see _secret_as_the_backend_allows
def test_digest_ignores_secrets_but_not_params_rollbacks_or_references(app: PilotApp, actor: Actor) -> None:
    out = app.service.create_workflow(CreateRequest(actor, "off-web", "d", [gate(), OFF])).payload()
    wf = app.store.workflows.load(out["workflow_id"])
    base = gate_records.plan_digest(wf, 0)
    wf.steps[1].params["vc_password"] = "another-secret"  # masked either way: same digest
    assert gate_records.plan_digest(wf, 0) == base
    changes: list[Any] = [
        lambda w: w.steps[1].params.__setitem__("vm_name", "db-01"),
        lambda w: setattr(w.steps[1], "tool", "delete_vm"),
        lambda w: setattr(w.steps[1], "rollback_tool", ""),
        lambda w: w.steps[1].rollback_params.__setitem__("vm_name", "__from_step_0__"),
        lambda w: w.steps[0].params.__setitem__("approvals_required", 1),
    ]
    for change in changes:
        fresh = app.store.workflows.load(out["workflow_id"])
        change(fresh)
        assert gate_records.plan_digest(fresh, 0) != base


async def test_approve_refuses_when_the_released_plan_changed_after_the_gate(
    app: PilotApp, actor: Actor
) -> None:
    wid = await at_gate(app, actor)
    # Nothing in Pilot edits a workflow waiting at a gate; another writer of the database can.
    wf = app.store.workflows.load(wid)
    wf.steps[1].params["vm_name"] = "db-01"
    app.store.workflows.save(wf)
    with pytest.raises(StateRefused) as info:
        (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    payload = info.value.payload()
    assert payload["refused"] == "plan_changed"
    assert payload["current_digest"] != payload["approved_digest"]
    assert app.service.get_workflow_status(wid).payload()["state"] == "awaiting_approval"
    assert "approved" not in [a for a, _ in audit(app, wid)]


async def test_approve_refuses_a_digest_other_than_the_one_shown(app: PilotApp, actor: Actor) -> None:
    wid = await at_gate(app, actor)
    with pytest.raises(StateRefused) as info:
        (
            await app.service.approve(
                ApproveRequest(actor, wid, approver="alice", expected_digest="sha256:" + "0" * 64)
            )
        ).payload()
    assert info.value.payload()["refused"] == "plan_changed"
    shown = app.service.pending_gate(wid).payload()["gate"]["digest"]
    out = (
        await app.service.approve(ApproveRequest(actor, wid, approver="alice", expected_digest=shown))
    ).payload()
    assert out["steps"][0]["status"] == "success"


async def test_approval_is_audited_with_approver_and_digest(app: PilotApp, actor: Actor) -> None:
    wid = await at_gate(app, actor)
    digest = app.service.pending_gate(wid).payload()["gate"]["digest"]
    (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    approved = [d for a, d in audit(app, wid) if a == "approved"]
    assert len(approved) == 1 and "alice" in approved[0] and digest in approved[0]
    (record,) = app.service.get_workflow_status(wid).payload()["gates"]
    assert [(a["approver"], a["digest"]) for a in record["approvals"]] == [("alice", digest)]


async def test_an_expired_gate_refuses_approval_but_can_be_rejected(app: PilotApp, actor: Actor) -> None:
    wid = await at_gate(app, actor, expires_in_minutes=0.001)  # 60 ms
    (record,) = app.service.get_workflow_status(wid).payload()["gates"]
    reached, expires = from_iso(record["reached_at"]), from_iso(record["expires_at"])
    assert reached is not None and expires is not None
    assert expires - reached == timedelta(milliseconds=60)
    await asyncio.sleep(0.1)
    assert app.service.get_workflow_status(wid).payload()["gates"][0]["expired"] is True
    with pytest.raises(StateRefused) as info:
        (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert info.value.payload()["refused"] == "gate_expired"
    out = app.service.reject(RejectRequest(actor, wid, "too late", rejected_by="alice")).payload()
    assert (out["state"], out["outcome"], out["action"]) == ("cancelled", "cancelled", "cancelled")
    assert ("rejected", "alice rejected the gate at step 0: too late") in audit(app, wid)


async def test_a_gate_not_yet_expired_approves(app: PilotApp, actor: Actor) -> None:
    wid = await at_gate(app, actor, expires_in_minutes=30)
    expires = from_iso(app.service.get_workflow_status(wid).payload()["gates"][0]["expires_at"])
    assert expires is not None and expires > utcnow() + timedelta(minutes=29)
    out = (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["steps"][0]["status"] == "success"


async def test_a_quorum_gate_waits_for_distinct_approvers(app: PilotApp, actor: Actor) -> None:
    wid = await at_gate(app, actor, approvals_required=2)
    first = (await app.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert (first["outcome"], first["state"], first["approvals_missing"]) == (
        "awaiting_approval",
        "awaiting_approval",
        1,
    )
    assert first["steps"][0]["status"] == "pending"
    with pytest.raises(StateRefused) as info:
        (await app.service.approve(ApproveRequest(actor, wid, approver=" Alice "))).payload()
    assert info.value.payload()["refused"] == "same_approver"
    second = (await app.service.approve(ApproveRequest(actor, wid, approver="bob"))).payload()
    assert second["outcome"] == "dispatch_required"
    assert second["steps"][0]["result"] == {"approved_by": "alice, bob", "approvals": ["alice", "bob"]}
    assert second["approved_by"] == "alice, bob"
    actions = [a for a, _ in audit(app, wid)]
    assert actions.count("approval_recorded") == 1 and actions.count("approved") == 1


async def test_reject_needs_a_reason_and_a_waiting_gate(app: PilotApp, actor: Actor) -> None:
    wid = await at_gate(app, actor)
    with pytest.raises(InvalidInput):
        app.service.reject(RejectRequest(actor, wid, "  ")).payload()
    assert app.service.get_workflow_status(wid).payload()["state"] == "awaiting_approval"
    app.service.reject(RejectRequest(actor, wid, "wrong vm")).payload()
    with pytest.raises(StateRefused):
        app.service.reject(RejectRequest(actor, wid, "again")).payload()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"expires_in_minutes": 0}, "params.expires_in_minutes"),
        ({"expires_in_minutes": "soon"}, "params.expires_in_minutes"),
        ({"expires_in_minutes": True}, "params.expires_in_minutes"),
        ({"approvals_required": 0}, "params.approvals_required"),
        ({"approvals_required": 1.5}, "params.approvals_required"),
        ({"approvals_required": 99}, "params.approvals_required"),
    ],
)
def test_unusable_gate_options_are_refused_naming_the_field(
    app: PilotApp, actor: Actor, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(StepValidationError) as info:
        app.service.create_workflow(CreateRequest(actor, "bad-gate", "d", [gate(**options), OFF])).payload()
    assert info.value.payload()["field_name"] == field
    assert info.value.hint


def test_gates_with_options_still_count_as_gates_in_review(app: PilotApp, actor: Actor) -> None:
    steps = [gate(expires_in_minutes=15, approvals_required=2), OFF]
    wid = app.service.create_workflow(CreateRequest(actor, "off-web", "d", steps)).payload()["workflow_id"]
    review = app.service.review_workflow(wid).payload()
    assert review["summary"]["approval_gates"] == 1
    assert not [f for f in review["findings"] if f["kind"].startswith("ungated")]


YAML = """\
name: restart_web
description: Restart one web VM
parameters:
  vm_name: {type: string, required: true}
  approvers: {type: integer, default: 2}
steps:
  - action: require_approval
    params: {message: "Restart {{vm_name}}?", approvals_required: "{{approvers}}", expires_in_minutes: 30}
  - {action: stop, skill: aiops, tool: power_off_vm, params: {vm_name: "{{vm_name}}"}}
"""


async def test_a_yaml_template_gate_takes_its_options_from_typed_parameters(
    app: PilotApp, actor: Actor, tmp_path: Path
) -> None:
    # Imported: into the templates folder, or the database's rows when a database URL is set.
    (tmp_path / "restart_web.yaml").write_text(YAML)
    assert app.service.templates.import_folder(tmp_path, "operator")[0]["outcome"] == "added"
    listed = {t["name"]: t for t in app.service.list_workflows().payload()["templates"]}
    assert "error" not in listed["restart_web"]
    wid = app.service.create_workflow_from_template(
        FromTemplateRequest(actor, "restart_web", {"vm_name": "web-01"})
    ).payload()["workflow_id"]
    assert app.store.workflows.load(wid).steps[0].params["approvals_required"] == 2
    (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    (record,) = app.service.get_workflow_status(wid).payload()["gates"]
    assert record["approvals_required"] == 2 and record["expires_at"]
    with pytest.raises(StepValidationError):
        app.service.create_workflow_from_template(
            FromTemplateRequest(actor, "restart_web", {"vm_name": "web-01", "approvers": 0})
        ).payload()


async def test_an_oauth_caller_renamed_between_two_tokens_is_still_one_approver(
    app: PilotApp, actor: Actor
) -> None:
    # Released to someone other than its creator: the secret goes by reference (handout.py).
    wid = await at_gate(app, actor, releases=OFF_BY_REF, approvals_required=2)
    (await app.service.approve(ApproveRequest(Actor("sub-1", kind="oidc", display="Alice"), wid))).payload()
    with pytest.raises(StateRefused) as info:
        (
            await app.service.approve(ApproveRequest(Actor("sub-1", kind="oidc", display="Alice Smith"), wid))
        ).payload()
    assert info.value.payload()["refused"] == "same_approver"
    second = (
        await app.service.approve(ApproveRequest(Actor("sub-2", kind="oidc", display="Alice"), wid))
    ).payload()
    assert second["approved_by"] == "Alice (oidc:sub-1), Alice (oidc:sub-2)"


async def test_token_callers_are_named_in_the_audit_trail_and_secrets_beside_them_still_masked(
    app: PilotApp, actor: Actor
) -> None:
    """``token:dave`` reads like a ``token: <secret>`` pair, but it names a caller: the stored
    audit text keeps it, while a secret in the same text is masked and the chain verifies."""
    dave, erin = Actor(name="dave", kind="token"), Actor(name="erin", kind="token")
    wid = await at_gate(app, actor, OFF_BY_REF, approvals_required=2)
    (await app.service.approve(ApproveRequest(dave, wid))).payload()
    done = (await app.service.approve(ApproveRequest(erin, wid))).payload()
    assert done["approved_by"] == "token:dave, token:erin"
    details = dict(audit(app, wid))
    assert details["approval_recorded"].startswith("token:dave approved step 0 (1 of 2")
    assert details["approved"].startswith("Approved by token:erin (plan ")
    assert details["approved"].endswith("2 of 2 approvals: token:dave, token:erin)")

    other = await at_gate(app, actor)
    app.service.reject(
        RejectRequest(dave, other, "password=hunter2 leaked in the plan", rejected_by=dave.label)
    ).payload()
    assert ("rejected", "token:dave rejected the gate at step 0: password=*** leaked in the plan") in audit(
        app, other
    )
    assert app.store.audit.verify_audit().ok
