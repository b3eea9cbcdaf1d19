"""Rehearsal on a twin, on the lab: `vmware-pilot twin capture` records the lab simulator's
inventory, and a dispatching `vmware-pilot mcp` rehearses each gate's released steps on a
simulator loaded from it, through the real vmware-aiops and vmware-monitor, before the gate is
shown. The lab's own inventory is the same before and after every rehearsal."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.lab.harness import TARGET, Lab, call_companion, power_state
from tests.lab.test_dispatch_lab import GATE, create, ensure_on, pilot, power_off
from tests.lab.test_prediction_lab import cli, prediction_of, restart_at_gate
from vmware_pilot.twin.binaries import LAB_BIN
from vmware_pilot.twin.captures import inventory_facts

pytestmark = pytest.mark.lab

GOVC = LAB_BIN / "govc-twin"


def lab_facts(lab: Lab, into: Path) -> dict[str, dict[str, Any]]:
    """The lab simulator's objects as a capture says them (saved apart from any Pilot home)."""
    env = {
        **os.environ,
        "GOVC_URL": lab.simulator.url,
        "GOVC_USERNAME": lab.simulator.username,
        "GOVC_PASSWORD": lab.simulator.password,
        "GOVC_INSECURE": "1",
    }
    subprocess.run(
        [str(GOVC), "object.save", "-d", str(into)], env=env, check=True, capture_output=True, timeout=120
    )
    facts = inventory_facts(into)
    return {ref: f for ref, f in facts.items() if f["type"] != "Task"}


def _find(data: Any, key: str) -> Any:
    if isinstance(data, dict):
        if key in data:
            return data[key]
        return next((f for v in data.values() if (f := _find(v, key)) is not None), None)
    if isinstance(data, list):
        return next((f for v in data if (f := _find(v, key)) is not None), None)
    return None


def captured(lab: Lab, home: Path) -> dict[str, Any]:
    made = cli(lab, home, "twin", "capture", TARGET, "--json")
    assert made.returncode == 0, made.stderr
    assert "objects saved" in made.stderr  # progress while capturing
    record: dict[str, Any] = json.loads(made.stdout)
    assert lab.simulator.password not in made.stdout + made.stderr
    return record


async def test_capture_list_remove_and_rolling_restart_rehearsed_with_aiops_refusal(
    lab: Lab, tmp_path: Path
) -> None:
    vm = "DC0_C0_RP0_VM1"
    await ensure_on(lab, vm)
    home = tmp_path / "pilot"
    record = captured(lab, home)
    assert record["target"] == TARGET and record["objects"] > 50 and record["digest"].startswith("sha256:")
    assert record["vcenter"] == f"{lab.simulator.host}:{lab.simulator.port}"
    listed = json.loads(cli(lab, home, "twin", "list", "--json").stdout)
    assert [c["id"] for c in listed] == [record["id"]]
    kept = (home / "twins" / record["id"] / "capture.json").read_text()
    assert lab.simulator.password not in kept and "password" not in kept

    before = lab_facts(lab, tmp_path / "before")
    async with pilot(lab, home) as client:
        wid = await restart_at_gate(client, vm)
        prediction = await prediction_of(client, wid)
    rehearsal = prediction["rehearsal"]
    assert rehearsal["status"] == "rehearsed" and rehearsal["verdict"] == "fails", rehearsal
    assert rehearsal["capture"]["id"] == record["id"] and rehearsal["capture"]["stale"] is False
    assert rehearsal["overlay"] == [f"{vm} poweredOn"]
    off, on, _ = prediction["steps"]
    assert (off["step"], off["outcome"], off["source"]) == (2, "refused", "rehearsal"), off
    # aiops' own words, from the twin.
    assert "power_off_vm refused: VMware Tools is not running in the guest" in off["reason"], off
    assert (
        on["source"] == "rehearsal" and on["outcome"] == "unknown" and on["reason"].startswith("Not reached")
    )
    assert prediction["verdict"] == "fails" and "Rehearsed on a twin of lab (fails)" in prediction["summary"]
    assert rehearsal["diff"] == []  # the refused power-off changed nothing on the twin

    # The CLI panel shows the rehearsal under the verdict, with the capture's age.
    panel = cli(lab, home, "approve", wid, "--dispatch", "--yes")
    assert panel.returncode != 0  # a failing verdict needs --acknowledge-failure
    assert f"Rehearsal on a twin: FAILS (capture {record['id']} of {record['vcenter']}, " in panel.stdout, (
        panel.stdout
    )
    assert "step 2 refused: power_off_vm refused: VMware Tools is not running" in panel.stdout
    # ... and the decision summary above the prompt says it in one line, with the capture's age.
    assert f"Rehearsed on a twin: fails (capture of {record['vcenter']}, " in panel.stdout, panel.stdout

    async with pilot(lab, home) as client:
        reason = "rehearsed: aiops refuses, checking the real run does too"
        done = await client.call(
            "approve", {"workflow_id": wid, "approver": "alice", "acknowledge_predicted_failure": reason}
        )
        assert done.payload.get("outcome") == "failed", done.payload
        status = (await client.call("get_workflow_status", {"workflow_id": wid})).payload
    (approval,) = status["gates"][0]["approvals"]
    assert approval["verdict"].endswith(f"|rehearsal:{rehearsal['digest']}")  # bound to the rehearsal
    audited = [e for e in status["audit_log"] if e["action"] == "gate_rehearsed"]
    assert audited and rehearsal["digest"] in audited[0]["detail"]

    # The twin never reached the lab: only the real (refused) run touched it, and changed nothing.
    assert lab_facts(lab, tmp_path / "after") == before
    assert await power_state(lab, vm) == "poweredOn"

    gone = cli(lab, home, "twin", "remove", record["id"])
    assert gone.returncode == 0, gone.stderr
    assert json.loads(cli(lab, home, "twin", "list", "--json").stdout) == []


