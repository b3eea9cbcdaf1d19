"""Shared fixtures: every test runs with a temporary HOME and pilot home, never the real one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def companion_tools() -> dict[str, object]:
    """The snapshot of the real companion skills' MCP tools (tests/data/companion-tools.json)."""
    import json

    data: dict[str, object] = json.loads((DATA / "companion-tools.json").read_text())
    return data
