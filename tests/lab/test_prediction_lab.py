"""The gate's prediction on the lab: a real dispatching `vmware-pilot mcp` with the real
vmware-aiops and vmware-monitor on the vCenter simulator, whose VMs run no VMware Tools.

``rolling_restart`` of a VM that is on: aiops refuses the graceful power-off, so the gate says
``fails`` at that step in aiops' own words, and nothing is said against the power-on after it;
approving takes an acknowledgment with a reason (MCP argument, CLI flag), and the run then fails
exactly where predicted. ``rolling_restart`` of a VM that is off: the power-off has nothing to
do and the power-on is shown as the change it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lab_harness import TARGET, Lab, call_companion, power_state
from tests.support.lab_pilot import cli, ensure_on, pilot, prediction_of, restart_at_gate

pytestmark = pytest.mark.lab


async def test_rolling_restart_without_vmware_tools_fails_at_the_power_off_in_aiops_words(
    lab: Lab, tmp_path: Path
) -> None:
    vm = "DC0_C0_RP0_VM1"
    await ensure_on(lab, vm)
    home = tmp_path / "pilot"
    async with pilot(lab, home) as client:
        wid = await restart_at_gate(client, vm)
        prediction = await prediction_of(client, wid)
        assert prediction["verdict"] == "fails", prediction
        # rolling_restart: 0 get_alarms, 1 gate, 2 power_off_vm, 3 power_on_vm, 4 get_alarms.
        assert prediction["failing_step"] == 2
        off, on, check = prediction["steps"]
        assert (check["step"], check["outcome"]) == (4, "unknown")
        assert (off["step"], off["tool"], off["outcome"]) == (2, "power_off_vm", "refused")
        assert off["reason"].startswith("aiops refuses it: VMware Tools is not running in the guest"), off
        assert prediction["summary"].startswith(f"FAILS at step 2 (aiops.power_off_vm): {off['reason']}")
        assert "Nothing is changed before it." in prediction["summary"]
        # No word against the power-on: the run never reaches it, and nothing says "already on".
        assert (on["step"], on["outcome"], on["changes"]) == (3, "unknown", [])
        assert on["reason"] == "Not reached: the run stops at step 2."
        assert not any("already" in s["reason"].lower() for s in prediction["steps"])

        refused = await client.call("approve", {"workflow_id": wid, "approver": "alice"})
        assert refused.is_error and refused.payload["refused"] == "predicted_failure", refused.payload

        # The CLI refuses it too without the flag, after showing the verdict: in the compact panel's
        # decision summary, its last lines above the prompt; in the full panel, first.
        plain = cli(lab, home, "approve", wid, "--dispatch", "--yes")
        assert plain.returncode != 0
        assert "Verdict: fails — FAILS at step 2 (aiops.power_off_vm)" in plain.stdout, plain.stdout
        assert plain.stdout.index("Releases (runs once approved)") < plain.stdout.index("Verdict: fails")
        full = cli(lab, home, "approve", wid, "--dispatch", "--yes", "--full")
        assert "Prediction: FAILS at step 2 (aiops.power_off_vm)" in full.stdout, full.stdout
        assert full.stdout.index("Prediction: FAILS") < full.stdout.index("Releases (runs once approved)")
        assert "--acknowledge-failure" in plain.stdout + plain.stderr
        # The panel says nothing under the power-on against the VM being on (the false alert).
        under_power_on = plain.stdout.split("step 3 aiops.power_on_vm")[1].split("step 4 ")[0]
        assert "ALREADY" not in plain.stdout and "refuses" not in under_power_on, under_power_on
        assert await power_state(lab, vm) == "poweredOn", "a refused approval changes nothing"

        reason = "checking that aiops refuses as predicted"
        done = cli(
            lab, home, "approve", wid, "--dispatch", "--yes", "--json", "--acknowledge-failure", reason
        )
        assert done.returncode != 0, done.stdout  # the run failed, as predicted
        status = (await client.call("get_workflow_status", {"workflow_id": wid})).payload
        assert status["state"] == "failed"
        assert [s["status"] for s in status["steps"]][1:4] == ["success", "failed", "skipped"]
        assert "VMware Tools" in str(status["steps"][2]["result"])
        (approval,) = status["gates"][0]["approvals"]
        assert approval["acknowledged_failure"] == reason and approval["channel"] == "cli"
        assert any(e["action"] == "approved_despite_predicted_failure" for e in status["audit_log"])
    assert await power_state(lab, vm) == "poweredOn"


async def test_rolling_restart_of_a_vm_that_is_off_shows_the_power_on_as_a_change(
    lab: Lab, tmp_path: Path
) -> None:
    vm = "DC0_H0_VM1"
    if await power_state(lab, vm) != "poweredOff":
        answer = await call_companion(
            lab, "aiops", "power_off_vm", {"vm_name": vm, "force": True, "confirm": True, "target": TARGET}
        )
        assert not answer.is_error, answer.text
    async with pilot(lab, tmp_path / "pilot") as client:
        wid = await restart_at_gate(client, vm)
        prediction = await prediction_of(client, wid)
        assert prediction["verdict"] == "succeeds", prediction
        off, on, _ = prediction["steps"]
        assert off["outcome"] == "no_change", off
        assert off["reason"].startswith(f"Nothing to do: VM {vm} is poweredOff already (as read at the gate)")
        assert on["outcome"] == "succeeds", on
        assert on["changes"][0] == {
            "object": vm,
            "field": "power_state",
            "before": "poweredOff",
            "after": "poweredOn",
        }
        assert prediction["summary"] == f"SUCCEEDS: approving leaves {vm} powered on."
        done = await client.call("approve", {"workflow_id": wid, "approver": "alice"})
        assert not done.is_error and done.payload["outcome"] == "completed", done.payload
    assert await power_state(lab, vm) == "poweredOn"
