"""Custom templates are parsed once per change of their text, never on the event loop, on the
templates folder and on a shared database (SQLite file and PostgreSQL), through real MCP client
sessions; what a save or an import may cost is bounded; `templates import` does work linear in
the files it imports (counted: parses, file reads, SQL statements)."""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
import threading
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from tests.support.backends import Database
from tests.support.mcp_client import GATE, READ_STEP, Client, connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.cli.main import app as cli
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.templates import yamlsafe
from vmware_pilot.templates.custom import MAX_SAVED_BYTES

runner = CliRunner()


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


def template(name: str, description: str = "", steps: int = 1) -> str:
    return yaml.safe_dump(
        {"name": name, "description": description or f"the {name} template", "steps": [READ_STEP] * steps}
    )


@dataclass
class Parses:
    """Every parse of a template text (``yamlsafe.load_yaml``), and those made on an event loop."""

    count: int = 0
    on_loop: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Parses:
    seen = Parses()
    real = yamlsafe.load_yaml

    def counted(text: str) -> Any:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        with seen.lock:
            seen.count += 1
            if on_loop:
                seen.on_loop.append(threading.current_thread().name)
        return real(text)

    monkeypatch.setattr(yamlsafe, "load_yaml", counted)
    return seen


def _custom(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in payload["templates"] if t["type"] == "custom"}


async def _every_read(client: Client, name: str) -> None:
    """Every door that lists or uses templates: the tool, both resources, a completion, a create."""
    await client.ok("list_workflows")
    await client.session.read_resource("pilot://templates")  # type: ignore[arg-type]
    await client.session.read_resource(f"pilot://templates/{name}")  # type: ignore[arg-type]
    from mcp_types import ResourceTemplateReference

    ref = ResourceTemplateReference(type="ref/resource", uri="pilot://templates/{name}")
    done = await client.session.complete(ref, {"name": "name", "value": name[:2]})
    assert name in done.completion.values
    await client.ok("create_workflow_from_template", workflow_type=name, params={})


async def test_the_folder_templates_are_parsed_once_per_change_and_never_on_the_event_loop(
    pilot_app: PilotApp, parses: Parses
) -> None:
    folder = pilot_app.settings.resolved_templates_dir
    folder.mkdir(parents=True)
    for name in ("t1", "t2", "t3"):
        (folder / f"{name}.yaml").write_text(template(name))
    async with connect(pilot_app) as client:
        for _ in range(3):
            assert set(_custom(await client.ok("list_workflows"))) == {"t1", "t2", "t3"}
            await _every_read(client, "t1")
        assert parses.count == 3

        (folder / "t2.yaml").write_text(template("t2", "changed"))
        for _ in range(3):
            assert _custom(await client.ok("list_workflows"))["t2"]["description"] == "changed"
        assert parses.count == 4

        (folder / "t3.yaml").unlink()
        assert set(_custom(await client.ok("list_workflows"))) == {"t1", "t2"}
        (folder / "t3.yaml").write_text(template("t3"))  # back: seen again, so parsed again
        assert set(_custom(await client.ok("list_workflows"))) == {"t1", "t2", "t3"}
        assert parses.count == 5
    assert parses.on_loop == []


