"""Every setting is documented in docs/settings.md (the README links it), and settings are read
only when asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vmware_pilot.config import Settings

SETTINGS = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


@pytest.mark.parametrize(("field", "env"), sorted(Settings.env_names().items()))
def test_every_setting_is_in_the_settings_table(field: str, env: str) -> None:
    rows = [line for line in SETTINGS.read_text().splitlines() if line.startswith(f"| `{env}` |")]
    assert rows, f"setting {field} ({env}) is not documented in the table of docs/settings.md"


def test_the_table_lists_no_setting_that_does_not_exist() -> None:
    known = set(Settings.env_names().values())
    listed = {
        line.split("`")[1] for line in SETTINGS.read_text().splitlines() if line.startswith("| `VMWARE_")
    }
    assert listed == known


@pytest.mark.slow  # a fresh interpreter importing the whole package; the full suite runs it
def test_settings_are_not_read_at_import(tmp_path: Path) -> None:
    code = (
        "import os; os.environ['VMWARE_PILOT_DISPATCH'] = 'bogus'\n"
        "import vmware_pilot.app, vmware_pilot.cli.main, vmware_pilot.server\n"
        "print('imported')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "imported"


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VMWARE_PILOT_HOME", str(tmp_path))
    monkeypatch.setenv("VMWARE_PILOT_DISPATCH", " STDIO ")
    monkeypatch.setenv("VMWARE_PILOT_DISPATCH_TIMEOUT", "12.5")
    settings = Settings()
    assert settings.home_path == tmp_path
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'pilot.db'}"
    assert settings.resolved_templates_dir == tmp_path / "workflows"
    assert settings.dispatch == "stdio" and settings.dispatch_timeout == 12.5


def test_an_unknown_dispatch_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMWARE_PILOT_DISPATCH", "http")
    with pytest.raises(ValueError, match="not understood"):
        Settings()