async def test_snapshot_and_power_off_rehearsed_on_the_twin_and_the_lab_unchanged(
    lab: Lab, tmp_path: Path
) -> None:
    vm = "DC0_H0_VM0"
    await ensure_on(lab, vm)
    home = tmp_path / "pilot"
    captured(lab, home)
    snap = {
        "action": "snapshot",
        "skill": "aiops",
        "tool": "create_vm_snapshot",
        "params": {"vm_name": vm, "snapshot_name": "before-change", "target": TARGET},
    }
    before = lab_facts(lab, tmp_path / "before")
    async with pilot(lab, home) as client:
        wid = await create(client, [GATE, snap, power_off(vm)])
        ran = await client.call("run_workflow", {"workflow_id": wid})
        assert ran.payload["outcome"] == "awaiting_approval", ran.payload
        prediction = await prediction_of(client, wid)
        status = await client.call("get_workflow_status", {"workflow_id": wid})
    rehearsal = prediction["rehearsal"]
    assert rehearsal["verdict"] == "succeeds", rehearsal
    assert [(s["step"], s["outcome"]) for s in rehearsal["steps"]] == [(1, "succeeds"), (2, "succeeds")]
    assert all(s["source"] == "rehearsal" for s in prediction["steps"])
    changes = {(d["object"], d["field"]): d for d in rehearsal["diff"]}
    assert changes[(vm, "power_state")]["after"] == "poweredOff"
    assert "before-change" in changes[(vm, "snapshots")]["after"]
    assert prediction["verdict"] == "succeeds"
    assert not status.is_error
    # Nothing was approved: the lab is exactly as it was.
    assert lab_facts(lab, tmp_path / "after") == before


async def test_delete_then_power_on_fails_at_the_second_step_on_the_twin(lab: Lab, tmp_path: Path) -> None:
    vm = "DC0_H0_VM1"
    if await power_state(lab, vm) != "poweredOff":
        off = await call_companion(
            lab, "aiops", "power_off_vm", {"vm_name": vm, "force": True, "confirm": True, "target": TARGET}
        )
        assert not off.is_error, off.text
    home = tmp_path / "pilot"
    captured(lab, home)
    # aiops deletes only with its preview's acknowledge_with echoed back (asked of the lab: a preview).
    preview = await call_companion(lab, "aiops", "delete_vm", {"vm_name": vm, "target": TARGET})
    assert not preview.is_error, preview.text
    ack = _find(preview.data, "acknowledge_with")
    assert isinstance(ack, dict), preview.text
    delete = {
        "action": "delete",
        "skill": "aiops",
        "tool": "delete_vm",
        "params": {"vm_name": vm, "confirm": True, "acknowledge_blast_radius": ack, "target": TARGET},
    }
    power_on = {
        "action": "power_on",
        "skill": "aiops",
        "tool": "power_on_vm",
        "params": {"vm_name": vm, "target": TARGET},
    }
    before = lab_facts(lab, tmp_path / "before")
    async with pilot(lab, home) as client:
        wid = await create(client, [GATE, delete, power_on])
        ran = await client.call("run_workflow", {"workflow_id": wid})
        assert ran.payload["outcome"] == "awaiting_approval", ran.payload
        prediction = await prediction_of(client, wid)
    rehearsal = prediction["rehearsal"]
    assert rehearsal["verdict"] == "fails", rehearsal
    first, second = rehearsal["steps"]
    assert first["outcome"] == "succeeds", first
    assert second["outcome"] in ("fails", "refused") and vm in second["answer"], second
    assert prediction["verdict"] == "fails" and prediction["failing_step"] == 2
    assert {"object": vm, "field": "exists", "before": True, "after": False} in rehearsal["diff"]
    assert lab_facts(lab, tmp_path / "after") == before
    assert await power_state(lab, vm) == "poweredOff"
