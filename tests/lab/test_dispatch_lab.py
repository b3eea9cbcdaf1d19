"""Dispatch on the lab: a real `vmware-pilot mcp --dispatch` runs steps in the real companion
skills (vmware-monitor, vmware-aiops from PyPI) against govmomi's vCenter simulator."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from mcp import MCPError

from tests.support.lab_harness import TARGET, Lab, power_state
from tests.support.lab_pilot import GATE, create, ensure_on, pilot, power_off, read

pytestmark = pytest.mark.lab


def companion_children(skill: str, home: Path) -> list[int]:
    """Pids of `vmware-<skill>-mcp` processes started by the Pilot server serving ``home``.

    Only this test's server counts (its environment names ``home``): other Pilots running on the
    machine, and their companions, are left alone."""
    marker = f"VMWARE_PILOT_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            parent_env = (Path("/proc") / str(ppid) / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if f"vmware-{skill}-mcp" in cmd and marker in parent_env:
            found.append(int(entry.name))
    return found


async def test_reads_gate_approve_power_off_completes(lab: Lab, tmp_path: Path) -> None:
    vm = "DC0_H0_VM0"
    await ensure_on(lab, vm)
    async with pilot(lab, tmp_path / "pilot") as client:
        wid = await create(client, [read("get_vm_info", vm_name=vm), read("get_alarms"), GATE, power_off(vm)])
        run = await client.call("run_workflow", {"workflow_id": wid})
        assert run.payload["outcome"] == "awaiting_approval", run.payload
        assert [s["status"] for s in run.payload["steps"][:2]] == ["success", "success"]
        assert run.payload["steps"][0]["result"]["power_state"] == "poweredOn"
        assert "pending_dispatch" not in run.payload

        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        result = await client.session.call_tool(
            "approve", {"workflow_id": wid, "approver": "alice"}, progress_callback=on_progress
        )
        assert not result.is_error
        done = result.structured_content
        assert done is not None and done["outcome"] == "completed" and done["state"] == "completed", done
        assert done["steps"][3]["result"]["action"] == "powered_off"
        assert any("power_off_vm" in (m or "") for _, _, m in progress), progress
    assert await power_state(lab, vm) == "poweredOff"


async def test_failure_after_a_change_rolls_back_and_restores_the_vm(lab: Lab, tmp_path: Path) -> None:
    vm = "DC0_H0_VM1"
    await ensure_on(lab, vm)
    broken = {
        "action": "bad",
        "skill": "aiops",
        "tool": "power_off_vm",
        "params": {"vm_name": "no-such-vm", "force": True, "confirm": True, "target": TARGET},
    }
    async with pilot(lab, tmp_path / "pilot") as client:
        wid = await create(client, [GATE, power_off(vm), broken, read("get_alarms")])
        await client.call("run_workflow", {"workflow_id": wid})
        # The gate foresees the failure (aiops' preview of step 2 fails): approving takes a reason.
        told = await client.call("approve", {"workflow_id": wid, "approver": "alice"})
        assert told.is_error and told.payload["refused"] == "predicted_failure", told.payload
        assert told.payload["failing_step"] == 2
        failed = await client.call(
            "approve",
            {
                "workflow_id": wid,
                "approver": "alice",
                "acknowledge_predicted_failure": "step 2 breaks on purpose",
            },
        )
        assert failed.is_error and failed.payload["outcome"] == "failed"
        assert [s["status"] for s in failed.payload["steps"]] == ["success", "success", "failed", "skipped"]
        assert await power_state(lab, vm) == "poweredOff"

        preview = await client.call("rollback", {"workflow_id": wid})
        assert not preview.is_error and preview.payload["action"] == "preview"
        assert [e["index"] for e in preview.payload["blast_radius"]["would_roll_back"]] == [1]
        assert await power_state(lab, vm) == "poweredOff", "a preview changes nothing"

        done = await client.call("rollback", {"workflow_id": wid, "confirm": True})
        assert not done.is_error, done.payload
        assert done.payload["action"] == "rolled_back"
        assert done.payload["steps"][1]["status"] == "rolled_back"
    assert await power_state(lab, vm) == "poweredOn"


async def test_companion_killed_mid_call_interrupts_and_is_settled_once_the_call_landed(
    lab: Lab, tmp_path: Path
) -> None:
    vm = "DC0_C0_RP0_VM0"
    await ensure_on(lab, vm)
    lab.set_delay("PowerOffVM_Task", 8000)
    try:
        async with pilot(lab, tmp_path / "pilot") as client:
            wid = await create(client, [GATE, power_off(vm), read("get_alarms")])
            await client.call("run_workflow", {"workflow_id": wid})
            approve = asyncio.create_task(client.call("approve", {"workflow_id": wid, "approver": "alice"}))
            victims: list[int] = []
            for _ in range(100):
                await asyncio.sleep(0.1)
                status = await client.call("get_workflow_status", {"workflow_id": wid})
                victims = companion_children("aiops", tmp_path / "pilot")
                if status.payload.get("in_flight") and victims:
                    break
            assert status.payload["in_flight"][0]["index"] == 1, "status shows the step in flight"
            assert victims, "the aiops server Pilot started was not found"
            # Let the server finish its handshake and send PowerOffVM_Task, held 8 s by the simulator.
            await asyncio.sleep(3)
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            reply = await approve
            assert reply.payload["outcome"] == "failed"
            assert reply.payload["steps"][1]["status"] == "interrupted"
            assert "UNKNOWN" in reply.payload["steps"][1]["result"]["error"]

            # Read right after: the VM is still on, and the call may still land.
            assert reply.payload["steps"][1]["result"]["settled"]["effect"] == "unknown"
            # The abandoned power-off did land: the rollback reads again, settles the step as
            # applied and undoes it without acknowledge_unknown_effects.
            for _ in range(150):
                if await power_state(lab, vm) == "poweredOff":
                    break
                await asyncio.sleep(0.1)
            assert await power_state(lab, vm) == "poweredOff"
            done = await client.call("rollback", {"workflow_id": wid, "confirm": True})
            assert not done.is_error, done.payload
            assert done.payload["action"] == "rolled_back"
            assert done.payload["blast_radius"]["unknown_effects_count"] == 0
    finally:
        lab.set_delay("PowerOffVM_Task", 0)
    assert await power_state(lab, vm) == "poweredOn"


async def test_four_read_group_runs_concurrently(lab: Lab, tmp_path: Path) -> None:
    group = [
        {**read("list_virtual_machines"), "group_id": "g"},
        {**read("list_esxi_hosts"), "group_id": "g"},
        {**read("get_alarms"), "group_id": "g"},
        {**read("get_vm_info", vm_name="DC0_H0_VM1"), "group_id": "g"},
    ]
    async with pilot(lab, tmp_path / "pilot") as client:
        wid = await create(client, group)
        reply = await client.call("run_workflow", {"workflow_id": wid})
        assert reply.payload["outcome"] == "completed", reply.payload
        steps = reply.payload["steps"]
        assert all(s["status"] == "success" for s in steps)
        vm_names = (
            {v.get("name") for v in steps[0]["result"]} if isinstance(steps[0]["result"], list) else set()
        )
        assert "DC0_H0_VM0" in vm_names or "DC0_H0_VM0" in str(steps[0]["result"])
        # The run asked for four sessions: the first took the reads as they came while the others
        # started behind it, one at a time, and join the pool.
        for _ in range(600):
            if len(companion_children("monitor", tmp_path / "pilot")) == 4:
                break
            await asyncio.sleep(0.1)
        servers = companion_children("monitor", tmp_path / "pilot")
        assert len(servers) == 4
        # Warm: the next run of the group takes the four open sessions and starts none.
        again = await client.call("run_workflow", {"workflow_id": await create(client, group)})
        assert again.payload["outcome"] == "completed", again.payload
        assert sorted(companion_children("monitor", tmp_path / "pilot")) == sorted(servers)


async def test_run_goes_on_when_the_client_gives_up_waiting(lab: Lab, tmp_path: Path) -> None:
    vm = "DC0_C0_RP0_VM1"
    await ensure_on(lab, vm)
    lab.set_delay("PowerOffVM_Task", 2500)
    try:
        async with pilot(lab, tmp_path / "pilot") as client:
            wid = await create(client, [GATE, power_off(vm)])
            await client.call("run_workflow", {"workflow_id": wid})
            with pytest.raises(MCPError):
                await client.session.call_tool(
                    "approve",
                    {"workflow_id": wid, "approver": "alice"},
                    read_timeout_seconds=0.5,
                )
            racing = await client.call("approve", {"workflow_id": wid, "approver": "bob"})
            assert racing.is_error and "running" in racing.payload["error"]
            state = ""
            for _ in range(100):
                await asyncio.sleep(0.1)
                state = (await client.call("get_workflow_status", {"workflow_id": wid})).payload["state"]
                if state == "completed":
                    break
            assert state == "completed"
    finally:
        lab.set_delay("PowerOffVM_Task", 0)
    assert await power_state(lab, vm) == "poweredOff"
    await ensure_on(lab, vm)