@pytest.fixture
def shared(database: Database, pilot_home: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings naming the test's database explicitly (on SQLite too: a file several Pilots share)."""
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", database.raw_url)
    return Settings(home=pilot_home, database_url=database.raw_url)


@pytest.fixture
def replicas(shared: Settings) -> Iterator[tuple[PilotApp, PilotApp]]:
    first, second = build_app(shared), build_app(shared)
    yield first, second
    first.close()
    second.close()


async def test_stored_templates_are_parsed_once_per_change_on_each_replica_and_never_on_the_loop(
    replicas: tuple[PilotApp, PilotApp], database: Database, parses: Parses
) -> None:
    first, second = replicas
    async with AsyncExitStack() as stack:
        alice = await stack.enter_async_context(connect(first, Actor("alice")))
        bob = await stack.enter_async_context(connect(second, Actor("bob")))
        for name in ("t1", "t2", "t3"):
            await alice.ok(
                "create_workflow", name=name, description=f"{name} v1", steps=[GATE], save_as_template=True
            )

        parses.count = 0
        for _ in range(3):  # the second replica never saw them: each parsed there once
            assert {n: t["description"] for n, t in _custom(await bob.ok("list_workflows")).items()} == {
                "t1": "t1 v1",
                "t2": "t2 v1",
                "t3": "t3 v1",
            }
            await _every_read(bob, "t2")
        assert parses.count == 3
        for _ in range(3):
            await alice.ok("list_workflows")
        listed_by_alice = parses.count - 3
        for _ in range(3):
            await alice.ok("list_workflows")
            await bob.ok("list_workflows")
        assert parses.count == 3 + listed_by_alice <= 6

        # A change saved through the first replica: the second sees it and parses that one text.
        await alice.ok("create_workflow", name="t1", description="t1 v2", steps=[GATE], save_as_template=True)
        parses.count = 0
        for _ in range(3):
            assert _custom(await bob.ok("list_workflows"))["t1"]["description"] == "t1 v2"
        assert parses.count == 1
        for _ in range(3):  # the replica that saved it parses the new text too, once
            assert _custom(await alice.ok("list_workflows"))["t1"]["description"] == "t1 v2"
        assert parses.count == 2

        # A change written behind every Pilot's back is seen the same way.
        with database.raw() as conn:
            conn.execute(
                text("UPDATE custom_templates SET body = :b WHERE name = 't3'"),
                {"b": template("t3", "edited by hand")},
            )
        parses.count = 0
        for _ in range(3):
            assert _custom(await bob.ok("list_workflows"))["t3"]["description"] == "edited by hand"
            assert _custom(await alice.ok("list_workflows"))["t3"]["description"] == "edited by hand"
        assert parses.count == 2  # once on each replica
    assert parses.on_loop == []


async def test_a_template_too_large_to_save_is_refused_and_nothing_is_saved(pilot_app: PilotApp) -> None:
    note = "x" * 60_000
    steps = [GATE, *({**READ_STEP, "params": {"note": note}} for _ in range(5))]
    async with connect(pilot_app) as client:
        refused = await client.refused(
            "create_workflow", name="huge", description="d", steps=steps, save_as_template=True
        )
        assert (
            f"at most {MAX_SAVED_BYTES} bytes" in refused["error"] and "nothing was saved" in refused["error"]
        )
        assert "save_as_template=false" in refused["hint"]
        assert "huge" not in _custom(await client.ok("list_workflows"))
        assert (await client.ok("list_workflows"))["active_total"] == 0
        # The workflow itself is not limited by the template's size.
        await client.ok("create_workflow", name="huge", description="d", steps=steps)
    assert not (pilot_app.settings.resolved_templates_dir / "huge.yaml").exists()


def test_import_refuses_a_file_larger_than_a_saved_template_may_be(shared: Settings, tmp_path: Path) -> None:
    given = tmp_path / "given"
    given.mkdir()
    big = {"name": "big", "steps": [{**READ_STEP, "params": {"note": str(n) * 60_000}} for n in range(5)]}
    (given / "big.yaml").write_text(yaml.safe_dump(big))
    (given / "small.yaml").write_text(template("small"))
    result = runner.invoke(cli, ["templates", "import", str(given), "--json"])
    assert result.exit_code == 1, result.output
    report = {r["file"]: r for r in json.loads(result.stdout)["templates"]}
    assert f"at most {MAX_SAVED_BYTES} bytes" in report["big.yaml"]["error"]
    assert report["small.yaml"]["outcome"] == "added"


async def test_a_raw_control_character_is_one_warning_with_its_line_and_column_per_change(
    pilot_app: PilotApp, caplog: pytest.LogCaptureFixture
) -> None:
    folder = pilot_app.settings.resolved_templates_dir
    folder.mkdir(parents=True)
    (folder / "ctl.yaml").write_text(
        'name: ctl\nsteps:\n  - {skill: monitor, tool: get_alarms, params: {a: "x\x01"}}\n'
    )
    async with connect(pilot_app) as client:
        with caplog.at_level(logging.WARNING, logger="vmware_pilot"):
            for _ in range(3):
                error = _custom(await client.ok("list_workflows"))["ctl"]["error"]
                assert error.startswith("ctl.yaml: not valid YAML at line 3, column 54:"), error
                assert "#x0001" in error
            (folder / "ctl.yaml").write_text("name: ctl\x02\nsteps: []\n")
            for _ in range(3):
                error = _custom(await client.ok("list_workflows"))["ctl"]["error"]
                assert "line 1, column 10" in error
    records = [r for r in caplog.records if "ctl.yaml" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.WARNING, logging.WARNING]
    assert "line 3, column 54" in records[0].getMessage() and "line 1, column 10" in records[1].getMessage()
    assert all(r.exc_info is None for r in records)  # a warning, not a traceback


@dataclass
class Work:
    parses: int = 0
    reads: int = 0
    statements: int = 0


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch, parses: Parses) -> Iterator[Work]:
    """Counts what an import does: template parses, file reads and SQL statements."""
    counted = Work()
    real_read = pathlib.Path.read_text

    def read_text(self: Path, *args: Any, **kwargs: Any) -> str:
        counted.reads += 1
        return real_read(self, *args, **kwargs)

    def statement(*_: Any) -> None:
        counted.statements += 1

    monkeypatch.setattr(pathlib.Path, "read_text", read_text)
    event.listen(Engine, "before_cursor_execute", statement)
    parses.count = 0
    try:
        yield counted
    finally:
        event.remove(Engine, "before_cursor_execute", statement)
        counted.parses = parses.count


