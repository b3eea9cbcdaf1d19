"""The skill catalog follows the installed skills without a hidden step: a dispatching Pilot
refreshes it when the cache is missing or older than what is installed, and a gate that still
shows an unclassified tool says how to fix it. (On the real skills: tests/lab/test_catalog_refresh.py.)"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import FAKE_SERVERS
from vmware_pilot.app import CatalogFile, read_catalog, refresh_stale_catalog
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.discovery import installed_skills, stale_reason
from vmware_pilot.engine.gateview import GateView, ReleasedStep

PAGED = shlex.join([sys.executable, str(FAKE_SERVERS / "paged_server.py")])
BIN = Path(sys.executable).parent


@pytest.fixture
def skills_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding only the skills a test installs there."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


def _install(folder: Path, skill: str, server: Path = FAKE_SERVERS / "paged_server.py") -> Path:
    """A `vmware-<skill>-mcp` program, as pipx or uv would put one on PATH."""
    program = folder / f"vmware-{skill}-mcp"
    program.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(server))} "$@"\n')
    program.chmod(0o755)
    return program


def test_installed_skills_names_each_found_server_and_when_it_last_changed(skills_bin: Path) -> None:
    program = _install(skills_bin, "aiops")
    first = installed_skills()
    assert list(first) == ["aiops"] and first["aiops"].startswith(f"{program} @")
    os.utime(program, ns=(1, 1))  # an upgrade rewrites the program
    assert installed_skills() != first
    _install(skills_bin, "monitor")
    assert set(installed_skills()) == {"aiops", "monitor"}


def test_stale_reason_compares_the_cache_with_what_is_installed() -> None:
    installed = {"aiops": "/bin/vmware-aiops-mcp @1"}
    assert stale_reason({}, {}) == ""  # nothing installed: nothing to learn
    assert stale_reason({}, installed) == "there is no catalog cache yet"
    assert "changed" in stale_reason({"refreshed_at": "x"}, installed)  # written before the record
    assert "changed" in stale_reason({"installed": {"aiops": "/bin/vmware-aiops-mcp @0"}}, installed)
    assert stale_reason({"installed": dict(installed)}, installed) == ""


def test_a_stale_catalog_is_refreshed_once_then_left_alone(skills_bin: Path, pilot_home: Path) -> None:
    settings = Settings(home=pilot_home, skill_commands={"vks": PAGED})
    assert not settings.catalog_cache_path.exists()
    report = refresh_stale_catalog(settings, None)
    assert report is not None and [(r.skill, r.status) for r in report.results if r.skill == "vks"] == [
        ("vks", "discovered")
    ]
    data = json.loads(settings.catalog_cache_path.read_text())
    assert data["installed"] == installed_skills(settings.skill_commands)
    assert (
        read_catalog(CatalogFile(settings.catalog_cache_path)).tool("vks", "tool_3") is not None
    )  # still readable
    assert refresh_stale_catalog(settings, None) is None  # current: no server started
    moved = Settings(home=pilot_home, skill_commands={"vks": PAGED + " --other"})
    assert refresh_stale_catalog(moved, None) is not None  # its command changed


@pytest.mark.slow  # starts a process of its own (README, Tests)
def test_the_catalog_cache_in_the_database_is_refreshed_too(
    database: object, skills_bin: Path, pilot_home: Path
) -> None:
    # ``database`` first: its PostgreSQL starts before PATH holds only the test's skills.
    from vmware_pilot.app import catalog_texts, shared_store

    settings = Settings(home=pilot_home, skill_commands={"vks": PAGED})  # the URL from the environment
    store = shared_store(settings)  # the process's one store (None: the SQLite home, the file cache)
    try:
        assert refresh_stale_catalog(settings, store) is not None
        if store is not None:
            assert read_catalog(catalog_texts(settings, store)).tool("vks", "tool_3") is not None
            assert not settings.catalog_cache_path.exists()
        assert refresh_stale_catalog(settings, store) is None
    finally:
        if store is not None:
            store.close()


def _release(tier: str) -> ReleasedStep:
    return ReleasedStep(
        index=2, action="snap", skill="aiops", tool="create_vm_snapshot", params={}, tier=tier,
        why="it is not in the skill catalog and its name says nothing about what it changes", undo="none",
    )  # fmt: skip


def test_a_gate_with_an_unclassified_tool_says_how_to_fix_it() -> None:
    view = GateView(
        workflow_id="wf-1", workflow_type="custom", state="awaiting_approval", releases=[_release("unknown")]
    )
    (alert,) = view.alerts()
    assert alert.startswith(
        "Step 2 (aiops.create_vm_snapshot) is unclassified: it is not in the skill catalog"
    )
    assert "`vmware-pilot catalog refresh`" in alert
    known = GateView(
        workflow_id="wf-1", workflow_type="custom", state="awaiting_approval", releases=[_release("write")]
    )
    assert known.alerts() == []


@pytest.mark.slow  # the CLI process and the skill server it probes
def test_a_dispatching_command_refreshes_a_missing_catalog_first(skills_bin: Path, pilot_home: Path) -> None:
    _install(skills_bin, "vks")
    steps = pilot_home.parent / "steps.yaml"
    steps.write_text("- {action: three, skill: vks, tool: tool_3, params: {n: 1}}\n")
    done = subprocess.run(
        [str(BIN / "vmware-pilot"), "review", "wf-none"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "PATH": str(skills_bin)},
    )  # fmt: skip
    assert done.returncode == 2 and not (pilot_home / "catalog.json").exists()  # a reader never probes
    done = subprocess.run(
        [str(BIN / "vmware-pilot"), "run", "--steps", str(steps), "--dispatch", "--yes"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "PATH": str(skills_bin)},
    )  # fmt: skip
    assert "Refreshed the skill catalog from the installed skills (vks)." in done.stderr, done.stderr
    assert json.loads((pilot_home / "catalog.json").read_text())["installed"].keys() == {"vks"}
