"""`vmware-pilot catalog show` through the typer app, on a cache holding the companion tools snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from vmware_pilot.cli.main import app
from vmware_pilot.config import Settings

runner = CliRunner()


@pytest.fixture
def cached(settings: Settings, companion_tools: dict[str, Any]) -> Path:
    path = settings.catalog_cache_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"refreshed_at": "2026-01-02T03:04:05+00:00", **companion_tools}))
    return path


def test_show_all_skills_as_json_marks_the_discovered_ones(cached: Path) -> None:
    result = runner.invoke(app, ["catalog", "show", "--json"])

    assert result.exit_code == 0, result.output
    skills = {s["skill"]: s for s in json.loads(result.stdout)["skills"]}
    assert skills["storage"]["discovered"] is True and skills["storage"]["version"] == "2.4.2"
    assert skills["vdi"]["discovered"] is False
    assert skills["vdi"]["tools"] and {t["source"] for t in skills["vdi"]["tools"]} == {"curated"}


def test_show_one_skill_as_a_table(cached: Path) -> None:
    result = runner.invoke(app, ["catalog", "show", "monitor"], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert "get_alarms" in result.stdout and "curated" in result.stdout
    assert "discovered" in result.stdout  # tools only the snapshot has
    assert "Discovered from" in result.stdout


def test_show_an_unknown_skill_fails_with_the_known_ones(cached: Path) -> None:
    result = runner.invoke(app, ["catalog", "show", "nope"])

    assert result.exit_code == 2
    assert "unknown skill 'nope'" in result.stderr
    assert "aiops, monitor" in result.stderr


@pytest.mark.parametrize("args", [["show"], ["refresh", "--skill", "monitor"]])
def test_invalid_settings_are_an_error_with_a_hint_not_a_traceback(args: list[str]) -> None:
    result = runner.invoke(app, ["catalog", *args], env={"VMWARE_PILOT_SKILL_COMMANDS": "not json"})

    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "invalid settings" in result.stderr and "VMWARE_PILOT_SKILL_COMMANDS" in result.stderr
    assert "hint: fix the VMWARE_PILOT_* environment variables" in result.stderr


def test_refresh_into_an_unusable_home_fails_before_probing_with_a_hint(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "home-file"
    not_a_folder.write_text("")
    result = runner.invoke(app, ["catalog", "refresh"], env={"VMWARE_PILOT_HOME": str(not_a_folder)})

    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "cannot write the catalog cache" in result.stderr and "hint:" in result.stderr
    assert "Probing" not in result.stderr


def test_show_reads_the_catalog_cache_row_when_a_database_url_is_set(
    settings: Settings, companion_tools: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vmware_pilot.app import shared_store

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", url)
    store = shared_store(Settings(home=settings.home, database_url=url))
    assert store is not None
    try:
        store.catalog.put_catalog_cache(
            json.dumps({"refreshed_at": "2026-01-02T03:04:05+00:00", **companion_tools})
        )
    finally:
        store.close()

    result = runner.invoke(app, ["catalog", "show", "--json"])

    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert (shown["cache"], shown["refreshed_at"]) == ("database", "2026-01-02T03:04:05+00:00")
    assert {s["skill"]: s["discovered"] for s in shown["skills"]}["storage"] is True
    assert not settings.catalog_cache_path.exists()
    table = runner.invoke(app, ["catalog", "show"], env={"COLUMNS": "200"})
    assert "Discovered tools from the database" in table.stdout
