"""`vmware-pilot mcp` refusals that happen before serving (through the typer entry point)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vmware_pilot.cli.main import app

runner = CliRunner()


def test_mcp_refuses_an_unknown_transport_with_a_hint() -> None:
    result = runner.invoke(app, ["mcp", "--transport", "sse"])
    assert result.exit_code == 2
    assert "transport 'sse' is not available" in result.output
    assert "--transport stdio" in result.output and "https" in result.output


@pytest.mark.parametrize("value", ["http", "yes", "stdio2"])
def test_mcp_refuses_an_unknown_dispatch_mode(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("VMWARE_PILOT_DISPATCH", value)
    result = runner.invoke(app, ["mcp"])
    assert result.exit_code == 2
    assert "is not understood" in result.output and "stdio" in result.output


def test_mcp_refuses_an_unknown_log_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMWARE_PILOT_LOG_LEVEL", "LOUD")
    result = runner.invoke(app, ["mcp"])
    assert result.exit_code == 2
    assert "LOUD" in result.output


def test_vmware_pilot_mcp_help_names_its_own_program() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).with_name("vmware-pilot-mcp")
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=False, timeout=60)
    assert out.returncode == 0
    assert "Usage: vmware-pilot-mcp [OPTIONS]" in out.stdout
    assert "vmware-pilot-mcp mcp" not in out.stdout
