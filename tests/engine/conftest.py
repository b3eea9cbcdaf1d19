"""Engine fixtures: the app over a MemoryStore, or on each backend (``backend_settings``), with or
without a scripted dispatcher."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.store import MemoryStore


@pytest.fixture
def actor() -> Actor:
    return Actor("tester")


def _built(
    request: pytest.FixtureRequest, pilot_home: Path, dispatcher: ScriptedDispatcher | None
) -> PilotApp:
    """The app over a ``MemoryStore`` (no database: the test runs once), or over the test's
    database on each backend when the test also uses ``backend_settings`` or ``database``."""
    if "database" in request.fixturenames:
        return build_app(request.getfixturevalue("backend_settings"), dispatcher=dispatcher)
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
