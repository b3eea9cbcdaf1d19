"""A VM estate the fake skills report, and a rolling restart stopped at its gate (the prediction and drift-check tests)."""

from __future__ import annotations

from typing import Any

from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest, RunRequest

CONFIRM_SCHEMA = {"properties": {"vm_name": {}, "force": {}, "confirm": {}, "target": {}}}


TOOLS_DOWN = "VMware Tools is not running in the guest, so a graceful shutdown cannot be delivered."


def gate(**options: Any) -> dict[str, Any]:
    return {
        "action": "require_approval",
        "skill": "pilot",
        "tool": "approve",
        "params": {"message": "Restart?", **options},
    }


def restart(vm: str) -> list[dict[str, Any]]:
    """What rolling_restart releases for one VM: graceful power-off, power-on, alarm check."""
    on = {"vm_name": vm, "target": "lab"}
    return [
        {
            "action": f"power_off_{vm}",
            "skill": "aiops",
            "tool": "power_off_vm",
            "params": {"vm_name": vm, "force": False, "confirm": True, "target": "lab"},
            "rollback_tool": "power_on_vm",
            "rollback_params": on,
        },
        {"action": f"power_on_{vm}", "skill": "aiops", "tool": "power_on_vm", "params": on},
        {"action": "health", "skill": "monitor", "tool": "get_alarms", "params": {"target": "lab"}},
    ]


class Estate:
    """One VM as the fake skills report it: its power state and VMware Tools, and aiops' preview."""

    def __init__(self, dispatcher: ScriptedDispatcher, power: str = "poweredOn", tools: bool = False) -> None:
        self.power, self.tools = power, tools
        dispatcher.schemas["power_off_vm"] = CONFIRM_SCHEMA
        dispatcher.answers["get_vm_info"] = self.info
        dispatcher.answers["power_off_vm"] = self.power_off

    def info(self, skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        status = "guestToolsRunning" if self.tools else "guestToolsNotRunning"
        body = {"name": params["vm_name"], "power_state": self.power, "tools_status": status, "uuid": "u-1"}
        return StepOutcome(OutcomeKind.SUCCEEDED, body)

    def power_off(self, skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        blockers = [] if self.tools or self.power == "poweredOff" else [TOOLS_DOWN]
        if params.get("confirm") is False:
            radius = {"vm": params["vm_name"], "power_state": self.power, "blockers": blockers}
            return StepOutcome(OutcomeKind.SUCCEEDED, {"action": "preview", "blast_radius": radius})
        if blockers:
            return StepOutcome(OutcomeKind.FAILED, {"error": blockers[0]}, blockers[0])
        self.power = "poweredOff"
        return StepOutcome(OutcomeKind.SUCCEEDED, {"action": "powered_off"})


async def at_gate(app: PilotApp, actor: Actor, steps: list[dict[str, Any]]) -> str:
    wid: str = app.service.create_workflow(CreateRequest(actor, "ops", "test", steps)).payload()[
        "workflow_id"
    ]
    out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "awaiting_approval", out
    return wid
