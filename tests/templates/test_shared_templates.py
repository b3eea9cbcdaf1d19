"""Custom templates and the catalog cache shared by two Pilots on one database (SQLite file and
PostgreSQL): what one saves, imports or refreshes, the other lists and uses, through real MCP
client sessions and the `vmware-pilot` command line."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from tests.support import FAKE_SERVERS
from tests.support.backends import Database
from tests.support.mcp_client import Client, connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.cli.main import app as cli
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor

runner = CliRunner()
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
STOP = {"action": "stop", "skill": "aiops", "tool": "power_off_vm", "params": {"vm_name": "web-01"}}
RESTART = """\
# restart one VM of the web tier, behind an approval
name: restart_web
description: Restart the web tier
authors: [alice]
parameters:
  vm_name: {type: string, required: true, description: VM to restart}
steps:
  - {action: require_approval, skill: pilot, tool: approve, params: {message: "Restart {{vm_name}}?"}}
  - {action: stop, skill: aiops, tool: power_off_vm, params: {vm_name: "{{vm_name}}"}}
  - {action: start, skill: aiops, tool: power_on_vm, params: {vm_name: "{{vm_name}}"}}
"""


@pytest.fixture
def shared(database: Database, pilot_home: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings naming the test's database explicitly (on SQLite too: a file several Pilots share)."""
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", database.raw_url)
    return Settings(home=pilot_home, database_url=database.raw_url)


@pytest.fixture
def two_apps(shared: Settings) -> Iterator[tuple[PilotApp, PilotApp]]:
    first, second = build_app(shared), build_app(shared)
    yield first, second
    first.close()
    second.close()


@asynccontextmanager
async def clients(two_apps: tuple[PilotApp, PilotApp]) -> AsyncIterator[dict[str, Client]]:
    """alice on the first Pilot, bob and alice on the second (entered and left in the test's task)."""
    first, second = two_apps
    async with AsyncExitStack() as stack:
        yield {
            "alice@1": await stack.enter_async_context(connect(first, Actor("alice"))),
            "bob@2": await stack.enter_async_context(connect(second, Actor("bob"))),
            "alice@2": await stack.enter_async_context(connect(second, Actor("alice"))),
        }


async def _resource(client: Client, uri: str) -> Any:
    result = await client.session.read_resource(uri)  # type: ignore[arg-type]
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]


def _custom(listing: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in listing if t["type"] == "custom"}


def _rows(database: Database) -> dict[str, str]:
    with database.raw() as conn:
        return {r.name: r.body for r in conn.execute(text("SELECT name, body FROM custom_templates"))}


async def test_a_template_saved_through_one_pilot_is_listed_and_used_through_the_other(
    two_apps: tuple[PilotApp, PilotApp], database: Database, shared: Settings
) -> None:
    async with clients(two_apps) as sessions:
        alice1, bob2 = sessions["alice@1"], sessions["bob@2"]
        before = await bob2.ok("list_workflows")
        assert "ops_stop" not in _custom(before["templates"])

        saved = await alice1.ok(
            "create_workflow",
            name="ops_stop",
            description="Stop web",
            steps=[GATE, STOP],
            save_as_template=True,
        )
        assert saved["saved_as_template"] is True

        listed = _custom((await bob2.ok("list_workflows"))["templates"])
        assert listed["ops_stop"]["file"] == "ops_stop.yaml" and listed["ops_stop"]["steps"] == 2
        assert "ops_stop" in _custom((await _resource(bob2, "pilot://templates"))["templates"])
        assert (await _resource(bob2, "pilot://templates/ops_stop"))["description"] == "Stop web"
        created = await bob2.ok("create_workflow_from_template", workflow_type="ops_stop", params={})
        status = await bob2.status(created["workflow_id"])
        assert [s["tool"] for s in status["steps"]] == ["approve", "power_off_vm"]
        # Kept in the database, not in a templates folder of either host.
        assert "ops_stop" in _rows(database)
        assert not shared.resolved_templates_dir.exists()


