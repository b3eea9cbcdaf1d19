"""Shared fixtures: every test runs with a temporary HOME and pilot home, never the real one."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import DATA, cli
from tests.support.backends import BACKENDS, Database, sqlite_database
from tests.support.pg_server import PgServer
from vmware_pilot.config import Settings, unknown_settings

# Byte-code caches on, whatever the machine says: some images set PYTHONDONTWRITEBYTECODE, and then
# every run compiles each test module again (assertion rewriting) and every Python process the
# suite starts (entry points, servers, replicas: hundreds) compiles Pilot and its tests from
# source. The caches land in __pycache__ folders, which git ignores.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name in list(Settings.env_names().values()):
        monkeypatch.delenv(name, raising=False)
    for name, _near in unknown_settings():  # a stray name would add a warning to every command
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VMWARE_PILOT_HOME", str(home / ".vmware"))
    yield home


@pytest.fixture
def pilot_home(_isolated_home: Path) -> Path:
    return _isolated_home / ".vmware"


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store migrated once per worker: tests start from a copy rather than migrating
    their own (the migrations themselves are tested on empty databases in tests/store)."""
    from vmware_pilot.store.sql import open_store

    home = tmp_path_factory.mktemp("migrated") / ".vmware"
    open_store(Settings(home=home)).close()
    leftovers = sorted(p.name for p in home.iterdir() if p.name != "pilot.db")
    assert not leftovers, f"the template store left {leftovers} beside pilot.db"
    return home / "pilot.db"


def seed_sqlite(home: Path, template: Path) -> None:
    """Put a copy of the migrated store where ``home``'s Pilot looks for it (home 0700, file 0600)."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = home / "pilot.db"
    if not target.exists():
        shutil.copyfile(template, target)
        target.chmod(0o600)


@pytest.fixture
def settings(request: pytest.FixtureRequest, pilot_home: Path) -> Settings:
    """Pilot's settings for the test's home, on SQLite: the store there is already migrated (empty
    with the ``empty_database`` mark). ``backend_settings`` is the same on each backend."""
    if request.node.get_closest_marker("empty_database") is None:
        seed_sqlite(pilot_home, request.getfixturevalue("migrated_sqlite"))
    return Settings(home=pilot_home)


@pytest.fixture
def backend_settings(pilot_home: Path, database: Database) -> Settings:
    """Pilot's settings on the test's ``database``: the test runs once per backend (SQLite and
    PostgreSQL, or those its ``backends`` mark names; tests/support/backends.py)."""
    return Settings(home=pilot_home, database_url=database.settings_url)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``database`` on each backend (or those its ``backends`` mark names)."""
    if "database" not in metafunc.fixturenames:
        return
    mark = metafunc.definition.get_closest_marker("backends")
    backends = mark.args if mark is not None else BACKENDS
    metafunc.parametrize("database", backends, indirect=True)


def _running_pg() -> Iterator[PgServer]:
    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's own PostgreSQL 15 server (started on first use, stopped at the end)."""
    yield from _running_pg()


@pytest.fixture
def own_pg() -> Iterator[PgServer]:
    """A PostgreSQL server of the test's own, for a test that stops and starts it."""
    yield from _running_pg()


@pytest.fixture
def database(
    request: pytest.FixtureRequest, pilot_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Database]:
    """The test's database on the backend of its parameter; see tests/support/backends.py."""
    if request.param == "sqlite":
        if request.node.get_closest_marker("empty_database") is None:
            seed_sqlite(pilot_home, request.getfixturevalue("migrated_sqlite"))
        yield sqlite_database(pilot_home)
        return
    server: PgServer = request.getfixturevalue("pg_server")
    migrated = request.node.get_closest_marker("empty_database") is None
    name = server.new_database(migrated=migrated)
    url = server.url(name)
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", url)
    try:
        yield Database("postgresql", url, url)
    finally:
        if migrated:
            server.release_database(name)  # emptied for the next test, or dropped
        else:
            server.drop_database(name)


@pytest.fixture(params=["in_process", pytest.param("entry_point", marks=pytest.mark.slow)])
def run_pilot(request: pytest.FixtureRequest) -> cli.Runner:
    """Runs the command line: in this process (fast tier) and as the installed entry point (slow
    tier), so a test of what a command says runs both ways (tests/support/cli.py)."""
    runner: cli.Runner = getattr(cli, request.param)
    return runner


@pytest.fixture(scope="session")
def companion_tools() -> dict[str, object]:
    """The snapshot of the real companion skills' MCP tools (tests/data/companion-tools.json)."""
    import json

    data: dict[str, object] = json.loads((DATA / "companion-tools.json").read_text())
    return data
