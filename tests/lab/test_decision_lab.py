"""The decision summary on the lab: a real dispatching `vmware-pilot mcp` with the real
vmware-aiops and vmware-monitor on the vCenter simulator. A rolling restart of a VM that is off:
the summary shows the power-on as the change it is (read at the gate), who asked through which
client, the default expiry of a gate releasing a destructive step with the time left, and the
CLI's compact panel ends with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab_harness import TARGET, Lab, call_companion, power_state
from tests.support.lab_pilot import cli, pilot, restart_at_gate

pytestmark = pytest.mark.lab


async def test_the_decision_summary_of_a_restart_of_a_vm_that_is_off(lab: Lab, tmp_path: Path) -> None:
    vm = "DC0_H0_VM1"
    if await power_state(lab, vm) != "poweredOff":
        answer = await call_companion(
            lab, "aiops", "power_off_vm", {"vm_name": vm, "force": True, "confirm": True, "target": TARGET}
        )
        assert not answer.is_error, answer.text
    home = tmp_path / "pilot"
    async with pilot(lab, home) as client:
        wid = await restart_at_gate(client, vm)
        status = await client.call("get_workflow_status", {"workflow_id": wid})
        decision = status.payload["decision"]
        shown = cli(lab, home, "approve", wid, "--dispatch")
        cancelled = await client.call(
            "cancel_workflow", {"workflow_id": wid, "reason": "lab", "confirm": True}
        )
    assert decision["verdict"] == "succeeds" and vm in decision["objects"]
    power = next(c for c in decision["changes"] if c["field"] == "power_state")
    assert (power["tool"], power["object"], power["before"], power["after"]) == (
        "power_on_vm",
        vm,
        "poweredOff",
        "poweredOn",
    )
    assert decision["requested_by"] and decision["requested_via"]  # the OS account, via the client
    assert 1440 * 60 - 120 < decision["seconds_left"] <= 1440 * 60 and not decision["expired"]
    assert decision["approvals_missing"] == 1 and decision["approved_by"] == []
    rows = [line for line in shown.stdout.splitlines() if line.strip()]
    top = next(i for i, line in enumerate(rows) if "Decision" in line and "╭" in line)
    summary = " ".join(rows[top:])
    assert f"step {power['step']}: {vm} power_state poweredOff → poweredOn" in summary, shown.stdout
    assert "Verdict: succeeds" in summary and "left)" in summary
    assert not cancelled.is_error