def _import(folder: Path, work: Work, parses: Parses) -> list[dict[str, Any]]:
    parses.count = 0
    work.reads = work.statements = 0
    result = runner.invoke(cli, ["templates", "import", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    work.parses = parses.count
    rows: list[dict[str, Any]] = json.loads(result.stdout)["templates"]
    return rows


def _files(folder: Path, count: int, version: str = "") -> None:
    folder.mkdir(exist_ok=True)
    for n in range(count):
        (folder / f"t{n:03}.yaml").write_text(template(f"t{n:03}", version))


FILES = 80


def test_importing_into_the_templates_folder_does_work_linear_in_the_files(
    settings: Settings, tmp_path: Path, work: Work, parses: Parses
) -> None:
    _files(tmp_path / "given", FILES)
    rows = _import(tmp_path / "given", work, parses)
    assert [r["outcome"] for r in rows] == ["added"] * FILES
    # Each file is parsed once; each is read once, and its target once when it exists.
    assert work.parses <= FILES + 5 and work.reads <= 2 * FILES + 20, work

    _files(tmp_path / "given", FILES, "v2")  # into a folder that already holds them all
    rows = _import(tmp_path / "given", work, parses)
    assert [r["outcome"] for r in rows] == ["replaced"] * FILES
    assert work.parses <= 2 * FILES + 5 and work.reads <= 4 * FILES + 20, work


def test_importing_into_the_database_does_work_linear_in_the_files(
    shared: Settings, tmp_path: Path, work: Work, parses: Parses
) -> None:
    _files(tmp_path / "given", FILES)
    rows = _import(tmp_path / "given", work, parses)
    assert [r["outcome"] for r in rows] == ["added"] * FILES
    assert work.parses <= FILES + 5 and work.reads <= FILES + 20, work
    assert work.statements <= 6 * FILES + 50, work

    rows = _import(tmp_path / "given", work, parses)
    assert [r["outcome"] for r in rows] == ["unchanged"] * FILES
    assert work.parses <= FILES + 5 and work.statements <= 3 * FILES + 50, work