async def test_only_a_listed_author_may_replace_a_shared_template(
    two_apps: tuple[PilotApp, PilotApp], database: Database
) -> None:
    async with clients(two_apps) as sessions:
        alice1, bob2, alice2 = sessions["alice@1"], sessions["bob@2"], sessions["alice@2"]
        await alice1.ok("create_workflow", name="ops", description="v1", steps=[GATE], save_as_template=True)

        refused = await bob2.refused(
            "create_workflow", name="ops", description="bob's", steps=[GATE, STOP], save_as_template=True
        )
        assert "belongs to its authors (alice)" in refused["error"]
        assert "ops_2" in refused["hint"] and "`vmware-pilot templates remove ops`" in refused["hint"]
        assert "description: v1" in _rows(database)["ops"]

        await alice2.ok(
            "create_workflow", name="ops", description="v2", steps=[GATE, STOP], save_as_template=True
        )
        assert _custom((await alice1.ok("list_workflows"))["templates"])["ops"]["description"] == "v2"


def test_import_checks_each_file_like_the_folder_and_export_gives_it_back_unchanged(
    shared: Settings, database: Database, tmp_path: Path
) -> None:
    given = tmp_path / "given"
    given.mkdir()
    (given / "restart.yaml").write_text(RESTART)
    (given / "empty.yaml").write_text("name: empty\nsteps: []\n")
    (given / "clear.yml").write_text(
        "name: clear\nsteps:\n  - {action: a, skill: aiops, tool: list_virtual_machines, "
        "params: {password: hunter2}}\n"
    )

    first = runner.invoke(cli, ["templates", "import", str(given), "--json"])
    assert first.exit_code == 1, first.output
    report = {r["file"]: r for r in json.loads(first.stdout)["templates"]}
    assert report["restart.yaml"]["outcome"] == "added"
    assert "'steps' must be a non-empty list" in report["empty.yaml"]["error"]
    assert "secret in clear" in report["clear.yml"]["error"] and "$env" in report["clear.yml"]["error"]
    assert "hunter2" not in first.output
    assert _rows(database) == {"restart_web": RESTART}
    assert b"hunter2" not in database.stored_bytes()

    out = tmp_path / "out"
    exported = runner.invoke(cli, ["templates", "export", str(out)])
    assert exported.exit_code == 0, exported.output
    assert [p.name for p in out.iterdir()] == ["restart_web.yaml"]
    assert (out / "restart_web.yaml").read_text() == RESTART
    assert (out / "restart_web.yaml").stat().st_mode & 0o777 == 0o600

    again = runner.invoke(cli, ["templates", "import", str(out), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["templates"] == [
        {"file": "restart_web.yaml", "name": "restart_web", "outcome": "unchanged"}
    ]
    assert _rows(database) == {"restart_web": RESTART}


async def test_an_imported_template_is_usable_through_a_pilot_started_before_the_import(
    two_apps: tuple[PilotApp, PilotApp], tmp_path: Path
) -> None:
    async with clients(two_apps) as sessions:
        bob2 = sessions["bob@2"]
        (tmp_path / "restart.yaml").write_text(RESTART)
        assert runner.invoke(cli, ["templates", "import", str(tmp_path)]).exit_code == 0

        created = await bob2.ok(
            "create_workflow_from_template", workflow_type="restart_web", params={"vm_name": "web-07"}
        )
        status = await bob2.status(created["workflow_id"])
        assert [s["params"].get("vm_name") for s in status["steps"]] == [None, "web-07", "web-07"]
        assert "alice" in status["authors"]
        bad = await bob2.refused("create_workflow_from_template", workflow_type="restart_web", params={})
        assert "missing required parameter 'vm_name'" in bad["error"]

        removed = runner.invoke(cli, ["templates", "remove", "restart_web"])
        assert removed.exit_code == 0, removed.output
        gone = await bob2.refused("create_workflow_from_template", workflow_type="restart_web", params={})
        assert "Unknown workflow type" in gone["error"]
        again = runner.invoke(cli, ["templates", "remove", "restart_web"])
        assert again.exit_code == 2 and "no custom template named 'restart_web'" in again.stderr


@pytest.mark.slow
async def test_a_catalog_refresh_on_one_host_reaches_a_running_pilot(
    two_apps: tuple[PilotApp, PilotApp],
    shared: Settings,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _, second = two_apps
    async with connect(second) as client:
        before = await client.ok("get_skill_catalog")
        assert "tool_0" not in before["vks"]["tools"]

        empty = tmp_path / "empty-bin"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))
        fake = shlex.join([sys.executable, str(FAKE_SERVERS / "paged_server.py")])
        monkeypatch.setenv("VMWARE_PILOT_SKILL_COMMANDS", json.dumps({"vks": fake}))
        # The command line runs its own event loop: in a thread of its own, as on another host.
        refreshed = await asyncio.to_thread(
            runner.invoke, cli, ["catalog", "refresh", "--skill", "vks", "--json"]
        )
        assert refreshed.exit_code == 0, refreshed.output
        assert json.loads(refreshed.stdout)["cache"] == "database"

        after = await client.ok("get_skill_catalog")
        assert {f"tool_{i}" for i in range(5)} <= set(after["vks"]["tools"])
        catalog = await _resource(client, "pilot://catalog")
        assert "tool_4" in json.dumps(catalog)
    assert not shared.catalog_cache_path.exists()
    shown = runner.invoke(cli, ["catalog", "show", "vks", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["version"] == "9.9"


def test_without_a_database_url_import_and_export_use_the_templates_folder(
    settings: Settings, tmp_path: Path
) -> None:
    given = tmp_path / "given"
    given.mkdir()
    (given / "restart.yaml").write_text(RESTART)

    imported = runner.invoke(cli, ["templates", "import", str(given)])
    assert imported.exit_code == 0, imported.output
    assert (settings.resolved_templates_dir / "restart_web.yaml").read_text() == RESTART
    listed = runner.invoke(cli, ["templates", "--json"])
    assert "restart_web" in [t["name"] for t in json.loads(listed.stdout)["templates"]]

    out = tmp_path / "out"
    assert runner.invoke(cli, ["templates", "export", str(out)]).exit_code == 0
    assert (out / "restart_web.yaml").read_text() == RESTART

    # A file named otherwise that defines the template is the one removed.
    folder = settings.resolved_templates_dir
    (folder / "restart_web.yaml").rename(folder / "web.yml")
    assert runner.invoke(cli, ["templates", "remove", "restart_web"]).exit_code == 0
    assert list(folder.iterdir()) == []


def test_import_of_something_that_is_not_a_folder_is_a_usage_error(shared: Settings, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["templates", "import", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "is not a folder" in result.stderr and "hint:" in result.stderr


def test_export_never_writes_a_secret_in_clear_even_from_a_row_written_behind_pilots_back(
    shared: Settings, database: Database, tmp_path: Path
) -> None:
    body = (
        "name: leaky\nsteps:\n  - {action: a, skill: aiops, tool: list_virtual_machines, "
        "params: {password: hunter2, vm_name: web-01}}\n"
    )
    assert runner.invoke(cli, ["templates"]).exit_code == 0  # the schema exists
    with database.raw() as conn:
        conn.execute(
            text("INSERT INTO custom_templates VALUES ('leaky', :b, '2026-01-01', 'someone')"), {"b": body}
        )

    result = runner.invoke(cli, ["templates", "export", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    written = (tmp_path / "out" / "leaky.yaml").read_text()
    assert "hunter2" not in written and "password: '***'" in written and "vm_name: web-01" in written


def test_a_pilot_on_a_database_warns_about_a_templates_folder_and_cache_it_no_longer_reads(
    shared: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    shared.resolved_templates_dir.mkdir(parents=True)
    (shared.resolved_templates_dir / "restart.yaml").write_text(RESTART)
    shared.catalog_cache_path.write_text("{}")

    with caplog.at_level("WARNING", logger="vmware_pilot.app"):
        build_app(shared).close()
    assert f"vmware-pilot templates import {shared.resolved_templates_dir}" in caplog.text
    assert "catalog refresh` once" in caplog.text
