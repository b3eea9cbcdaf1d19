from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import Database
from tests.engine.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor


@pytest.fixture
def settings(pilot_home: Path, database: Database) -> Settings:
    """Engine tests run on each backend (tests/backends.py)."""
    return Settings(home=pilot_home, database_url=database.settings_url)


@pytest.fixture
def actor() -> Actor:
    return Actor("tester")


@pytest.fixture
def app(settings: Settings) -> Iterator[PilotApp]:
    built = build_app(settings)
    yield built
    built.close()


@pytest.fixture
def dispatcher() -> ScriptedDispatcher:
    return ScriptedDispatcher()


@pytest.fixture
def dapp(settings: Settings, dispatcher: ScriptedDispatcher) -> Iterator[PilotApp]:
    built = build_app(settings, dispatcher=dispatcher)
    yield built
    built.close()
