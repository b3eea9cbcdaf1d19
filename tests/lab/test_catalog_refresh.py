"""`vmware-pilot catalog refresh|show` through the installed entry point, against the real
vmware-monitor and vmware-aiops servers of the lab venv."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support import FAKE_SERVERS
from tests.support.lab_harness import Lab
from tests.support.lab_pilot import cli, pilot
from vmware_pilot.app import CatalogFile, read_catalog
from vmware_pilot.catalog.curated import CURATED

pytestmark = pytest.mark.lab

CRASH = FAKE_SERVERS / "crash_server.py"
# The companions the lab installs (scripts/lab/companions.txt): each is discovered by a refresh.
LAB_SKILLS = ("aiops", "monitor", "storage")


def by_skill(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["skill"]: entry for entry in payload["skills"]}


def tools_by_name(tools: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in tools}


@pytest.fixture(scope="module")
def refreshed(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    home = tmp_path_factory.mktemp("pilot-home")
    return home, cli(lab, home, "catalog", "refresh", "--json")


def test_refresh_discovers_the_installed_skills_and_reports_the_rest(
    refreshed: tuple[Path, subprocess.CompletedProcess[str]], lab: Lab
) -> None:
    _, done = refreshed
    assert done.returncode == 0, done.stderr

    skills = by_skill(json.loads(done.stdout))
    assert list(skills) == list(CURATED)
    for name in LAB_SKILLS:
        assert skills[name]["status"] == "discovered"
        assert skills[name]["version"] == "2.4.2"
        assert skills[name]["command"] == lab.command(name)  # found on PATH, in the lab venv
        assert skills[name]["tools"] > (20 if name != "storage" else 0)
    assert {s["status"] for n, s in skills.items() if n not in LAB_SKILLS} == {"not_installed"}
    assert "uv tool install vmware-nsx-mgmt" in skills["nsx"]["hint"]
    assert "aiops: " in done.stderr and "nsx: not installed" in done.stderr


def test_the_cache_is_private_and_holds_real_schemas_and_annotations(
    refreshed: tuple[Path, subprocess.CompletedProcess[str]], companion_tools: dict[str, Any]
) -> None:
    home, done = refreshed
    cache = home / "catalog.json"
    assert cache.stat().st_mode & 0o777 == 0o600
    data = json.loads(cache.read_text())
    assert set(data) == {"refreshed_at", "installed", *LAB_SKILLS}
    assert set(data["installed"]) == set(LAB_SKILLS)

    aiops = tools_by_name(data["aiops"]["tools"])
    monitor = tools_by_name(data["monitor"]["tools"])
    assert by_skill(json.loads(done.stdout))["aiops"]["tools"] == len(aiops)
    assert "confirm" in aiops["power_off_vm"]["inputSchema"]["properties"]
    assert aiops["power_off_vm"]["annotations"]["destructiveHint"] is True
    assert "confirm" not in aiops["power_on_vm"]["inputSchema"]["properties"]
    assert monitor["get_alarms"]["annotations"]["readOnlyHint"] is True
    # Same pinned versions as the snapshot in tests/data: the same tools, schemas and annotations.
    for skill, found in (("aiops", aiops), ("monitor", monitor)):
        snapshot = tools_by_name(companion_tools[skill]["tools"])  # type: ignore[index]
        assert set(found) == set(snapshot)
        for name, tool in found.items():
            assert tool["inputSchema"] == snapshot[name]["inputSchema"], name
            assert tool["annotations"] == snapshot[name]["annotations"], name
    assert read_catalog(CatalogFile(cache)).has_tool("aiops", "power_off_vm") is True


def test_show_lists_discovered_tools_with_their_risk(
    refreshed: tuple[Path, subprocess.CompletedProcess[str]], lab: Lab
) -> None:
    home, _ = refreshed

    done = cli(lab, home, "catalog", "show", "vmware-aiops", "--json")

    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["discovered"] is True and view["version"] == "2.4.2"
    tools = tools_by_name(view["tools"])
    assert tools["power_off_vm"]["source"] == "curated" and tools["power_off_vm"]["risk"] == "high"
    assert tools["power_off_vm"]["on_server"] is True
    assert "confirm" in tools["power_off_vm"]["inputSchema"]["properties"]
    # Not curated: risk from the annotations the real server published.
    assert tools["list_vm_snapshots"]["source"] == "discovered"
    assert tools["list_vm_snapshots"]["risk"] == "low"  # readOnlyHint
    assert tools["delete_vm"]["risk"] == "high"  # destructiveHint
    assert tools["create_vm"]["risk"] == "medium"  # a write, destructiveHint false
    assert "power_on_vm" in tools and len(tools) >= 61


def test_show_without_a_refresh_lists_curated_entries_only(lab: Lab, tmp_path: Path) -> None:
    done = cli(lab, tmp_path / "fresh-home", "catalog", "show", "aiops", "--json")

    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["discovered"] is False
    assert {t["source"] for t in view["tools"]} == {"curated"}
    assert {t["on_server"] for t in view["tools"]} == {None}


def test_a_broken_skill_server_fails_the_refresh_but_not_the_others(lab: Lab, tmp_path: Path) -> None:
    home = tmp_path / "home"
    broken = json.dumps({"nsx": shlex.join([sys.executable, str(CRASH)])})

    done = cli(lab, home, "catalog", "refresh", "--json", extra_env={"VMWARE_PILOT_SKILL_COMMANDS": broken})

    assert done.returncode == 1
    skills = by_skill(json.loads(done.stdout))
    assert skills["nsx"]["status"] == "failed"
    assert "cannot read config: boom" in skills["nsx"]["error"]
    assert skills["aiops"]["status"] == skills["monitor"]["status"] == "discovered"
    assert set(json.loads((home / "catalog.json").read_text())) == {"refreshed_at", "installed", *LAB_SKILLS}
    assert "nsx: FAILED" in done.stderr


def test_refresh_prints_a_summary_table_by_default(lab: Lab, tmp_path: Path) -> None:
    done = cli(
        lab, tmp_path / "home", "catalog", "refresh", "--skill", "monitor", extra_env={"COLUMNS": "200"}
    )

    assert done.returncode == 0, done.stderr
    assert "monitor" in done.stdout and "ok, version 2.4.2" in done.stdout
    assert "1 skill(s) discovered" in done.stdout


SNAPSHOT = {
    "action": "snapshot",
    "skill": "aiops",
    "tool": "create_vm_snapshot",
    "params": {"vm_name": "DC0_H0_VM0", "snapshot_name": "before", "target": "lab"},
}


async def _risk_and_answer(lab: Lab, home: Path, dispatch: str) -> tuple[str | None, dict[str, Any]]:
    """What a fresh Pilot (no catalog.json) says of aiops.create_vm_snapshot: its catalog risk, and
    its answer to a plan that runs it without a gate."""

    async with pilot(lab, home, VMWARE_PILOT_DISPATCH=dispatch) as client:
        catalog = await client.call("get_skill_catalog", {})
        created = await client.call(
            "create_workflow", {"name": "snap", "description": "lab", "steps": [SNAPSHOT]}
        )
    entry = catalog.payload["aiops"]["tools"].get("create_vm_snapshot")
    return (entry or {}).get("risk"), created.payload


async def test_a_dispatching_pilot_classifies_installed_tools_without_a_manual_refresh(
    lab: Lab, tmp_path: Path
) -> None:
    # Handing steps back, Pilot starts no skill: the installed aiops's tool stays unclassified, so
    # a plan running it without a gate is refused as an unknown change.
    risk, answer = await _risk_and_answer(lab, tmp_path / "hand-back", "")
    assert risk is None
    assert [v["kind"] for v in answer["approval_gate_violations"]] == ["ungated_unclassified"]
    assert not (tmp_path / "hand-back" / "catalog.json").exists()
    # With dispatch, the first call finds the catalog refreshed from the installed skills: the
    # skill's own annotations make it a write that is not destructive, which needs no gate.
    home = tmp_path / "dispatch"
    risk, answer = await _risk_and_answer(lab, home, "stdio")
    assert risk == "medium"
    assert "error" not in answer and answer["state"] == "pending", answer
    cache = json.loads((home / "catalog.json").read_text())
    assert set(cache["installed"]) == set(LAB_SKILLS)
