"""`vmware-pilot demo` through its real entry point: it starts the MCP server and walks a template."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent / "vmware-pilot"


def _demo(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "140", **(env_extra or {})}
    return subprocess.run(
        [str(BIN), "demo", *args], check=False, capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.slow  # the demo process and the server it starts
def test_demo_walks_the_flow_and_prints_each_step(pilot_home: Path) -> None:
    result = _demo()
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for fragment in (
        "vmware-pilot",
        "create_workflow_from_template(incident_response)",
        "review_workflow → verdict approved",
        "run_workflow → outcome awaiting_approval",
        "monitor.get_alarms",
        "approve without acknowledgement → refused",
        "outcome dispatch_required",
        "aiops.acknowledge_vcenter_alarm",
        "get_workflow_status → state pending",
        "reported_done",
        "rollback (preview",
        "not_reversible_outside_pilot",
    ):
        assert fragment in out, fragment
    assert "{\n" not in out  # readable panels, not raw JSON
    assert not pilot_home.exists()  # a throw-away home: the user's pilot home is never touched


@pytest.mark.slow
def test_demo_json_prints_raw_results_in_order(tmp_path: Path) -> None:
    home = tmp_path / "demo-home"
    result = _demo("--json", "--home", str(home))
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert [r["tool"] for r in record] == [
        "create_workflow_from_template",
        "review_workflow",
        "run_workflow",
        "approve",
        "approve",
        "get_workflow_status",
        "rollback",
    ]
    assert [r["isError"] for r in record] == [False, False, False, True, False, False, False]
    assert record[2]["result"]["outcome"] == "awaiting_approval"
    assert record[3]["result"]["not_executed_before_gate"]
    assert record[-1]["result"]["action"] == "preview"
    assert (home / "pilot.db").exists()  # --home keeps the demo workflow
