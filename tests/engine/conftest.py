from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.backends import Database
from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.store import MemoryStore


@pytest.fixture
def settings(pilot_home: Path, database: Database) -> Settings:
    """Engine tests run on each backend (tests/support/backends.py)."""
    return Settings(home=pilot_home, database_url=database.settings_url)


@pytest.fixture
def actor() -> Actor:
    return Actor("tester")


def _built(
    request: pytest.FixtureRequest, pilot_home: Path, dispatcher: ScriptedDispatcher | None
) -> PilotApp:
    """The app over a ``MemoryStore`` (no database: the test runs once), or over the test's
    database on each backend when the test also uses ``settings`` or ``database``."""
    if "database" in request.fixturenames:
        return build_app(request.getfixturevalue("settings"), dispatcher=dispatcher)
    return build_app(Settings(home=pilot_home), dispatcher=dispatcher, store=MemoryStore())


@pytest.fixture
def app(request: pytest.FixtureRequest, pilot_home: Path) -> Iterator[PilotApp]:
    built = _built(request, pilot_home, None)
    yield built
    built.close()


@pytest.fixture
def dispatcher() -> ScriptedDispatcher:
    return ScriptedDispatcher()


@pytest.fixture
def dapp(
    request: pytest.FixtureRequest, pilot_home: Path, dispatcher: ScriptedDispatcher
) -> Iterator[PilotApp]:
    built = _built(request, pilot_home, dispatcher)
    yield built
    built.close()
