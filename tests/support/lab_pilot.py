"""Pilot on the lab: a dispatching `vmware-pilot mcp` over stdio (``pilot``), its command line
(``cli``), and the steps and flows the lab tests share (a gate, reads, a power-off, a rolling
restart waiting at its gate)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.support.lab_harness import TARGET, Lab, call_companion, power_state
from vmware_pilot.transports.client import PilotClient, connect_stdio, server_command

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Proceed?"}}


def read(tool: str, **params: Any) -> dict[str, Any]:
    return {"action": tool, "skill": "monitor", "tool": tool, "params": {"target": TARGET, **params}}


def power_off(vm: str) -> dict[str, Any]:
    return {
        "action": f"power_off_{vm}",
        "skill": "aiops",
        "tool": "power_off_vm",
        "params": {"vm_name": vm, "force": True, "confirm": True, "target": TARGET},
        "rollback_tool": "power_on_vm",
        "rollback_params": {"vm_name": vm, "target": TARGET},
    }


@asynccontextmanager
async def pilot(lab: Lab, home: Path, **settings: str) -> AsyncIterator[PilotClient]:
    env = {**lab.env, "VMWARE_PILOT_HOME": str(home), "VMWARE_PILOT_DISPATCH": "stdio", **settings}
    command, args = server_command()
    with (home.parent / f"{home.name}-pilot.log").open("a") as errlog:
        async with connect_stdio(command, args, env=env, errlog=errlog) as client:
            yield client


async def create(client: PilotClient, steps: list[dict[str, Any]]) -> str:
    reply = await client.call("create_workflow", {"name": "lab-ops", "description": "lab", "steps": steps})
    assert not reply.is_error, reply.payload
    wid: str = reply.payload["workflow_id"]
    return wid


async def ensure_on(lab: Lab, vm: str) -> None:
    if await power_state(lab, vm) != "poweredOn":
        answer = await call_companion(lab, "aiops", "power_on_vm", {"vm_name": vm, "target": TARGET})
        assert not answer.is_error, answer.text


CLI = Path(sys.executable).with_name("vmware-pilot")


async def restart_at_gate(client: PilotClient, vm: str) -> str:
    made = await client.call(
        "create_workflow_from_template",
        {"workflow_type": "rolling_restart", "params": {"vm_names": [vm], "target": TARGET}},
    )
    assert not made.is_error, made.payload
    wid = str(made.payload["workflow_id"])
    ran = await client.call("run_workflow", {"workflow_id": wid})
    assert ran.payload["outcome"] == "awaiting_approval", ran.payload
    return wid


async def prediction_of(client: PilotClient, wid: str) -> dict[str, Any]:
    status = await client.call("get_workflow_status", {"workflow_id": wid})
    assert not status.is_error, status.payload
    found: dict[str, Any] = status.payload["prediction"]
    return found


def cli(
    lab: Lab, home: Path, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`vmware-pilot ARGS` with its home at ``home``, dispatching to ``lab``'s skills."""
    env = {**lab.env, "VMWARE_PILOT_HOME": str(home), "COLUMNS": "250", **(extra_env or {})}
    return subprocess.run(
        [str(CLI), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
