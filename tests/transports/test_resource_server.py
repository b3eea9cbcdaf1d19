"""Pilot as an OAuth resource server of the MCP 2026-07-28 revision, in this process and with no
identity provider: what it publishes (the protected resource metadata, the 401/403 challenges) and
what it refuses before any key is needed (a token of another issuer, compared as a simple
string). The same against a real OpenID Provider: test_oauth.py (in-process app) and
test_oauth_server.py (a real server process and the SDKs' clients)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.support.asgi import lifespan
from tests.support.oidc_provider import new_key
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.jwks import IssuerKeys
from vmware_pilot.transports.oauth import JwtVerifier, OAuthConfig, client_support
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore

RESOURCE = "http://127.0.0.1:8080/mcp"
METADATA = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
ISSUER = "https://idp.example.com"  # never contacted: nothing here needs its keys
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
KEY = new_key("k1")


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


class Pilot:
    def __init__(self, client: httpx.AsyncClient, keys: IssuerKeys, tokens: TokenStore) -> None:
        self.client, self.keys, self.tokens = client, keys, tokens

    async def post(self, token: str | None) -> httpx.Response:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        return await self.client.post("/mcp", headers=headers, content=json.dumps(INITIALIZE))


@asynccontextmanager
async def _pilot(pilot_app: PilotApp, pilot_home: Path, issuer: str = ISSUER) -> AsyncIterator[Pilot]:
    keys = IssuerKeys(issuer)
    config = OAuthConfig(issuer, RESOURCE, RESOURCE, "groups", ("mcp",))
    tokens = TokenStore(pilot_home / "tokens.json")
    roles = RoleBook(pilot_home / "roles.yaml", TOOL_NAMES)
    asgi = build_http_app(pilot_app, HttpOptions("http"), 8080, tokens, roles, JwtVerifier(config, keys))
    async with lifespan(asgi):
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
            yield Pilot(client, keys, tokens)


@pytest.fixture
async def pilot(pilot_app: PilotApp, pilot_home: Path) -> AsyncIterator[Pilot]:
    async with _pilot(pilot_app, pilot_home) as client:
        yield client


def _token(claims: dict[str, Any]) -> str:
    now = int(time.time())
    body = {"sub": "alice", "aud": RESOURCE, "iat": now, "exp": now + 300, **claims}
    return jwt.encode(body, KEY.private, algorithm="RS256", headers={"kid": KEY.kid})


def _challenge(response: httpx.Response) -> str:
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer "), challenge
    return challenge


@pytest.mark.parametrize(
    "issuer", [ISSUER, "https://Login.Example.com:443/tenant", "https://idp.example.com/realms/ops/"]
)
async def test_the_metadata_names_the_issuer_exactly_as_configured(
    pilot_app: PilotApp, pilot_home: Path, issuer: str
) -> None:
    async with _pilot(pilot_app, pilot_home, issuer) as pilot:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            response = await pilot.client.get(path)
            assert response.status_code == 200, path
            # No trailing slash added, no case folding, no default port dropped: a client compares
            # this with the authorization server metadata's issuer as a simple string.
            assert response.json() == {
                "resource": RESOURCE,
                "authorization_servers": [issuer],
                "bearer_methods_supported": ["header"],
                "resource_name": "vmware-pilot",
                "scopes_supported": ["mcp"],
            }, path


async def test_a_request_without_a_token_learns_the_metadata_and_the_scopes(pilot: Pilot) -> None:
    response = await pilot.post(None)
    assert response.status_code == 401
    # RFC 6750 section 3: no error code when the request carried no token.
    assert _challenge(response) == f'Bearer resource_metadata="{METADATA}", scope="mcp"'


@pytest.mark.parametrize("issuer", ["https://other.example.com", ISSUER + "/", "https://IDP.example.com"])
async def test_a_token_of_another_issuer_is_refused_without_asking_for_keys(
    pilot: Pilot, issuer: str
) -> None:
    response = await pilot.post(_token({"iss": issuer, "scope": "mcp"}))
    assert response.status_code == 401
    challenge = _challenge(response)
    assert 'error="invalid_token"' in challenge and f'resource_metadata="{METADATA}"' in challenge
    described = f"The access token was issued by {issuer}, not by {ISSUER}"
    assert described in challenge and described in response.json()["error_description"]
    assert pilot.keys.fetches == 0  # refused on the issuer alone: the issuer was never asked


async def test_a_token_naming_no_issuer_is_refused(pilot: Pilot) -> None:
    response = await pilot.post(_token({}))
    assert response.status_code == 401
    assert 'error_description="The access token names no issuer (iss)"' in _challenge(response)


async def test_a_bearer_that_is_no_token_at_all_says_so(pilot: Pilot) -> None:
    response = await pilot.post("vpt_not-a-token")
    assert response.status_code == 401
    assert (
        'error="invalid_token", error_description="The bearer token is neither a token of this '
        'server nor a JWT access token"'
    ) in _challenge(response)


async def test_a_static_token_passes_the_gate(pilot: Pilot) -> None:
    secret = pilot.tokens.create("ci-bot", "admin")
    response = await pilot.post(secret)
    assert response.status_code == 200, response.text
    assert "vmware-pilot" in response.text


@pytest.mark.parametrize(
    ("metadata", "pkce", "registration"),
    [
        (
            {
                "code_challenge_methods_supported": ["plain", "S256"],
                "client_id_metadata_document_supported": True,
            },
            True,
            "client ID metadata documents",
        ),
        (
            {"code_challenge_methods_supported": ["S256"], "registration_endpoint": "https://idp/register"},
            True,
            "dynamic client registration only (deprecated",
        ),
        (
            {"code_challenge_methods_supported": ["plain"]},
            False,
            "register each MCP client at the issuer in advance",
        ),
        ({}, False, "register each MCP client at the issuer in advance"),
    ],
)
def test_what_mcp_clients_need_of_the_issuer_is_read_from_its_metadata(
    metadata: dict[str, Any], pkce: bool, registration: str
) -> None:
    (what, there, meaning), (kind, registers, how) = client_support(metadata)
    assert (what, there) == ("PKCE", pkce)
    assert ("S256 advertised" if pkce else "lacks S256: MCP clients refuse to sign in") in meaning
    assert kind == "registration" and registration in how
    assert registers is ("in advance" not in registration)
