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

from tests.support.lab_harness import TARGET, Lab, call_companion, power_state, running_lab
from tests.support.lab_pilot import (
    GATE,
    cli,
    create,
    ensure_on,
    pilot,
    power_off,
    prediction_of,
    restart_at_gate,
)
from vmware_pilot.domain.model import Step
from vmware_pilot.results import Prediction
from vmware_pilot.safety.predict import with_rehearsal
from vmware_pilot.twin.binaries import LAB_BIN
from vmware_pilot.twin.captures import inventory_facts
from vmware_pilot.twin.rehearse import Rehearser, TwinSettings

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
    # No acknowledgement in the plan: aiops wants its preview's acknowledge_with echoed, and Pilot
    # echoes the one of the gate's preview (the approver's) when the step is confirmed.
    delete = {
        "action": "delete",
        "skill": "aiops",
        "tool": "delete_vm",
        "params": {"vm_name": vm, "confirm": True, "target": TARGET},
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
    assert first["outcome"] == "succeeds" and "deleted" in first["answer"], first  # aiops' real delete
    assert second["outcome"] in ("fails", "refused") and vm in second["answer"], second
    assert prediction["verdict"] == "fails" and prediction["failing_step"] == 2
    assert {"object": vm, "field": "exists", "before": True, "after": False} in rehearsal["diff"]
    assert lab_facts(lab, tmp_path / "after") == before
    assert await power_state(lab, vm) == "poweredOff"


def govc_on_lab(lab: Lab, *args: str) -> None:
    """Change the lab simulator with govc-twin (what no lab skill does: maintenance mode)."""
    env = {
        **os.environ,
        "GOVC_URL": lab.simulator.url,
        "GOVC_USERNAME": lab.simulator.username,
        "GOVC_PASSWORD": lab.simulator.password,
        "GOVC_INSECURE": "1",
    }
    subprocess.run([str(GOVC), *args], env=env, check=True, capture_output=True, timeout=60)


def host_of(facts: dict[str, dict[str, Any]], vm: str) -> str:
    ref = next(f["host"] for f in facts.values() if f["type"] == "VirtualMachine" and f["name"] == vm)
    return str(facts[f"HostSystem:{ref}"]["name"])


async def test_the_twin_is_given_the_snapshot_and_maintenance_mode_the_gate_read_not_the_capture_s(
    lab: Lab, tmp_path: Path
) -> None:
    vm, other = "DC0_H0_VM0", "DC0_C0_RP0_VM0"
    before = lab_facts(lab, tmp_path / "before")
    home = tmp_path / "pilot"
    captured(lab, home)
    # After the capture: a snapshot taken, and a host of the VM's cluster put in maintenance mode.
    hosts = sorted(f["name"] for f in before.values() if f["type"] == "HostSystem" and "_C0_" in f["name"])
    busy = next(h for h in hosts if h != host_of(before, other))
    snap = await call_companion(
        lab,
        "aiops",
        "create_vm_snapshot",
        {"vm_name": vm, "snapshot_name": "after-capture", "target": TARGET},
    )
    assert not snap.is_error, snap.text
    govc_on_lab(lab, "host.maintenance", "-enter", busy)
    try:
        remove = {
            "action": "remove_snapshot",
            "skill": "aiops",
            "tool": "delete_vm_snapshot",
            "params": {"vm_name": vm, "snapshot_name": "after-capture", "confirm": True, "target": TARGET},
        }
        move = {
            "action": "migrate",
            "skill": "aiops",
            "tool": "migrate_vm",
            "params": {"vm_name": other, "to_host": busy, "confirm": True, "target": TARGET},
        }
        async with pilot(lab, home) as client:
            wid = await create(client, [GATE, remove, move])
            ran = await client.call("run_workflow", {"workflow_id": wid})
            assert ran.payload["outcome"] == "awaiting_approval", ran.payload
            prediction = await prediction_of(client, wid)
        rehearsal = prediction["rehearsal"]
        assert rehearsal["status"] == "rehearsed", rehearsal
        assert f"{vm} snapshot after-capture taken" in rehearsal["overlay"], rehearsal["overlay"]
        assert rehearsal["overlay"][-1] == f"host {busy} in maintenance mode", rehearsal["overlay"]
        first, second = rehearsal["steps"]
        # The capture has no such snapshot: its removal succeeds on the twin only through the overlay.
        assert first["outcome"] == "succeeds", first
        # ... and the host was free when captured: the twin refuses the move as the real one would.
        assert second["outcome"] in ("refused", "fails") and "maintenance mode" in second["answer"], second
        changes = {(d["object"], d["field"]): d for d in rehearsal["diff"]}
        removed = changes[(vm, "snapshots")]
        assert "after-capture" in removed["before"] and "after-capture" not in removed["after"], removed
        assert prediction["verdict"] == "fails" and prediction["failing_step"] == 2
    finally:
        govc_on_lab(lab, "host.maintenance", "-exit", busy)
        gone = await call_companion(
            lab,
            "aiops",
            "delete_vm_snapshot",
            {"vm_name": vm, "snapshot_name": "after-capture", "confirm": True, "target": TARGET},
        )
        assert not gone.is_error, gone.text
    assert lab_facts(lab, tmp_path / "after") == before


async def test_the_twin_is_given_the_host_the_gate_read_a_vm_on(lab: Lab, tmp_path: Path) -> None:
    vm = "DC0_C0_RP0_VM1"
    before = lab_facts(lab, tmp_path / "before")
    home = tmp_path / "pilot"
    captured(lab, home)
    start = host_of(before, vm)
    hosts = sorted(f["name"] for f in before.values() if f["type"] == "HostSystem" and "_C0_" in f["name"])
    moved_to = next(h for h in hosts if h != start)
    datastore = next(f["name"] for f in before.values() if f["type"] == "Datastore")
    # Moved after the capture (by vcsim's relocation: aiops refuses a compute-only move between
    # the lab's hosts, which mount no datastore in common).
    govc_on_lab(lab, "vm.migrate", "-host", moved_to, vm)
    try:
        assert host_of(lab_facts(lab, tmp_path / "moved"), vm) == moved_to
        back = {
            "action": "migrate_back",
            "skill": "aiops",
            "tool": "migrate_vm",
            "params": {
                "vm_name": vm,
                "to_host": start,
                "to_datastore": datastore,
                "confirm": True,
                "target": TARGET,
            },
        }
        async with pilot(lab, home) as client:
            wid = await create(client, [GATE, back])
            ran = await client.call("run_workflow", {"workflow_id": wid})
            assert ran.payload["outcome"] == "awaiting_approval", ran.payload
            prediction = await prediction_of(client, wid)
        rehearsal = prediction["rehearsal"]
        assert f"{vm} on host {moved_to}" in rehearsal["overlay"], rehearsal
        (step,) = rehearsal["steps"]
        assert step["outcome"] == "succeeds", step["answer"]
        # The move on the twin starts where the gate read the VM (not where it was captured).
        (change,) = [d for d in rehearsal["diff"] if (d["object"], d["field"]) == (vm, "host")]
        assert before[f"HostSystem:{change['before']}"]["name"] == moved_to, change
        assert before[f"HostSystem:{change['after']}"]["name"] == start, change
    finally:
        govc_on_lab(lab, "vm.migrate", "-host", start, vm)
    assert lab_facts(lab, tmp_path / "after") == before


async def test_storage_steps_run_on_the_twin_and_nsx_steps_are_unknown_with_the_reason(
    lab: Lab, tmp_path: Path
) -> None:
    storage = lab.home / ".vmware-storage"  # the lab's storage skill, for the gate's own preview
    storage.mkdir(mode=0o700, exist_ok=True)
    (storage / "config.yaml").write_text((lab.home / ".vmware-monitor" / "config.yaml").read_text())
    home = tmp_path / "pilot"
    captured(lab, home)
    status = {
        "action": "iscsi_status",
        "skill": "storage",
        "tool": "get_iscsi_status",
        "params": {"host_name": "DC0_H0", "target": TARGET},
    }
    rescan = {
        "action": "rescan",
        "skill": "storage",
        "tool": "rescan_storage",
        "params": {"host_name": "DC0_H0", "confirm": True, "target": TARGET},
    }
    snap = {
        "action": "snapshot",
        "skill": "aiops",
        "tool": "create_vm_snapshot",
        "params": {"vm_name": "DC0_H0_VM0", "snapshot_name": "after-rescan", "target": TARGET},
    }
    before = lab_facts(lab, tmp_path / "before")
    async with pilot(lab, home) as client:
        wid = await create(client, [GATE, status, rescan])
        ran = await client.call("run_workflow", {"workflow_id": wid})
        assert ran.payload.get("outcome") == "awaiting_approval", ran.payload
        prediction = await prediction_of(client, wid)
    rehearsal = prediction["rehearsal"]
    assert rehearsal["status"] == "rehearsed", rehearsal
    first, second = rehearsal["steps"]
    # vmware-storage ran against the twin: its read answered, and its rescan refused in its own
    # words (vcsim has no host storage configuration to measure: the lab's own preview says so too).
    assert (first["skill"], first["outcome"]) == ("storage", "succeeds"), first
    assert (second["skill"], second["outcome"]) == ("storage", "refused"), second
    assert second["answer"].startswith(
        "rescan_storage refused on 'DC0_H0': could not read host_storage_config"
    )
    assert rehearsal["verdict"] == "fails" and rehearsal["diff"] == []

    # The lab has no NSX skill (Pilot will not even run a plan naming it there), so the rehearsal
    # is asked directly, on the same capture: the NSX step is unknown, saying why, and the steps
    # after it are still rehearsed, through the real aiops on the twin.
    segments = Step(1, "segments", "nsx", "list_segments", {"target": TARGET})
    on_twin = Step(2, "snapshot", "aiops", "create_vm_snapshot", dict(snap["params"]))
    settings = TwinSettings(
        mode="required", home=home, govc=str(GOVC), skill_commands={"aiops": lab.command("aiops")}
    )
    gate = Step(0, "require_approval", "pilot", "approve", {"message": "Go?"})
    released = [segments, on_twin]
    record = await Rehearser(settings).rehearse(
        released, [gate, *released], {}, lambda step, _: dict(step.params)
    )
    assert record is not None and record["status"] == "rehearsed", record
    nsx, after = record["steps"]
    assert nsx["outcome"] == "unknown", nsx
    assert (
        nsx["answer"] == "vmware-nsx needs an NSX manager, which a twin (a vCenter simulator) does not have"
    )
    assert after["outcome"] == "succeeds", after
    assert (record["verdict"], record["reason"]) == ("unknown", f"step 1 not rehearsed: {nsx['answer']}")
    said = with_rehearsal(Prediction(verdict="succeeds"), record)
    assert "step 1 not rehearsed: vmware-nsx needs an NSX manager" in said.summary
    assert lab_facts(lab, tmp_path / "after") == before


async def test_an_approved_delete_carries_the_acknowledgement_of_the_gate_s_preview(tmp_path: Path) -> None:
    """The real run: a plan that deletes a VM gives no acknowledgement; aiops deletes only because
    Pilot echoes the acknowledge_with of the preview the approver was shown. On a lab of its own
    (a VM deleted cannot be put back, and this vcsim cannot preview the deletion of a VM made
    for the test)."""
    vm = "DC0_H0_VM1"
    with running_lab(tmp_path / "own") as own:
        off = await call_companion(
            own, "aiops", "power_off_vm", {"vm_name": vm, "force": True, "confirm": True, "target": TARGET}
        )
        assert not off.is_error, off.text
        delete = {
            "action": "delete",
            "skill": "aiops",
            "tool": "delete_vm",
            "params": {"vm_name": vm, "confirm": True, "target": TARGET},
        }
        async with pilot(own, tmp_path / "pilot", VMWARE_PILOT_TWIN="off") as client:
            wid = await create(client, [GATE, delete])
            ran = await client.call("run_workflow", {"workflow_id": wid})
            assert ran.payload["outcome"] == "awaiting_approval", ran.payload
            said = await prediction_of(client, wid)
            assert said["verdict"] == "succeeds", said["summary"]
            done = await client.call("approve", {"workflow_id": wid, "approver": "alice"})
            assert done.payload.get("outcome") == "completed", done.payload
            status = (await client.call("get_workflow_status", {"workflow_id": wid})).payload
        (step,) = [s for s in status["steps"] if s["tool"] == "delete_vm"]
        assert "acknowledge_blast_radius" not in str(step.get("params")), step  # not in the plan
        listed = await call_companion(own, "monitor", "list_virtual_machines", {"target": TARGET})
        names = [item["name"] for item in listed.data["items"]]
        assert vm not in names and "DC0_H0_VM0" in names, names
