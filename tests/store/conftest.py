"""Store fixtures: a real SqlStore on each backend (tests/support/backends.py) in the temporary pilot home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from vmware_pilot.config import Settings
from vmware_pilot.store.sql import SqlStore, open_store


@pytest.fixture
def store(backend_settings: Settings) -> Iterator[SqlStore]:
    s = open_store(backend_settings)
    yield s
    s.close()


@pytest.fixture
def db_path(backend_settings: Settings) -> Path:
    """The SQLite database file (tests using it are marked ``backends("sqlite")``)."""
    return backend_settings.home_path / "pilot.db"
