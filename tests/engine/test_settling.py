"""Interrupted write steps settled by reading, through a real MCP client session: right after the
step ends interrupted, on recovery of a run a dead Pilot left, and lazily before a rollback or
cancel preview; the judgment on the step, audited, and used by rollback.

The scripted dispatcher stands in for vCenter and its skills: it produces the interruption (a
call whose effect is unknown, which the real parts cannot produce on demand) and answers the
reads as the real skills shape them (tests/lab/test_settle_lab.py runs the real ones)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import Client, connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import BeforeSend, OutcomeKind, StepOutcome
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.engine.execution import settling
from vmware_pilot.errors import EffectUnknown

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
POWER_OFF = {
    "action": "power_off_web",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "web", "force": True, "confirm": True, "target": "lab"},
    "rollback_tool": "power_on_vm",
    "rollback_params": {"vm_name": "web", "target": "lab"},
}
TIMED_OUT = "UNKNOWN effect: aiops.power_off_vm did not answer within 1800 s"


class Vcenter:
    """One VM and vCenter's recent tasks and events, as the fake skills report them. The power-off
    is interrupted (effect unknown); ``lands`` says whether it took effect all the same."""

    def __init__(self, dispatcher: ScriptedDispatcher, *, lands: bool, tasks: list[dict[str, Any]]) -> None:
        self.power, self.lands, self.tasks = "poweredOn", lands, tasks
        self.events = [
            {
                "time": "2026-12-02 10:00:01",
                "event_type": "VmPoweredOffEvent",
                "entity_name": "web",
                "message": "web off",
            },
            {
                "time": "2026-12-02 10:00:00",
                "event_type": "VmPoweredOnEvent",
                "entity_name": "db",
                "message": "db on",
            },
        ]
        answers = dispatcher.answers
        answers["get_vm_info"] = lambda s, t, p: ok(
            {"name": p["vm_name"], "power_state": self.power, "uuid": "u-1"}
        )
        answers["list_vm_snapshots"] = ok({"snapshots": []})
        answers["list_active_tasks"] = lambda s, t, p: ok({"items": self.tasks, "total": len(self.tasks)})
        answers["get_events"] = lambda s, t, p: ok({"items": self.events})
        answers["power_off_vm"] = self.power_off
        answers["power_on_vm"] = self.power_on

    def power_off(self, skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        if params.get("confirm") is False:
            return ok({"action": "preview", "blast_radius": {"power_state": self.power, "blockers": []}})
        if self.lands:
            self.power = "poweredOff"
        raise EffectUnknown(TIMED_OUT)

    def power_on(self, skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        self.power = "poweredOn"
        return ok({"action": "powered_on"})


def ok(payload: Any) -> StepOutcome:
    return StepOutcome(OutcomeKind.SUCCEEDED, payload)


def task(state: str, entity: str = "web") -> dict[str, Any]:
    return {"name": "VirtualMachine.powerOff", "entity": entity, "state": state, "active": state == "running"}


async def interrupted(client: Client) -> tuple[str, dict[str, Any]]:
    """A gate and a power-off; approving runs the power-off, which ends interrupted."""
    wid = await client.custom([GATE, POWER_OFF])
    await client.ok("run_workflow", workflow_id=wid)
    ran = await client.call("approve", workflow_id=wid, approver="alice")
    assert ran.payload["outcome"] == "failed" and ran.payload["steps"][1]["status"] == "interrupted"
    return wid, ran.payload


def settled_of(status: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = status["steps"][1]["result"]["settled"]
    return found


def undo_calls(dispatcher: ScriptedDispatcher) -> list[str]:
    return [tool for _, tool, _ in dispatcher.calls if tool == "power_on_vm"]


async def test_an_interrupted_power_off_that_landed_is_settled_applied_and_undone_without_acknowledgment(
    dapp: PilotApp, dispatcher: ScriptedDispatcher
) -> None:
    vcenter = Vcenter(dispatcher, lands=True, tasks=[task("success"), task("running", entity="db")])
    async with connect(dapp) as client:
        wid, ran = await interrupted(client)
        # Settled on the run path, before anyone asks: the run's own answer carries it.
        settled = ran["steps"][1]["result"]["settled"]
        assert settled["effect"] == "applied", settled
        assert "(read back: applied: web power_state is poweredOff" in ran["error"]
        assert settled["reason"].startswith("web power_state is poweredOff, as power_off_vm leaves it")
        assert ran["steps"][1]["result"]["error"] == TIMED_OUT, "the contract's keys stay"
        evidence = settled["evidence"]
        assert evidence["read"][0]["line"].startswith("web: poweredOff")
        assert evidence["compared"] == [
            {"object": "web", "field": "power_state", "expected": "poweredOff", "found": "poweredOff"}
        ]
        assert evidence["tasks"] == [{"name": "VirtualMachine.powerOff", "entity": "web", "state": "success"}]
        assert [e["event_type"] for e in evidence["events"]] == ["VmPoweredOffEvent"]
        status = await client.status(wid)
        assert settled_of(status) == settled
        actions = [e["action"] for e in status["audit_log"]]
        assert actions[actions.index("step_effect_unknown") + 1] == "step_settled"
        (audited,) = [e for e in status["audit_log"] if e["action"] == "step_settled"]
        assert audited["detail"].startswith("Step 1: power_off_vm → applied: web power_state is poweredOff")

        preview = (await client.ok("rollback", workflow_id=wid))["blast_radius"]
        assert preview["unknown_effects_count"] == 0 and preview["unmeasured"] == []
        assert [(u["index"], u["settled"]) for u in preview["would_roll_back"]] == [(1, "applied")]
        done = await client.ok("rollback", workflow_id=wid, confirm=True)
        assert done["action"] == "rolled_back" and done["steps"][1]["status"] == "rolled_back"
    assert undo_calls(dispatcher) == ["power_on_vm"] and vcenter.power == "poweredOn"


async def test_a_power_off_that_did_not_land_is_unknown_at_first_then_not_applied_and_not_undone(
    dapp: PilotApp, dispatcher: ScriptedDispatcher
) -> None:
    Vcenter(dispatcher, lands=False, tasks=[])
    async with connect(dapp) as client:
        wid, ran = await interrupted(client)
        # Moments after the call, a VM still on may yet be powered off by a call in transit.
        first = ran["steps"][1]["result"]["settled"]
        assert first["effect"] == "unknown" and "may still land" in first["reason"], first
        # A lease time later (the step started a minute ago), the same read settles it.
        wf = dapp.store.workflows.load(wid)
        started = wf.steps[1].started_at
        assert started is not None
        wf.steps[1].started_at = started - timedelta(seconds=60)
        dapp.store.workflows.save(wf)
        preview = (await client.ok("rollback", workflow_id=wid))["blast_radius"]
        assert preview["unknown_effects_count"] == 0 and preview["unmeasured"] == []
        assert preview["would_roll_back"] == [] and preview["left_in_place"] == []
        settled = settled_of(await client.status(wid))
        assert settled["effect"] == "not_applied"
        assert settled["reason"] == (
            "web power_state is poweredOn, not as power_off_vm would leave it; no task on it in progress"
        )
        done = await client.ok("rollback", workflow_id=wid, confirm=True)
        assert done["action"] == "rolled_back" and done["steps"][1]["status"] == "interrupted"
    assert undo_calls(dispatcher) == [], "a step that was not applied needs no undo"


async def test_a_power_off_of_a_vm_that_was_off_at_the_gate_changed_nothing_and_is_not_undone(
    dapp: PilotApp, dispatcher: ScriptedDispatcher
) -> None:
    """The gate read the VM off (power_off_vm predicted ``no_change``): reading it off after the
    interruption is no sign the step did anything, and powering it on would be a change."""
    vcenter = Vcenter(dispatcher, lands=True, tasks=[])
    vcenter.power = "poweredOff"
    async with connect(dapp) as client:
        wid, ran = await interrupted(client)
        settled = ran["steps"][1]["result"]["settled"]
        assert settled["effect"] == "not_applied", settled
        assert "as it already was before the step (as read at the gate)" in settled["reason"]
        done = await client.ok("rollback", workflow_id=wid, confirm=True)
        assert done["action"] == "rolled_back"
    assert undo_calls(dispatcher) == [] and vcenter.power == "poweredOff"


async def test_a_task_still_running_keeps_it_unknown_until_a_later_preview_reads_it_done(
    dapp: PilotApp, dispatcher: ScriptedDispatcher
) -> None:
    vcenter = Vcenter(dispatcher, lands=False, tasks=[task("running")])
    async with connect(dapp) as client:
        wid, ran = await interrupted(client)
        settled = ran["steps"][1]["result"]["settled"]
        assert settled["effect"] == "unknown"
        assert settled["reason"].startswith("task VirtualMachine.powerOff on web running")
        refused = await client.refused("rollback", workflow_id=wid, confirm=True)
        assert "may still take effect" in refused["blast_radius"]["unmeasured"][0]
        assert undo_calls(dispatcher) == []
        # The task ends; the next preview reads again and settles it.
        vcenter.power, vcenter.tasks = "poweredOff", [task("success")]
        preview = (await client.ok("cancel_workflow", workflow_id=wid))["blast_radius"]
        assert preview["unknown_effects_count"] == 0
        status = await client.status(wid)
        assert settled_of(status)["effect"] == "applied"
        assert [e["action"] for e in status["audit_log"]].count("step_settled") == 2


async def test_the_step_a_dead_pilot_left_running_is_settled_when_its_run_is_recovered(
    dapp: PilotApp, dispatcher: ScriptedDispatcher
) -> None:
    vcenter = Vcenter(dispatcher, lands=True, tasks=[])
    vcenter.power = "poweredOff"  # the dead Pilot's call landed
    async with connect(dapp) as client:
        wid = await client.custom([GATE, POWER_OFF])
        wf = dapp.store.workflows.load(wid)
        wf.steps[0].status = StepStatus.SUCCESS
        wf.steps[1].status = StepStatus.RUNNING  # what a Pilot killed mid-dispatch leaves
        wf.steps[1].started_at = dapp.store.now() - timedelta(minutes=5)
        dapp.store.workflows.save(wf)
        ran = await client.call("run_workflow", workflow_id=wid)
        assert ran.payload["steps"][1]["status"] == "interrupted"
        assert ran.payload["steps"][1]["result"]["settled"]["effect"] == "applied"
        assert "Pilot read the target system: applied (web power_state is poweredOff" in ran.payload["error"]
        assert "rollback undoes it" in ran.payload["error"]
        actions = [e["action"] for e in ran.payload["audit_log"]]
        assert actions[-2:] == ["interrupted_step_detected", "step_settled"]
    assert not [c for c in dispatcher.calls if c[1] == "power_off_vm" and c[2].get("confirm")], (
        "never sent again"
    )


class Silent(ScriptedDispatcher):
    """Reads of the VM that never answer once the power-off was interrupted."""

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        if tool == "get_vm_info" and any(c[1] == "power_off_vm" and c[2].get("confirm") for c in self.calls):
            await asyncio.Event().wait()
        return await super().call(skill, tool, params, before_send)


async def test_settling_is_bounded_in_time(
    backend_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settling, "SETTLE_SECONDS", 0.2)
    silent = Silent()
    Vcenter(silent, lands=True, tasks=[])
    app = build_app(backend_settings, dispatcher=silent)
    try:
        async with connect(app) as client:
            _, ran = await interrupted(client)
            settled = ran["steps"][1]["result"]["settled"]
            assert settled == {
                **settled,
                "effect": "unknown",
                "reason": "the reads did not answer within 0.2 s",
            }
    finally:
        app.close()


async def test_a_tool_with_no_declared_effect_stays_unknown_and_nothing_is_read(
    dapp: PilotApp, dispatcher: ScriptedDispatcher
) -> None:
    dispatcher.answers["apply_everything"] = EffectUnknown(TIMED_OUT)
    step = {"action": "apply", "skill": "nsx", "tool": "apply_everything", "params": {"target": "lab"}}
    async with connect(dapp) as client:
        wid = await client.custom([GATE, step])
        await client.ok("run_workflow", workflow_id=wid)
        ran = await client.call("approve", workflow_id=wid, approver="alice")
        settled = ran.payload["steps"][1]["result"]["settled"]
        assert settled["effect"] == "unknown"
        assert (
            settled["reason"]
            == "Pilot has no declared effect for nsx.apply_everything to compare the state with"
        )
        refused = await client.refused("rollback", workflow_id=wid, confirm=True)
        assert refused["blast_radius"]["unknown_effects_count"] == 1
    assert not [c for c in dispatcher.calls if c[1] in ("list_active_tasks", "get_events")]
