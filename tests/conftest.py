"""Shared fixtures: every test runs with a temporary HOME and pilot home, never the real one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import BACKENDS, Database, sqlite_database
from tests.pg_server import PgServer
from vmware_pilot.config import Settings

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name in list(Settings.env_names().values()):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VMWARE_PILOT_HOME", str(home / ".vmware"))
    yield home


@pytest.fixture
def pilot_home(_isolated_home: Path) -> Path:
    return _isolated_home / ".vmware"


@pytest.fixture
def settings(pilot_home: Path) -> Settings:
    return Settings(home=pilot_home)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``database`` on each backend (or those its ``backends`` mark names)."""
    if "database" not in metafunc.fixturenames:
        return
    mark = metafunc.definition.get_closest_marker("backends")
    backends = mark.args if mark is not None else BACKENDS
    metafunc.parametrize("database", backends, indirect=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's own PostgreSQL 15 server (started on first use, stopped at the end)."""
    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def database(
    request: pytest.FixtureRequest, pilot_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Database]:
    """The test's database on the backend of its parameter; see tests/backends.py."""
    if request.param == "sqlite":
        yield sqlite_database(pilot_home)
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.new_database(migrated=request.node.get_closest_marker("empty_database") is None)
    url = server.url(name)
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", url)
    try:
        yield Database("postgresql", url, url)
    finally:
        server.drop_database(name)


@pytest.fixture(scope="session")
def companion_tools() -> dict[str, object]:
    """The snapshot of the real companion skills' MCP tools (tests/data/companion-tools.json)."""
    import json

    data: dict[str, object] = json.loads((DATA / "companion-tools.json").read_text())
    return data
