"""Discovery against small fake servers, for what real skills cannot be made to do: paginate,
crash at start, hang. The real skills are probed in tests/lab/test_catalog_refresh.py."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from tests.support import FAKE_SERVERS
from vmware_pilot.app import CatalogFile, read_catalog
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.discovery import probe_skill, refresh_catalog, write_cache


def fake(name: str, *args: str) -> str:
    return shlex.join([sys.executable, str(FAKE_SERVERS / name), *args])


@pytest.fixture(autouse=True)
def _empty_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No real skill on PATH: only the fakes configured per test exist."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow  # starts a process of its own (README, Tests)
async def test_all_pages_of_tools_are_collected_with_schemas_and_annotations() -> None:
    result = await probe_skill("vks", overrides={"vks": fake("paged_server.py")}, server_timeout=30)

    assert result.status == "discovered", result.error
    assert result.version == "9.9"
    assert [t["name"] for t in result.tools] == [f"tool_{i}" for i in range(5)]
    first = result.tools[0]
    assert first["description"].startswith("Tool number 0.")
    assert first["inputSchema"]["required"] == ["n"]
    assert first["annotations"] == {"readOnlyHint": True, "destructiveHint": False}
    assert result.command.endswith("paged_server.py")


async def test_a_server_that_dies_at_start_is_reported_with_its_last_stderr_line() -> None:
    result = await probe_skill("nsx", overrides={"nsx": fake("crash_server.py")}, server_timeout=30)

    assert result.status == "failed"
    assert "closed the connection during initialize" in result.error
    assert "cannot read config: boom" in result.error
    assert "crash_server.py" in result.command
    assert result.tools == ()


@pytest.mark.slow  # waits out the server timeout
async def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    result = await probe_skill(
        "avi", overrides={"avi": fake("hang_server.py", str(pid_file))}, server_timeout=1
    )

    assert result.status == "failed"
    assert "no answer to initialize within 1 s" in result.error
    assert not _alive(int(pid_file.read_text()))


async def test_a_missing_skill_is_not_installed_and_a_bad_setting_is_a_failure() -> None:
    missing = await probe_skill("aria")
    misconfigured = await probe_skill("aria", overrides={"aria": "/no/such/server"})

    assert missing.status == "not_installed"
    assert "uv tool install vmware-aria" in missing.hint
    assert misconfigured.status == "failed"
    assert "VMWARE_PILOT_SKILL_COMMANDS" in misconfigured.hint


async def test_refresh_names_a_skill_whose_tool_environment_is_gone(pilot_home: Path, tmp_path: Path) -> None:
    # The skill's program is on PATH but its own environment (uv tool / pipx) was removed.
    gone = tmp_path / "tools" / "vmware-aria" / "bin" / "python"
    program = tmp_path / "empty-bin" / "vmware-aria-mcp"
    program.write_text(f"#!{gone}\nimport sys\n")
    program.chmod(0o755)

    report = await refresh_catalog(Settings(home=pilot_home), skills=["aria"], server_timeout=30)

    (result,) = report.results
    assert result.status == "failed"
    assert "environment of skill 'aria' is missing" in result.error and str(gone) in result.error
    assert "uv tool install --reinstall vmware-aria" in result.hint
    assert "pipx reinstall vmware-aria" in result.hint


async def test_refresh_writes_a_private_cache_that_the_catalog_reads(pilot_home: Path) -> None:
    settings = Settings(
        home=pilot_home, skill_commands={"vks": fake("paged_server.py"), "nsx": fake("crash_server.py")}
    )

    report = await refresh_catalog(settings, skills=["vks", "nsx", "aria"], server_timeout=30)

    assert [(r.skill, r.status) for r in report.results] == [
        ("vks", "discovered"),
        ("nsx", "failed"),
        ("aria", "not_installed"),
    ]
    path = settings.catalog_cache_path
    assert path.stat().st_mode & 0o777 == 0o600
    data = json.loads(path.read_text())
    assert set(data) == {"refreshed_at", "installed", "vks"}
    assert set(data["installed"]) == {"vks", "nsx"}  # what was found, whether it answered or not
    assert data["vks"]["version"] == "9.9"
    assert data["vks"]["refreshed_at"] == data["refreshed_at"] == report.refreshed_at
    catalog = read_catalog(CatalogFile(path))
    assert catalog.has_tool("vks", "tool_4") is True
    assert catalog.has_tool("vks", "tool_9") is False
    extra = catalog.tool("vks", "tool_3")
    assert extra is not None and extra.source == "discovered" and extra.risk == "high"
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.slow  # starts a process of its own (README, Tests)
async def test_a_failing_skill_keeps_the_tools_of_its_last_good_refresh(pilot_home: Path) -> None:
    good = Settings(home=pilot_home, skill_commands={"vks": fake("paged_server.py")})
    first = await refresh_catalog(good, skills=["vks"], server_timeout=30)
    broken = Settings(home=pilot_home, skill_commands={"vks": fake("crash_server.py")})

    second = await refresh_catalog(broken, skills=["vks"], server_timeout=30)

    assert second.results[0].status == "failed"
    assert second.results[0].kept_from == first.refreshed_at
    data = json.loads(good.catalog_cache_path.read_text())
    assert len(data["vks"]["tools"]) == 5
    assert data["vks"]["refreshed_at"] == first.refreshed_at


@pytest.mark.slow  # several server processes
async def test_a_partial_refresh_keeps_the_skills_it_did_not_probe(pilot_home: Path) -> None:
    settings = Settings(
        home=pilot_home, skill_commands={"vks": fake("paged_server.py"), "avi": fake("paged_server.py")}
    )
    await refresh_catalog(settings, skills=["vks", "avi"], server_timeout=30)
    without_avi = Settings(home=pilot_home, skill_commands={"vks": fake("paged_server.py")})

    await refresh_catalog(without_avi, skills=["vks"], server_timeout=30)

    data = json.loads(settings.catalog_cache_path.read_text())
    assert {"vks", "avi"} <= set(data)


def test_write_cache_replaces_a_world_readable_file_with_a_private_one(tmp_path: Path) -> None:
    path = tmp_path / "home" / "catalog.json"
    path.parent.mkdir()
    path.write_text("old")
    path.chmod(0o644)

    write_cache(path, {"refreshed_at": "now"})

    assert json.loads(path.read_text()) == {"refreshed_at": "now"}
    assert path.stat().st_mode & 0o777 == 0o600
