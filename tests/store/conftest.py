"""Store fixtures: a real SqlStore on a SQLite file in the temporary pilot home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from vmware_pilot.config import Settings
from vmware_pilot.store.sql import SqlStore, open_store


@pytest.fixture
def store(settings: Settings) -> Iterator[SqlStore]:
    s = open_store(settings)
    yield s
    s.close()


@pytest.fixture
def db_path(settings: Settings) -> Path:
    return settings.home_path / "pilot.db"
