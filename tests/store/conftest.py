"""Store fixtures: a real SqlStore on each backend (tests/support/backends.py) in the temporary pilot home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.backends import Database
from vmware_pilot.config import Settings
from vmware_pilot.store.sql import SqlStore, open_store


@pytest.fixture
def settings(pilot_home: Path, database: Database) -> Settings:
    return Settings(home=pilot_home, database_url=database.settings_url)


@pytest.fixture
def store(settings: Settings) -> Iterator[SqlStore]:
    s = open_store(settings)
    yield s
    s.close()


@pytest.fixture
def db_path(settings: Settings) -> Path:
    """The SQLite database file (tests using it are marked ``backends("sqlite")``)."""
    return settings.home_path / "pilot.db"
