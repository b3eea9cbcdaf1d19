"""The server log of a lab run: a real `vmware-pilot mcp --transport http --dispatch` runs a step
the real companion refuses (a VM that does not exist), clients come and go, and the log has no
traceback: the companion's stderr is at DEBUG, the SDK's disconnect noise is one DEBUG line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.lab_harness import TARGET, Lab
from tests.support.server_proc import PILOT, clean_env, start_server
from vmware_pilot.transports.client import connect_http

pytestmark = pytest.mark.lab


async def test_a_refused_step_and_disconnects_leave_no_traceback_in_the_log(lab: Lab, tmp_path: Path) -> None:
    secret = subprocess.run(
        [str(PILOT), "token", "create", "alice"], env=clean_env(tmp_path, lab.env), cwd=tmp_path,
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.strip()  # fmt: skip
    step = {
        "action": "look",
        "skill": "monitor",
        "tool": "get_vm_info",
        "params": {"vm_name": "no-such-vm", "target": TARGET},
    }
    with start_server(tmp_path, ["--transport", "http", "--dispatch"], env=lab.env) as server:
        for _ in range(2):  # two sessions: each ends with a disconnect
            async with connect_http(server.url, secret) as client:
                created = await client.call(
                    "create_workflow", {"name": "lab-log", "description": "a refused read", "steps": [step]}
                )
                workflow_id = created.payload["workflow_id"]
                ran = await client.call("run_workflow", {"workflow_id": workflow_id})
                assert ran.payload["outcome"] == "failed", ran.payload
                assert ran.payload["steps"][0]["status"] == "failed"
        assert server.stop() == 0
    log = server.stderr()
    assert "Traceback" not in log, log
    assert "Error in standalone SSE writer" not in log
    assert "vmware_pilot.skill." not in log  # the companion's own stderr stays at DEBUG
    assert len(log.splitlines()) < 20, log
