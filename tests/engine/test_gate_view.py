"""What a gate shows: each released step's params (masked), risk, undo, the targets' state now,
the skill's preview and the evidence of earlier steps; the webhook body carries the same."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fakes import ScriptedDispatcher, failed
from tests.support.receiver import Receiver, serve
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Step
from vmware_pilot.engine.gateview import skill_irreversible_steps, undo_note
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RunRequest
from vmware_pilot.errors import StateRefused

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
ALARMS = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}}
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"vm_name": {"type": "string"}, "confirm": {"type": "boolean"}},
}
NO_CONFIRM_SCHEMA = {"type": "object", "properties": {"vm_name": {"type": "string"}}}


def off(vm: str = "web-01") -> dict[str, Any]:
    return {
        "action": "off",
        "skill": "aiops",
        "tool": "power_off_vm",
        "params": {"vm_name": vm, "target": "lab", "confirm": True},
        "rollback_tool": "power_on_vm",
        "rollback_params": {"vm_name": vm, "target": "lab"},
    }


def guest(password: str = "s3cr3t") -> dict[str, Any]:
    params = {"vm_name": "web-01", "command": "ls", "username": "root", "password": password, "confirm": True}
    return {"action": "exec", "skill": "aiops", "tool": "run_vm_guest_command", "params": params}


def vm_info(power: str) -> StepOutcome:
    data = {"name": "web-01", "power_state": power, "cpu": 2, "memory_mb": 4096, "host": "esx-1"}
    return StepOutcome(OutcomeKind.SUCCEEDED, data)


def create(app: PilotApp, actor: Actor, steps: list[dict[str, Any]]) -> str:
    wid: str = app.service.create_workflow(CreateRequest(actor, "ops", "test", steps)).payload()[
        "workflow_id"
    ]
    return wid


async def at_gate(app: PilotApp, actor: Actor, steps: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    wid = create(app, actor, steps)
    out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "awaiting_approval", out
    return wid, app.service.pending_gate(wid).payload()


@pytest.mark.backends("sqlite")  # a literal secret: refused on PostgreSQL (test_dispatch_engine)
async def test_each_released_step_shows_params_masked_risk_and_what_a_rollback_would_undo(
    dapp: PilotApp, actor: Actor
) -> None:
    _, view = await at_gate(dapp, actor, [GATE, off(), guest()])
    first, second = view["releases"]
    assert first["params"] == {"vm_name": "web-01", "target": "lab", "confirm": True}
    assert first["tier"] in ("write", "destructive")
    assert first["rollback_params"] == {"vm_name": "web-01", "target": "lab"}
    # A later step follows and no later gate: the undo runs only if something fails before the end.
    assert first["undo"].startswith("If a later step fails, a rollback undoes it with aiops.power_on_vm")
    assert '"vm_name": "web-01"' in first["undo"] and "once the workflow completes" in first["undo"]
    assert second["params"]["password"] == "***" and "s3cr3t" not in str(view)
    assert "would NOT undo" in second["undo"]


async def test_the_digest_covers_the_shown_params(dapp: PilotApp, actor: Actor) -> None:
    wid, view = await at_gate(dapp, actor, [GATE, off()])
    wf = dapp.store.workflows.load(wid)
    wf.steps[1].params["vm_name"] = "db-01"  # what the page showed is no longer the plan
    dapp.store.workflows.save(wf)
    changed = dapp.service.pending_gate(wid).payload()
    assert changed["gate"]["plan_changed"] and changed["releases"][0]["params"]["vm_name"] == "db-01"
    try:
        (
            await dapp.service.approve(
                ApproveRequest(actor, wid, approver="alice", expected_digest=view["gate"]["digest"])
            )
        ).payload()
    except StateRefused as exc:
        assert exc.fields["refused"] == "plan_changed"
    else:
        raise AssertionError("an approval of the plan as shown before the change went through")


async def test_the_targets_state_is_read_before_the_gate_and_audited(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["get_vm_info"] = vm_info("poweredOn")
    dispatcher.answers["list_vm_snapshots"] = StepOutcome(
        OutcomeKind.SUCCEEDED, {"snapshots": [{"name": "baseline", "id": 1, "created": "x"}]}
    )
    wid, view = await at_gate(dapp, actor, [GATE, off()])
    (target,) = view["targets"]
    assert target["line"] == "web-01: poweredOn, 2 vCPU, 4096 MB, host esx-1, snapshot baseline"
    assert target["changes"] == [] and view["releases"][0]["targets"] == ["web-01"]
    reads = [c for c in dispatcher.calls if c[1] in ("get_vm_info", "list_vm_snapshots")]
    assert [c[2] for c in reads] == [{"vm_name": "web-01", "target": "lab"}] * 2
    audit = dapp.service.get_workflow_status(wid).payload()["audit_log"]
    (inspected,) = [e for e in audit if e["action"] == "gate_inspected"]
    assert "web-01: poweredOn" in inspected["detail"]

    # Shown again later: the VM was powered off meanwhile, and the gate says so plainly.
    dispatcher.answers["get_vm_info"] = vm_info("poweredOff")
    again = (await dapp.service.show_gate(actor, wid)).payload()
    changes = again["targets"][0]["changes"]
    (predicted,) = again["prediction"]["steps"]
    assert predicted["outcome"] == "no_change"
    assert predicted["reason"].startswith(
        "Nothing to do: VM web-01 is poweredOff already (as read at the gate)"
    )
    assert any(c.startswith("CHANGED since the gate was first shown") for c in changes)
    assert any("power_state poweredOn → poweredOff" in c for c in changes)
    assert (
        len(
            [
                e
                for e in dapp.service.get_workflow_status(wid).payload()["audit_log"]
                if e["action"] == "gate_inspected"
            ]
        )
        == 2
    )


async def test_the_same_reading_shown_again_adds_no_audit_event_and_a_new_one_does(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["get_vm_info"] = vm_info("poweredOn")
    wid, _ = await at_gate(dapp, actor, [GATE, off()])

    def inspected() -> list[str]:
        audit = dapp.service.get_workflow_status(wid).payload()["audit_log"]
        return [e["detail"] for e in audit if e["action"] == "gate_inspected"]

    assert len(inspected()) == 1
    for _ in range(3):  # three page views of the same state: no new rows
        (await dapp.service.show_gate(actor, wid)).payload()
    assert len(inspected()) == 1
    dispatcher.answers["get_vm_info"] = vm_info("poweredOff")
    (await dapp.service.show_gate(actor, wid)).payload()
    (await dapp.service.show_gate(actor, wid)).payload()
    details = inspected()
    assert len(details) == 2 and "web-01: poweredOff" in details[1]


async def test_a_failed_read_is_shown_as_failed_and_a_gone_vm_plainly(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["get_vm_info"] = failed("VM not found. Requested: 'web-01'")
    _, view = await at_gate(dapp, actor, [GATE, off()])
    (target,) = view["targets"]
    assert target["read"] == "not_found" and target["line"] == "web-01: not found"
    assert any(c.startswith("NOT FOUND: there is no VM web-01 on lab") for c in target["changes"])


async def test_hand_back_mode_says_the_state_is_not_known(app: PilotApp, actor: Actor) -> None:
    _, view = await at_gate(app, actor, [GATE, off()])
    assert view["targets"] == [] and "not known" in view["state_note"]
    assert view["releases"][0]["preview"]["status"] == "not_run"


async def test_only_a_tool_that_declares_confirm_is_previewed_and_always_with_confirm_false(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.schemas = {"power_off_vm": CONFIRM_SCHEMA, "power_on_vm": NO_CONFIRM_SCHEMA}
    blocked = {
        "action": "preview",
        "blast_radius": {"blockers": ["VMware Tools is not running"], "effect": "x"},
    }
    dispatcher.answers["power_off_vm"] = StepOutcome(OutcomeKind.PREVIEW_ONLY, blocked, "preview only")
    on = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "web-02"}}
    _, view = await at_gate(dapp, actor, [GATE, off(), on])
    calls = [c for c in dispatcher.calls if c[0] == "aiops"]
    assert calls == [("aiops", "power_off_vm", {"vm_name": "web-01", "target": "lab", "confirm": False})]
    first, second = (r["preview"] for r in view["releases"])
    assert first["status"] == "refused" and "VMware Tools is not running" in first["summary"]
    assert second["status"] == "no_preview" and "no confirm parameter" in second["summary"]


async def test_the_evidence_summarises_what_earlier_steps_found(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    alarms = {"alarms": [{"name": "cpu high"}, {"name": "disk full"}, {"name": "net"}, {"name": "mem"}]}
    dispatcher.answers["get_alarms"] = StepOutcome(OutcomeKind.SUCCEEDED, alarms)
    wid, view = await at_gate(dapp, actor, [ALARMS, GATE, off()])
    (evidence,) = view["evidence"]
    assert evidence["summary"] == "4 alarms: cpu high, disk full, net, …"
    assert dapp.service.get_workflow_status(wid).payload()["steps"][0]["result"] == alarms  # one step away


@pytest.mark.backends("sqlite")  # a literal secret: refused on PostgreSQL (test_dispatch_engine)
async def test_the_webhook_body_carries_what_the_gate_releases_and_its_link(
    backend_settings: Settings, actor: Actor
) -> None:
    dispatcher = ScriptedDispatcher(answers={"get_vm_info": vm_info("poweredOn")})
    with serve(Receiver()) as receiver:
        configured = Settings(
            home=backend_settings.home, notify_url=receiver.url, public_url="https://pilot.example.com"
        )
        app = build_app(configured, dispatcher=dispatcher)
        try:
            wid = create(app, actor, [GATE, guest()])
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            (got,) = receiver.wait_for(1)
        finally:
            app.close()
    gate = got.event["gate"]
    assert got.event["gate_url"] == f"https://pilot.example.com/console/workflows/{wid}/gate"
    (released,) = gate["releases"]
    assert released["params"]["password"] == "***" and b"s3cr3t" not in got.body
    assert released["tier"] and "would NOT undo" in released["undo"]
    assert gate["targets"][0].startswith("web-01: poweredOn") and gate["digest"].startswith("sha256:")


async def test_the_webhook_body_carries_the_gate_pages_alerts_as_objects(
    backend_settings: Settings, actor: Actor
) -> None:
    dispatcher = ScriptedDispatcher(answers={"get_vm_info": vm_info("poweredOff")})
    with serve(Receiver()) as receiver:
        app = build_app(Settings(home=backend_settings.home, notify_url=receiver.url), dispatcher=dispatcher)
        try:
            wid = create(app, actor, [GATE, off()])
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            (got,) = receiver.wait_for(1)
            page = app.service.pending_gate(wid).payload()
        finally:
            app.close()
    items = got.event["gate"]["alerts"]
    assert all(set(a) == {"severity", "kind", "object", "text"} for a in items), items
    no_change = [a for a in items if a["kind"] == "step_no_change"]
    assert [(a["severity"], a["object"]) for a in no_change] == [("info", "step 1 (aiops.power_off_vm)")]
    assert no_change[0]["text"].startswith(
        "Step 1 (aiops.power_off_vm) NO_CHANGE: Nothing to do: VM web-01 is poweredOff already"
    )
    alerts = [a["text"] for a in items]
    assert alerts == page["alerts"], "the same sentences as the gate page"
    changes = page["targets"][0]["changes"]
    assert alerts[: len(changes)] == changes
    assert got.event["gate"]["prediction"] == page["prediction"], "the same prediction as the gate page"
    assert page["prediction"]["verdict"] == "succeeds"


async def test_a_webhook_names_a_failed_read_and_a_missing_preview(
    backend_settings: Settings, actor: Actor
) -> None:
    dispatcher = ScriptedDispatcher(
        answers={"get_vm_info": failed("vCenter unreachable: password=hunter2 rejected")}
    )
    dispatcher.schemas["power_off_vm"] = NO_CONFIRM_SCHEMA
    with serve(Receiver()) as receiver:
        app = build_app(Settings(home=backend_settings.home, notify_url=receiver.url), dispatcher=dispatcher)
        try:
            wid = create(app, actor, [GATE, off()])
            (await app.service.run_workflow(RunRequest(actor, wid))).payload()
            (got,) = receiver.wait_for(1)
        finally:
            app.close()
    alerts = {a["kind"]: a for a in got.event["gate"]["alerts"]}
    assert alerts["read_failed"]["object"] == "web-01", alerts
    assert alerts["read_failed"]["text"].startswith("web-01: read FAILED (vCenter unreachable"), alerts
    assert "skill's preview (no preview)" in alerts["preview_no_preview"]["text"], alerts
    assert b"hunter2" not in got.body


def test_undo_sentences_tell_when_a_rollback_can_run_and_what_the_skill_cannot_undo() -> None:
    step = Step(
        index=1,
        action="apply",
        skill="aiops",
        tool="apply_vm_plan",
        params={"plan_id": "p1"},
        rollback_tool="rollback_vm_plan",
        rollback_params={"plan_id": "p1"},
    )
    later = undo_note(step, later_gate=3)
    assert later.startswith(
        "Until the workflow completes (after a failure, or while it waits at the gate at step 3)"
    )
    last = undo_note(step, last=True)
    assert last.startswith("No rollback will undo this step") and "rollback_vm_plan" in last
    plan = undo_note(step, skill_irreversible=skill_irreversible_steps({"irreversible_steps": [0, 2]}))
    assert "reports plan step(s) 0, 2 as irreversible: its undo skips them" in plan
    assert skill_irreversible_steps({"summary": {"irreversible_steps": [1]}}) == [1]
    assert skill_irreversible_steps({"blast_radius": {"irreversible_steps": []}}) == []
    step.rollback_tool = ""
    assert "would NOT undo" in undo_note(step, later_gate=3)
