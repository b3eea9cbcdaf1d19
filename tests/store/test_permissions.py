from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.store_helpers import sample_workflow
from vmware_pilot.config import Settings
from vmware_pilot.errors import StoreError
from vmware_pilot.store.sql import open_store


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


# File modes are SQLite's: PostgreSQL keeps its files itself.
@pytest.mark.backends("sqlite")
def test_home_is_0700_and_database_files_0600_even_under_a_loose_umask(
    backend_settings: Settings, loose_umask: None
) -> None:
    with open_store(backend_settings) as store:
        wf = sample_workflow()
        wf.log("created")
        store.workflows.create(wf)
        home = backend_settings.home_path
        files = [home / name for name in ("pilot.db", "pilot.db-wal", "pilot.db-shm")]
        assert all(f.exists() for f in files)  # WAL mode is on while the store is open
        assert _mode(home) == 0o700
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
    assert os.umask(0o022) == 0o022  # the store gave the process umask back


@pytest.mark.backends("sqlite")
def test_existing_loose_home_and_database_are_tightened_on_open(
    backend_settings: Settings, loose_umask: None
) -> None:
    open_store(backend_settings).close()
    home = backend_settings.home_path
    home.chmod(0o755)
    (home / "pilot.db").chmod(0o644)
    with open_store(backend_settings):
        assert _mode(home) == 0o700
        assert _mode(home / "pilot.db") == 0o600


def test_custom_sqlite_url_gets_a_private_file_in_a_new_folder(tmp_path: Path, loose_umask: None) -> None:
    target = tmp_path / "elsewhere" / "pilot.sqlite"
    settings = Settings(home=tmp_path / "home", database_url=f"sqlite:///{target}")
    with open_store(settings) as store:
        store.workflows.create(sample_workflow())
    assert _mode(target.parent) == 0o700
    assert _mode(target) == 0o600


def test_a_home_that_cannot_be_created_is_a_store_error_with_a_hint(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "home-file"
    not_a_folder.write_text("")
    with pytest.raises(StoreError) as info:
        open_store(Settings(home=not_a_folder))
    assert "pilot home cannot be used" in info.value.message
    assert "VMWARE_PILOT_HOME" in info.value.hint
