"""The drift check on the lab: a real dispatching `vmware-pilot mcp` with the real vmware-aiops
and vmware-monitor on the vCenter simulator.

A plan that powers a VM off (hard: the simulator's VMs run no VMware Tools) and on again is
approved for a VM that is on; between the approval and the dispatch the VM is powered off
directly on the simulator (pyVmomi, in the companions' Python), not through Pilot. The run stops
before power_off_vm is called, at the gate again, saying what changed, audited
``drift_detected``; approving again runs the plan against the state as it is now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.lab_harness import TARGET, Lab, at_vcenter, power_state
from tests.support.lab_pilot import create, ensure_on, pilot

pytestmark = pytest.mark.lab

VM = "DC0_C0_RP0_VM0"
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Cycle it?"}}


def aiops(tool: str, **params: Any) -> dict[str, Any]:
    return {
        "action": tool,
        "skill": "aiops",
        "tool": tool,
        "params": {"vm_name": VM, "target": TARGET, **params},
    }


async def test_a_vm_powered_off_on_the_simulator_after_approval_stops_the_run_before_the_power_off(
    lab: Lab, tmp_path: Path
) -> None:
    await ensure_on(lab, VM)
    async with pilot(lab, tmp_path / "pilot") as client:
        wid = await create(
            client, [GATE, aiops("power_off_vm", force=True, confirm=True), aiops("power_on_vm")]
        )
        ran = await client.call("run_workflow", {"workflow_id": wid})
        assert ran.payload["outcome"] == "awaiting_approval", ran.payload
        status = (await client.call("get_workflow_status", {"workflow_id": wid})).payload
        assert status["prediction"]["verdict"] == "succeeds", status["prediction"]

        at_vcenter(lab, "power_off", VM)

        held = await client.call("approve", {"workflow_id": wid, "approver": "alice", "gate_step": 0})
        assert not held.is_error and held.payload["outcome"] == "awaiting_approval", held.payload
        status = (await client.call("get_workflow_status", {"workflow_id": wid})).payload
        # power_off_vm was not called: the step is still pending, with no result and no audit of a call.
        assert [s["status"] for s in status["steps"]] == ["pending", "pending", "pending"]
        assert status["steps"][1]["result"] is None
        actions = [e["action"] for e in status["audit_log"]]
        assert "step_completed" not in actions and "step_failed" not in actions
        message = status["gates"][0]["message"]
        assert message.startswith("DRIFT before step 1 (aiops.power_off_vm), which Pilot did not call: ")
        assert f"{VM} power_state: the approver saw poweredOn (as read at the gate, " in message
        assert "it is poweredOff now" in message
        (drift,) = [e for e in status["audit_log"] if e["action"] == "drift_detected"]
        assert "power_state" in drift["detail"]
        # The gate shows the state as it is now, and what approving is predicted to do from it.
        assert [(s["step"], s["outcome"]) for s in status["prediction"]["steps"]] == [
            (1, "no_change"),
            (2, "succeeds"),
        ]

        done = await client.call("approve", {"workflow_id": wid, "approver": "alice", "gate_step": 0})
        assert not done.is_error and done.payload["outcome"] == "completed", done.payload
        assert [s["status"] for s in done.payload["steps"]] == ["success", "success", "success"]
    assert await power_state(lab, VM) == "poweredOn"
