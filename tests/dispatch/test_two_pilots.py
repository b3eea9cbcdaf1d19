"""Two `vmware-pilot mcp --dispatch` servers on one pilot home, as two MCP clients each start one.

While the first runs a step, the second must see a workflow that is running, not a crash.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.support import FAKE_SKILL
from vmware_pilot.transports.client import connect_stdio, server_command

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
SLOW = {"action": "slow", "skill": "aiops", "tool": "slow", "params": {"seconds": 3}}


@pytest.mark.slow
async def test_a_second_pilot_does_not_take_a_live_run_for_a_crash(pilot_home: Path, tmp_path: Path) -> None:
    env = {
        "VMWARE_PILOT_HOME": str(pilot_home),
        "VMWARE_PILOT_DISPATCH": "stdio",
        "VMWARE_PILOT_SKILL_COMMANDS": json.dumps(
            {"aiops": shlex.join([sys.executable, str(FAKE_SKILL), "ok"])}
        ),
    }
    command, args = server_command()
    with (tmp_path / "pilots.log").open("w") as log:
        async with (
            connect_stdio(command, args, env=env, errlog=log) as first,
            connect_stdio(command, args, env=env, errlog=log) as second,
        ):
            created = await first.call(
                "create_workflow", {"name": "two", "description": "d", "steps": [GATE, SLOW]}
            )
            wid = created.payload["workflow_id"]
            assert (await first.call("run_workflow", {"workflow_id": wid})).payload[
                "outcome"
            ] == "awaiting_approval"
            approving = asyncio.create_task(first.call("approve", {"workflow_id": wid, "approver": "alice"}))
            for _ in range(100):
                status = await second.call("get_workflow_status", {"workflow_id": wid})
                if status.payload.get("in_flight"):
                    break
                await asyncio.sleep(0.05)
            assert status.payload["in_flight"][0]["index"] == 1
            assert status.payload["in_flight"][0]["run_by"].startswith("pid ")

            refused = await second.call("run_workflow", {"workflow_id": wid})
            assert refused.is_error and "running in another Pilot process" in refused.payload["error"]
            assert "outcome" not in refused.payload

            done = await approving
            assert not done.is_error, done.payload
            assert (done.payload["outcome"], done.payload["steps"][1]["status"]) == ("completed", "success")
            final = await second.call("get_workflow_status", {"workflow_id": wid})
            assert final.payload["state"] == "completed"
            assert "interrupted_step_detected" not in [e["action"] for e in final.payload["audit_log"]]
