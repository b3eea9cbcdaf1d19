"""OAuth settings and claim reading, without an identity provider (the provider tests are slow)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from vmware_pilot.cli.main import app
from vmware_pilot.config import Settings
from vmware_pilot.transports.oauth import OAuthConfig, claim_values, display_name


def test_the_audience_defaults_to_the_resource_url(settings: Settings) -> None:
    assert OAuthConfig.from_settings(settings, "https://p.example.com/mcp") is None  # no issuer: off
    on = settings.model_copy(update={"oauth_issuer": "https://idp.example.com/realms/ops"})
    config = OAuthConfig.from_settings(on, "https://p.example.com/mcp")
    assert config is not None and config.audience == "https://p.example.com/mcp"
    assert config.roles_claim == "groups" and config.scopes == ()


def test_settings_read_the_oauth_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMWARE_PILOT_OAUTH_ISSUER", "https://tenant.example.com/")
    monkeypatch.setenv("VMWARE_PILOT_OAUTH_AUDIENCE", "api://pilot")
    monkeypatch.setenv("VMWARE_PILOT_OAUTH_ROLES_CLAIM", "realm_access.roles")
    monkeypatch.setenv("VMWARE_PILOT_OAUTH_SCOPES", "mcp.access, pilot")
    monkeypatch.setenv("VMWARE_PILOT_PUBLIC_URL", "https://pilot.example.com:8443/")
    settings = Settings()
    assert settings.oauth_issuer == "https://tenant.example.com/"  # kept exactly: iss must match it
    assert settings.public_url == "https://pilot.example.com:8443"
    config = OAuthConfig.from_settings(settings, "https://pilot.example.com:8443/mcp")
    assert config is not None and config.audience == "api://pilot"
    assert config.scopes == ("mcp.access", "pilot") and config.roles_claim == "realm_access.roles"


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("oauth_issuer", "http://idp.example.com", "must be an https URL"),
        ("oauth_issuer", "https://idp.example.com/?x=1", "must not carry a query"),
        ("public_url", "https://pilot.example.com/prefix", "scheme, host and port only"),
        ("oauth_roles_claim", " ", "must name a claim"),
        ("oauth_scopes", "mcp offline_access", "must not require offline_access"),
        ("oauth_scopes", 'mcp "quoted"', "is not an OAuth scope"),
        ("oauth_scopes", "mcp a\\b", "is not an OAuth scope"),
    ],
)
def test_bad_oauth_settings_are_refused_with_what_to_do(field: str, value: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Settings(**{field: value})


def test_http_issuers_are_allowed_on_loopback_only() -> None:
    assert Settings(oauth_issuer="http://127.0.0.1:9000").oauth_issuer == "http://127.0.0.1:9000"


def test_claim_values_read_a_list_a_string_or_a_dotted_path() -> None:
    claims = {
        "groups": ["ops", 3, "", "admins"],
        "role": "reader",
        "realm_access": {"roles": ["operator"]},
        "https://example.com/groups": ["namespaced"],
    }
    assert claim_values(claims, "groups") == ["ops", "admins"]
    assert claim_values(claims, "role") == ["reader"]
    assert claim_values(claims, "realm_access.roles") == ["operator"]
    assert claim_values(claims, "https://example.com/groups") == ["namespaced"]
    assert claim_values(claims, "missing.path") == []


def test_thedisplay_name_name_is_one_bounded_line_without_parentheses() -> None:
    assert display_name({"name": "Alice\n(admin)\x00 Example"}) == "Alice admin Example"
    assert display_name({"name": " ", "preferred_username": "alice@example.com"}) == "alice@example.com"
    assert len(display_name({"name": "x" * 500})) == 80
    assert display_name({}) == ""


def test_the_server_refuses_to_start_when_the_issuer_cannot_be_reached(
    pilot_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VMWARE_PILOT_OAUTH_ISSUER", "http://127.0.0.1:9")
    result = CliRunner().invoke(app, ["mcp", "--transport", "http", "--port", "0"])
    assert result.exit_code == 1, result.output
    assert "cannot fetch http://127.0.0.1:9/.well-known/openid-configuration" in result.stderr
    assert "VMWARE_PILOT_OAUTH_ISSUER" in result.stderr
