"""The engine with a dispatcher: outcomes, references, failures, unknown effects, undo, groups."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.backends import Database
from tests.support.fakes import ScriptedDispatcher, failed, refused, unknown
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.engine.requests import (
    ApproveRequest,
    CreateRequest,
    FromTemplateRequest,
    RollbackRequest,
    RunRequest,
)
from vmware_pilot.errors import DispatchRefused, PilotError, StateRefused
from vmware_pilot.results import ApproveResult

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
READ = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}}


def power_off(vm: str = "web-01") -> dict[str, Any]:
    return {
        "action": f"off_{vm}",
        "skill": "aiops",
        "tool": "power_off_vm",
        "params": {"vm_name": vm, "confirm": True},
        "rollback_tool": "power_on_vm",
        "rollback_params": {"vm_name": vm},
    }


def guest_command_with_password() -> dict[str, Any]:
    """A gated guest command whose params hold a literal secret."""
    params = {"vm_name": "a", "command": "ls", "username": "root", "password": "s3cr3t", "confirm": True}
    return {"action": "exec", "skill": "aiops", "tool": "run_vm_guest_command", "params": params}


def create(app: PilotApp, actor: Actor, items: list[dict[str, Any]]) -> str:
    wid: str = app.service.create_workflow(CreateRequest(actor, "ops", "test", items)).payload()[
        "workflow_id"
    ]
    return wid


async def test_reads_gate_approve_then_write_completes(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    wid = create(dapp, actor, [READ, GATE, power_off()])
    seen: list[tuple[float, float | None, str]] = []

    async def progress(done: float, total: float | None, message: str) -> None:
        seen.append((done, total, message))

    out = (await dapp.service.run_workflow(RunRequest(actor, wid), progress=progress)).payload()
    assert out["outcome"] == "awaiting_approval"
    assert out["steps"][0]["status"] == "success" and "pending_dispatch" not in out
    out = (
        await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"), progress=progress)
    ).payload()
    assert out["outcome"] == "completed" and out["state"] == "completed"
    assert [(c[0], c[1]) for c in dispatcher.step_calls] == [
        ("monitor", "get_alarms"),
        ("aiops", "power_off_vm"),
    ]
    assert dispatcher.step_calls[1][2] == {"vm_name": "web-01", "confirm": True}
    assert any("power_off_vm" in m for _, _, m in seen) and seen[-1][0] == seen[-1][1]
    assert out["diff_report"]["changed"][0]["object"] == "web-01"


async def test_failure_after_a_change_then_rollback_undoes_it(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["reconfigure_vm"] = failed("not enough memory")
    second = {"action": "resize", "skill": "aiops", "tool": "reconfigure_vm", "params": {"vm_name": "web-01"}}
    wid = create(dapp, actor, [GATE, power_off(), second, READ])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "failed" and out["state"] == "failed"
    assert [s["status"] for s in out["steps"]] == ["success", "success", "failed", "skipped"]
    assert "not enough memory" in out["error"]
    assert out["steps"][2]["result"]["error"] == "not enough memory"

    preview = (await dapp.service.rollback(RollbackRequest(actor, wid))).payload()
    assert [e["index"] for e in preview["blast_radius"]["would_roll_back"]] == [1]
    assert dapp.service.get_workflow_status(wid).payload()["state"] == "failed"
    done = (await dapp.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
    assert done["action"] == "rolled_back"
    assert dispatcher.step_calls[-1] == ("aiops", "power_on_vm", {"vm_name": "web-01"})
    assert done["steps"][1]["status"] == "rolled_back"
    assert [r["status"] for r in done["rollback_results"]] == ["success"]


async def test_unknown_effect_interrupts_and_blocks_rollback_until_acknowledged(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["power_off_vm"] = unknown("connection lost after the call was sent")
    wid = create(dapp, actor, [GATE, power_off(), READ])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "failed"
    assert out["steps"][1]["status"] == "interrupted"
    assert out["audit_log"][-1]["action"] == "step_effect_unknown" or any(
        e["action"] == "step_effect_unknown" for e in out["audit_log"]
    )
    with pytest.raises(StateRefused) as info:
        (await dapp.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
    assert info.value.payload()["blast_radius"]["unknown_effects"][0]["index"] == 1
    preview = (
        await dapp.service.rollback(RollbackRequest(actor, wid, acknowledge_unknown_effects=True))
    ).payload()
    assert preview["blast_radius"]["would_roll_back"][0]["effect_unknown"] is True
    done = (
        await dapp.service.rollback(
            RollbackRequest(actor, wid, confirm=True, acknowledge_unknown_effects=True)
        )
    ).payload()
    assert done["action"] == "rolled_back"
    assert dispatcher.step_calls[-1] == ("aiops", "power_on_vm", {"vm_name": "web-01"}), "undo attempted"
    assert done["steps"][1]["status"] == "rolled_back"


async def test_failed_and_unknown_undos_are_reported_and_do_not_stop_the_rest(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["get_alarms"] = failed("monitoring down")
    wid = create(dapp, actor, [GATE, power_off("a"), power_off("b"), power_off("c"), READ])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    ran = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert ran["state"] == "failed"

    def undo(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        if params["vm_name"] == "c":
            return failed("host unreachable")
        if params["vm_name"] == "b":
            raise unknown("timed out")
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

    dispatcher.answers["power_on_vm"] = undo
    out = (await dapp.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
    assert out["action"] == "rollback_incomplete" and out["outcome"] == "failed"
    assert [(r["step"], r["status"]) for r in out["rollback_results"]] == [
        (3, "failed"),
        (2, "unknown"),
        (1, "success"),
    ]
    assert [s["status"] for s in out["steps"][1:4]] == ["rolled_back", "interrupted", "success"]
    assert out["blocked_reason"] == "rollback_failed"
    assert "2 undo(s) did not complete" in out["error"]


async def test_preview_only_result_counts_as_failure(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["power_off_vm"] = StepOutcome(
        OutcomeKind.PREVIEW_ONLY, {"action": "preview"}, "the tool only previewed"
    )
    wid = create(dapp, actor, [GATE, power_off()])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["steps"][1]["status"] == "failed" and out["outcome"] == "failed"


async def test_refused_dispatch_fails_the_step_safely(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["get_alarms"] = refused("server did not start; nothing was sent")
    wid = create(dapp, actor, [READ])
    out = (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["steps"][0]["status"] == "failed"
    assert "nothing was sent" in out["steps"][0]["result"]["error"]


async def test_preflight_problems_refuse_before_anything_runs(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.preflight_problems = ["step 0: vmware-monitor-mcp is not installed"]
    wid = create(dapp, actor, [READ])
    with pytest.raises(DispatchRefused) as raised:  # a refusal is raised, like every other one
        (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert raised.value.message.startswith("Nothing was run")
    assert raised.value.payload() == {
        "error": raised.value.message,
        "workflow_id": wid,
        "state": "pending",
    }
    assert dispatcher.step_calls == []
    assert dapp.service.get_workflow_status(wid).payload()["state"] == "pending"


async def test_step_references_resolve_from_earlier_results(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["create_vm_plan"] = StepOutcome(OutcomeKind.SUCCEEDED, {"plan_id": "p-42"})
    plan = {"action": "plan", "skill": "aiops", "tool": "create_vm_plan", "params": {"operations": []}}
    apply = {
        "action": "apply",
        "skill": "aiops",
        "tool": "apply_vm_plan",
        "params": {"plan_id": "__from_step_0__:plan_id", "confirm": True},
    }
    wid = create(dapp, actor, [plan, GATE, apply])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "completed"
    assert dispatcher.step_calls[-1][2] == {"plan_id": "p-42", "confirm": True}
    assert out["steps"][2]["params"]["plan_id"] == "__from_step_0__:plan_id", (
        "stored params keep the reference"
    )


async def test_bad_reference_fails_the_step_with_the_reason(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["get_alarms"] = StepOutcome(OutcomeKind.SUCCEEDED, {"count": 1})
    use = {"action": "use", "skill": "monitor", "tool": "get_events", "params": {"x": "__from_step_0__:nope"}}
    wid = create(dapp, actor, [READ, use])
    out = (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["steps"][1]["status"] == "failed"
    assert "no key 'nope'" in out["steps"][1]["result"]["error"]


async def test_parallel_group_of_reads_runs_concurrently(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.delay = 0.05
    group = [{**READ, "action": f"r{i}", "group_id": "g1"} for i in range(4)]
    wid = create(dapp, actor, group)
    out = (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "completed"
    assert dispatcher.max_in_flight == 4
    assert [s["status"] for s in out["steps"]] == ["success"] * 4


async def test_a_run_asks_for_the_sessions_its_parallel_groups_need_before_the_gate(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    other = {"action": "vms", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}
    steps = [
        READ,
        *({**READ, "action": f"r{i}", "group_id": "g1"} for i in range(3)),
        {**other, "group_id": "g2"},
        {**READ, "action": "r9", "group_id": "g2"},
        GATE,
        *({**other, "action": f"v{i}", "group_id": "g3"} for i in range(4)),
    ]
    wid = create(dapp, actor, steps)
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    # Asked once, at the start of the run, before any step ran; the group after the gate is not.
    assert dispatcher.prepared == [{"monitor": 3, "aiops": 1}]


async def test_racing_approvals_run_exactly_once(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.delay = 0.1
    wid = create(dapp, actor, [GATE, power_off()])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    results = await asyncio.gather(
        dapp.service.approve(ApproveRequest(actor, wid, approver="alice")),
        dapp.service.approve(ApproveRequest(actor, wid, approver="bob")),
        return_exceptions=True,
    )
    errors = [r for r in results if isinstance(r, StateRefused)]
    oks = [r for r in results if isinstance(r, ApproveResult)]
    assert len(errors) == 1 and len(oks) == 1
    # The true reason: the other approval released the gate (the run is going on, or done).
    assert "is not awaiting approval (state: " in errors[0].message, errors[0].message
    assert len([c for c in dispatcher.step_calls if c[1] == "power_off_vm"]) == 1


@pytest.mark.backends("sqlite")  # refused where Pilots share the database (below)
async def test_literal_secret_survives_in_process_but_not_a_restart(
    backend_settings: Settings, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    guest = guest_command_with_password()
    first = build_app(backend_settings, dispatcher=dispatcher)
    try:
        wid = create(first, actor, [GATE, guest])
        (await first.service.run_workflow(RunRequest(actor, wid))).payload()
        stored = first.service.get_workflow_status(wid).payload()
        assert stored["steps"][1]["params"]["password"] == "***"
    finally:
        first.close()
    second = build_app(backend_settings, dispatcher=dispatcher)  # a restarted Pilot
    try:
        out = (await second.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
        assert out["steps"][1]["status"] == "failed"
        assert "did not survive a restart" in out["steps"][1]["result"]["error"]
        assert dispatcher.step_calls == []
    finally:
        second.close()


@pytest.mark.backends("sqlite")  # refused where Pilots share the database (below)
async def test_a_secret_shape_in_a_command_reaches_the_skill_but_not_after_a_restart(
    backend_settings: Settings, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    guest = guest_command_with_password()
    guest["params"] = {"vm_name": "a", "command": "mysql --password=hunter2-pw", "confirm": True}
    first = build_app(backend_settings, dispatcher=dispatcher)
    try:
        wid = create(first, actor, [GATE, guest])
        (await first.service.run_workflow(RunRequest(actor, wid))).payload()
        assert (
            first.service.get_workflow_status(wid).payload()["steps"][1]["params"]["command"]
            == "mysql --password=***"
        )
        (await first.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
        assert dispatcher.step_calls[0][2]["command"] == "mysql --password=hunter2-pw"
        again = create(first, actor, [GATE, guest])
        (await first.service.run_workflow(RunRequest(actor, again))).payload()
    finally:
        first.close()
    second = build_app(backend_settings, dispatcher=dispatcher)  # a restarted Pilot
    try:
        out = (await second.service.approve(ApproveRequest(actor, again, approver="alice"))).payload()
        assert out["steps"][1]["status"] == "failed"
        assert "secret(s) command," in out["steps"][1]["result"]["error"]
        assert "did not survive a restart" in out["steps"][1]["result"]["error"]
        assert len(dispatcher.step_calls) == 1
    finally:
        second.close()


@pytest.mark.backends("sqlite")  # refused where Pilots share the database (below)
async def test_literal_secret_reaches_the_skill_in_the_creating_process(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    guest = guest_command_with_password()
    wid = create(dapp, actor, [GATE, guest])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "completed"
    assert dispatcher.step_calls[0][2]["password"] == "s3cr3t"
    assert out["steps"][1]["params"]["password"] == "***", "responses show what the store holds"


async def test_a_write_forced_into_a_parallel_group_still_runs_on_its_own(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.delay = 0.05
    write = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "a"}}
    group = [
        {**READ, "group_id": "g"},
        {**write, "group_id": "g"},
        {**READ, "action": "again", "group_id": "g"},
    ]
    wid = create(dapp, actor, group)
    with pytest.raises(PilotError) as refused:
        (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert [f["kind"] for f in refused.value.payload()["blocking_findings"]] == ["write_in_parallel_group"]
    out = (await dapp.service.run_workflow(RunRequest(actor, wid, force=True))).payload()
    assert out["outcome"] == "completed"
    assert dispatcher.max_in_flight == 1, "only reads share a group at run time"
    assert [c[1] for c in dispatcher.step_calls] == ["get_alarms", "power_on_vm", "get_alarms"]


def guest_with(password: Any) -> dict[str, Any]:
    return {
        "action": "exec",
        "skill": "aiops",
        "tool": "run_vm_guest_command",
        "params": {
            "vm_name": "a",
            "command": "ls",
            "username": "root",
            "password": password,
            "confirm": True,
        },
    }


async def test_env_secret_reference_is_resolved_at_dispatch_and_never_stored(
    dapp: PilotApp,
    dispatcher: ScriptedDispatcher,
    actor: Actor,
    monkeypatch: pytest.MonkeyPatch,
    database: Database,
) -> None:
    monkeypatch.setenv("LAB_GUEST_PASSWORD", "s3cr3t-from-env")
    ref = {"$env": "LAB_GUEST_PASSWORD"}

    def echo_login(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        text = f"logged in as {params['username']} with {params['password']}"
        return StepOutcome(OutcomeKind.SUCCEEDED, {"output": text, "exit_code": 0})

    dispatcher.answers["run_vm_guest_command"] = echo_login
    wid = create(dapp, actor, [GATE, guest_with(ref)])
    assert dapp.service.get_workflow_status(wid).payload()["steps"][1]["params"]["password"] == ref
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "completed"
    assert dispatcher.step_calls[0][2]["password"] == "s3cr3t-from-env", "the skill gets the value"
    stored = dapp.service.get_workflow_status(wid).payload()
    assert stored["steps"][1]["params"]["password"] == ref, "the store keeps the reference"
    assert stored["steps"][1]["result"]["output"] == "logged in as root with ***"
    dapp.store.close()
    stored = database.stored_bytes()
    assert wid.encode() in stored  # the search reaches the stored rows
    assert b"s3cr3t-from-env" not in stored


async def test_env_secret_reference_to_an_unset_variable_fails_the_step_before_sending(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAB_GUEST_PASSWORD", raising=False)
    wid = create(dapp, actor, [GATE, guest_with({"$env": "LAB_GUEST_PASSWORD"})])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "failed" and out["steps"][1]["status"] == "failed"
    assert "LAB_GUEST_PASSWORD" in out["steps"][1]["result"]["error"]
    assert dispatcher.step_calls == []


async def test_partial_and_repeated_rollbacks_report_what_stays_behind(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    clone = {
        "action": "clone",
        "skill": "aiops",
        "tool": "deploy_linked_clone",
        "params": {"vm_name": "web-01", "new_name": "web-01-test", "snapshot_name": "base"},
        "rollback_tool": "power_off_vm",
        "rollback_params": {"vm_name": "web-01-test", "confirm": True},
    }
    dispatcher.answers["get_alarms"] = failed("monitoring down")
    # The clone does not exist yet when the gate reads it (the prediction would say it does).
    dispatcher.answers["get_vm_info"] = lambda s, t, p: failed(f"VM not found. Requested: '{p['vm_name']}'")
    wid = create(dapp, actor, [GATE, clone, READ])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert ((await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload())[
        "outcome"
    ] == "failed"
    preview = (await dapp.service.rollback(RollbackRequest(actor, wid))).payload()
    assert "web-01-test" in preview["blast_radius"]["would_roll_back"][0]["leaves_behind"]
    out = (await dapp.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
    assert out["action"] == "rolled_back"
    (entry,) = out["rollback_results"]
    assert (entry["step"], entry["tool"], entry["status"]) == (1, "power_off_vm", "partial")
    assert "web-01-test" in entry["left_behind"]
    assert out["steps"][1]["status"] == "partially_rolled_back"
    assert out["diff_report"]["rolled_back"][0]["index"] == 1
    again = (await dapp.service.rollback(RollbackRequest(actor, wid, confirm=True))).payload()
    assert [(r["step"], r["status"]) for r in again["rollback_results"]] == [(1, "partial")]
    assert [c[1] for c in dispatcher.step_calls].count("power_off_vm") == 1, "a partial undo is not run again"


async def test_diff_report_names_a_plans_vms_and_the_plan_id_its_reference_resolved_to(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["create_vm_plan"] = StepOutcome(OutcomeKind.SUCCEEDED, {"plan_id": "p-42"})
    operations = [{"action": "power_off", "vm_name": "web-01"}, {"action": "power_off", "vm_name": "web-02"}]
    created = dapp.service.create_workflow_from_template(
        FromTemplateRequest(actor, "plan_and_approve", {"operations": operations, "target": "vc"})
    ).payload()
    wid = created["workflow_id"]
    pending = dapp.service.get_workflow_status(wid).payload()["diff_report"]["pending"]
    assert [p["object"] for p in pending if p["tool"] == "apply_vm_plan"] == ["__from_step_0__:plan_id"]
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "completed"
    changed = {c["tool"]: c["object"] for c in out["diff_report"]["changed"]}
    assert changed == {"create_vm_plan": "web-01, web-02", "apply_vm_plan": "p-42"}


@pytest.mark.parametrize(
    ("reference", "first_result", "message"),
    [
        ("__from_step_0__:nope", {"plan_id": "p", "state": "ok"}, "has no key 'nope' (keys: plan_id, state)"),
        ("__from_step_0__:plan_id", ["p"], "is a list, not an object"),
    ],
)
async def test_a_reference_the_result_cannot_satisfy_fails_its_step_before_sending(
    dapp: PilotApp,
    dispatcher: ScriptedDispatcher,
    actor: Actor,
    reference: str,
    first_result: Any,
    message: str,
) -> None:
    dispatcher.answers["get_alarms"] = StepOutcome(OutcomeKind.SUCCEEDED, first_result)
    use = {"action": "use", "skill": "monitor", "tool": "get_events", "params": {"x": reference}}
    wid = create(dapp, actor, [READ, use])
    out = (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "failed" and out["steps"][1]["status"] == "failed"
    assert message in out["steps"][1]["result"]["error"]
    assert [c[1] for c in dispatcher.step_calls] == ["get_alarms"], (
        "the step with the bad reference was not sent"
    )


async def test_whole_result_reference_passes_any_value(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["get_alarms"] = StepOutcome(OutcomeKind.SUCCEEDED, ["a", "b"])
    use = {"action": "use", "skill": "monitor", "tool": "get_events", "params": {"x": ["__from_step_0__"]}}
    wid = create(dapp, actor, [READ, use])
    assert ((await dapp.service.run_workflow(RunRequest(actor, wid))).payload())["outcome"] == "completed"
    assert dispatcher.step_calls[1][2] == {"x": [["a", "b"]]}


async def test_a_reference_to_a_step_performed_outside_pilot_is_refused(
    backend_settings: Settings, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    use = {"action": "use", "skill": "monitor", "tool": "get_events", "params": {"x": "__from_step_0__"}}
    handback = build_app(backend_settings)
    try:
        wid = create(handback, actor, [READ, GATE, use])
        (await handback.service.run_workflow(RunRequest(actor, wid))).payload()  # step 0 handed to the caller
    finally:
        handback.close()
    dispatching = build_app(backend_settings, dispatcher=dispatcher)
    try:
        out = (
            await dispatching.service.approve(
                ApproveRequest(actor, wid, approver="alice", acknowledge_not_executed=True)
            )
        ).payload()
        assert out["steps"][0]["status"] == "reported_done"
        assert out["steps"][2]["status"] == "failed"
        assert "performed outside Pilot" in out["steps"][2]["result"]["error"]
        assert dispatcher.step_calls == []
    finally:
        dispatching.close()


async def test_a_reference_to_a_step_that_is_no_longer_success_is_refused(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    use = {"action": "use", "skill": "monitor", "tool": "get_events", "params": {"x": "__from_step_0__"}}
    wid = create(dapp, actor, [READ, GATE, use])
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    wf = dapp.store.workflows.load(wid)  # staged: real parts cannot roll a read back
    wf.steps[0].status = StepStatus.ROLLED_BACK
    dapp.store.workflows.save(wf)
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert "whose status is 'rolled_back', not 'success'" in out["steps"][2]["result"]["error"]
    assert [c[1] for c in dispatcher.step_calls] == ["get_alarms"]


async def test_literal_secrets_are_refused_when_pilots_share_the_database(
    dapp: PilotApp, actor: Actor, database: Database
) -> None:
    if database.backend == "sqlite":
        wid = create(dapp, actor, [GATE, guest_command_with_password()])
        assert dapp.store.workflows.load(wid).steps[1].params["password"] == "***", (
            "kept in memory, masked at rest"
        )
        return
    with pytest.raises(PilotError) as info:
        create(dapp, actor, [GATE, guest_command_with_password()])
    assert "literal secret" in info.value.message and "step 1 params.password" in info.value.message
    assert '{"$env": "VC_PASSWORD"}' in info.value.hint
    assert dapp.store.workflows.list_all() == [], "nothing was stored"
    ref = guest_command_with_password()
    ref["params"]["password"] = {"$env": "GUEST_PASSWORD"}
    assert dapp.store.workflows.load(create(dapp, actor, [GATE, ref])).steps[1].params["password"] == {
        "$env": "GUEST_PASSWORD"
    }


@pytest.mark.backends("sqlite")
async def test_literal_secrets_are_refused_whenever_a_database_url_is_set(
    backend_settings: Settings, dispatcher: ScriptedDispatcher, actor: Actor, database: Database
) -> None:
    """A SQLite file named by VMWARE_PILOT_DATABASE_URL may be shared too (another host, a
    shared disk): any database URL means several Pilots may read these workflows."""
    shared = backend_settings.model_copy(update={"database_url": database.raw_url})
    app = build_app(shared, dispatcher=dispatcher)
    try:
        with pytest.raises(PilotError) as info:
            create(app, actor, [GATE, guest_command_with_password()])
        assert "literal secret" in info.value.message and '{"$env": "VC_PASSWORD"}' in info.value.hint
        assert app.store.workflows.list_all() == [], "nothing was stored"
    finally:
        app.close()
