"""`vmware-pilot doctor` through the entry point on the lab: all well with the real companions,
and a missing skill named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.lab_harness import TARGET, Lab
from tests.support.lab_pilot import cli

pytestmark = pytest.mark.lab


def test_doctor_on_the_lab_says_all_is_well(lab: Lab, tmp_path: Path) -> None:
    done = cli(lab, tmp_path / "home", "doctor", "--json", "--target", TARGET)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    rows = {row["check"]: row for row in report["checks"]}
    for skill in ("aiops", "monitor", "storage"):  # the lab's companions
        row = rows[f"skill {skill}"]
        assert row["status"] == "ok", row
        assert f"vmware-{skill}-mcp" in row["detail"] and " tools" in row["detail"]
        assert f"answered on {TARGET}" in row["detail"], row
    assert rows["skill nsx"]["status"] == "info"  # not installed, and not required
    assert lab.simulator.password not in done.stdout


def test_doctor_names_a_missing_skill_and_a_target_no_config_has(lab: Lab, tmp_path: Path) -> None:
    done = cli(lab, tmp_path / "home", "doctor", "--skill", "nsx", "--target", "elsewhere")
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("Not well:") and "skill nsx" in last
    assert "skill aiops" in last and "skill monitor" in last  # their configs have no target 'elsewhere'
    assert "vmware-nsx" in done.stdout
