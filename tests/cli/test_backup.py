"""`vmware-pilot backup` and `restore` through the entry point: a SQLite store copied while a
Pilot has it open, restored into an empty home where the audit trail verifies and every workflow
reads the same; the refusals; and the documented pg_dump recipe for PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.backends import Database
from tests.support.cli import Runner, entry_point
from tests.support.mcp_client import connect
from tests.support.pg_server import BIN, PgServer
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor

PILOT = Path(sys.executable).with_name("vmware-pilot")
REPO = Path(__file__).resolve().parents[2]


def cli(
    *args: str, env: dict[str, str] | None = None, run: Runner = entry_point
) -> subprocess.CompletedProcess[str]:
    return run("vmware-pilot", *args, env=env)


async def _fill(app: PilotApp) -> list[str]:
    """Three workflows: one approved past its gate, one waiting at it, one cancelled."""
    async with connect(app, Actor("tester")) as client:
        ids = [await client.incident() for _ in range(3)]
        for wid in ids:
            await client.ok("run_workflow", workflow_id=wid)
        await client.ok("approve", workflow_id=ids[0], approver="pat", acknowledge_not_executed=True)
        await client.ok("cancel_workflow", workflow_id=ids[2], reason="not needed", confirm=True)
    return ids


def _reads(ids: list[str], url: str = "", home: Path | None = None) -> dict[str, object]:
    """Every workflow as the store reads it (document, audit events) and the list, from the
    database that ``url`` (or the SQLite file of ``home``) names."""
    from vmware_pilot.store.sql import open_store

    chosen = Settings(home=home, database_url=url) if home else Settings(database_url=url)
    with open_store(chosen) as store:
        shown: dict[str, object] = {wid: store.workflows.load(wid).to_dict() for wid in ids}
        shown["events"] = [r.to_dict() for r in store.audit.audit_events()]
        shown["list"] = store.workflows.list_all()
    return shown


@pytest.fixture
def filled(settings: Settings) -> Iterator[tuple[PilotApp, list[str]]]:
    import asyncio

    app = build_app(settings)
    try:
        yield app, asyncio.run(_fill(app))
    finally:
        app.close()


def test_an_online_backup_restores_into_an_empty_home_and_reads_the_same(
    filled: tuple[PilotApp, list[str]], tmp_path: Path
) -> None:
    """The fast tier's case (in-process): the next test runs the same through the entry point."""
    from vmware_pilot.store.backup import backup, restore
    from vmware_pilot.store.sql import open_store

    _, ids = filled  # the app stays open: the backup is online
    before = _reads(ids, home=Settings().home_path)
    file = tmp_path / "pilot-backup.db"
    assert backup(Settings(), file).workflows == 3
    assert file.stat().st_mode & 0o777 == 0o600
    other = Settings(home=tmp_path / "restored" / ".vmware")
    assert restore(other, file).workflows == 3
    with open_store(other) as store:
        report = store.audit.verify_audit()
    assert report.ok and report.checked > 0
    assert _reads(ids, home=other.home_path) == before
    assert other.home_path.stat().st_mode & 0o777 == 0o700


@pytest.mark.slow  # three entry-point runs; the in-process case is the previous test
def test_a_backup_taken_while_pilot_runs_restores_into_an_empty_home_and_reads_the_same(
    filled: tuple[PilotApp, list[str]], tmp_path: Path
) -> None:
    _, ids = filled  # the app stays open: the backup is online
    before = _reads(ids, home=Settings().home_path)
    file = tmp_path / "pilot-backup.db"
    done = cli("backup", str(file))
    assert done.returncode == 0, done.stderr
    assert "3 workflow(s)" in done.stdout
    assert file.stat().st_mode & 0o777 == 0o600

    other = {"VMWARE_PILOT_HOME": str(tmp_path / "restored" / ".vmware")}
    restored = cli("restore", str(file), "--json", env=other)
    assert restored.returncode == 0, restored.stderr
    assert "Audit trail intact" in restored.stderr  # the person's words leave stdout to the JSON
    shown = json.loads(restored.stdout)
    assert shown["workflows"] == 3 and shown["audit_events_verified"] > 0
    assert cli("audit", "verify", env=other).returncode == 0
    assert _reads(ids, home=tmp_path / "restored" / ".vmware") == before
    assert (tmp_path / "restored" / ".vmware").stat().st_mode & 0o777 == 0o700


def test_restore_refuses_a_home_that_is_not_empty_and_changes_nothing(
    filled: tuple[PilotApp, list[str]], tmp_path: Path, pilot_home: Path, run_pilot: Runner
) -> None:
    file = tmp_path / "b.db"
    assert cli("backup", str(file), run=run_pilot).returncode == 0
    before = (pilot_home / "pilot.db").read_bytes()
    refused = cli("restore", str(file), run=run_pilot)
    assert refused.returncode == 2
    assert "is not empty" in refused.stderr and "hint:" in refused.stderr
    assert (pilot_home / "pilot.db").read_bytes() == before
    again = cli("backup", str(file), run=run_pilot)  # never overwrites
    assert again.returncode == 2 and "exists" in again.stderr


def test_restore_refuses_a_file_that_is_not_a_pilot_database(tmp_path: Path, run_pilot: Runner) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    home = tmp_path / "empty" / ".vmware"
    refused = cli("restore", str(junk), env={"VMWARE_PILOT_HOME": str(home)}, run=run_pilot)
    assert refused.returncode != 0 and "not a vmware-pilot database" in refused.stderr
    assert not (home / "pilot.db").exists()


@pytest.mark.slow  # a PostgreSQL server for one refusal
@pytest.mark.backends("postgresql")
def test_backup_on_postgresql_refuses_with_the_pg_dump_recipe(database: Database, tmp_path: Path) -> None:
    refused = cli("backup", str(tmp_path / "x.db"))
    assert refused.returncode == 2
    assert "pg_dump" in refused.stderr and "docs/operations.md" in refused.stderr
    assert not (tmp_path / "x.db").exists()


def _recipe(name: str) -> str:
    """The shell lines of the ```sh block after the heading ``name`` in docs/operations.md."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split(name, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, f"no sh block after {name!r}"
    return block.group(1)


@pytest.mark.slow
@pytest.mark.backends("postgresql")
async def test_the_documented_pg_dump_recipe_restores_a_database_that_verifies(
    database: Database, pg_server: PgServer, tmp_path: Path
) -> None:
    assert (BIN / "pg_dump").exists(), "pg_dump is part of Debian's postgresql-15 (scripts/pg-setup.sh)"
    app = build_app(Settings(home=tmp_path / "h", database_url=database.raw_url))
    try:
        ids = await _fill(app)
    finally:
        app.close()
    before = _reads(ids, database.raw_url)
    target = pg_server.new_database()  # empty
    libpq = lambda url: url.replace("postgresql+psycopg://", "postgresql://")  # noqa: E731
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "SOURCE_URL": libpq(database.raw_url),
        "TARGET_URL": libpq(pg_server.url(target)),
        "DUMP": str(tmp_path / "pilot.dump"),
    }
    script = _recipe("### PostgreSQL")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    other = {"VMWARE_PILOT_DATABASE_URL": pg_server.url(target)}
    verified = cli("audit", "verify", env=other)
    assert verified.returncode == 0, verified.stderr
    assert _reads(ids, pg_server.url(target)) == before
    pg_server.drop_database(target)
    shutil.rmtree(tmp_path / "h", ignore_errors=True)
