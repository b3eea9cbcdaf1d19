"""`vmware-pilot mcp --transport https|http` refusals before serving (through the typer entry point)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from vmware_pilot.cli.main import app
from vmware_pilot.transports.tokens import TokenStore

runner = CliRunner()


@pytest.fixture
def token(pilot_home: Path) -> str:
    return TokenStore(pilot_home / "tokens.json").create("alice", "admin")


def test_a_network_transport_refuses_to_start_without_a_token(pilot_home: Path) -> None:
    result = runner.invoke(app, ["mcp", "--transport", "http", "--port", "0"])
    assert result.exit_code == 2
    assert "no token exists" in result.stderr and "vmware-pilot token create" in result.stderr


@pytest.mark.usefixtures("token")
def test_plain_http_refuses_a_non_loopback_address() -> None:
    result = runner.invoke(app, ["mcp", "--transport", "http", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "only on loopback" in result.stderr and "--transport https" in result.stderr


@pytest.mark.usefixtures("token")
def test_https_needs_a_public_name_a_certificate_and_its_key(tmp_path: Path) -> None:
    no_name = runner.invoke(app, ["mcp", "--transport", "https"])
    assert no_name.exit_code == 2 and "--public-name" in no_name.stderr
    no_cert = runner.invoke(app, ["mcp", "--transport", "https", "--public-name", "pilot.example.com"])
    assert no_cert.exit_code == 2 and "--cert" in no_cert.stderr
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    bad = runner.invoke(
        app,
        [
            "mcp",
            "--transport",
            "https",
            "--public-name",
            "pilot.example.com",
            "--cert",
            str(junk),
            "--key",
            str(junk),
        ],
    )
    assert bad.exit_code == 2 and "cannot be used together" in bad.stderr


@pytest.mark.usefixtures("token")
@pytest.mark.parametrize("name", ["-bad.example", "a..b", "pilot example", "https://pilot"])
def test_https_refuses_a_public_name_that_is_not_a_dns_name_or_address(name: str) -> None:
    result = runner.invoke(app, ["mcp", "--transport", "http", "--public-name", name])
    assert result.exit_code == 2 and "neither a DNS name nor an IP address" in result.stderr


@pytest.mark.usefixtures("token")
def test_a_token_file_others_can_read_stops_the_start(pilot_home: Path) -> None:
    (pilot_home / "tokens.json").chmod(0o644)
    result = runner.invoke(app, ["mcp", "--transport", "http", "--port", "0"])
    assert result.exit_code == 2 and "chmod 600" in result.stderr


def test_network_options_are_refused_with_stdio() -> None:
    result = runner.invoke(app, ["mcp", "--port", "9000", "--public-name", "x.example"])
    assert result.exit_code == 2
    assert "--port, --public-name only apply to --transport https or http" in result.stderr
