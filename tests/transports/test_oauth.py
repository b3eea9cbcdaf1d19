"""Pilot as an OAuth resource server, against a real OpenID Provider (oidc-provider on loopback).

The HTTP app runs in-process here (the provider is a real process serving its discovery document,
JWKS and token endpoint); test_oauth_server.py runs a real Pilot process with MCP clients.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.asgi import lifespan
from tests.support.oidc_provider import Person, Provider, new_key
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.http import HttpOptions, build_http_app, self_check
from vmware_pilot.transports.jwks import IssuerKeys, IssuerUnreachable
from vmware_pilot.transports.oauth import JwtVerifier, OAuthConfig
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore

pytestmark = pytest.mark.slow  # a Node.js process per module

RESOURCE = "http://127.0.0.1:8080/mcp"
METADATA = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
PEOPLE = [
    Person("alice", "alice-secret", "Alice Example", ("operators",)),
    Person("dave", "dave-secret", "Dave", ("visitors",)),
    Person("carol", "carol-secret", "Carol", ("admin",)),
    Person("erin", "erin-secret", "Erin", ("reader", "unrelated")),
]
ROLES = """roles:
  operator:
    approve: others
    tools: "*"
groups:
  operators: operator
"""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    op = Provider(tmp_path_factory.mktemp("oidc"), PEOPLE, [new_key("k1")])
    op.start()
    yield op
    op.stop()


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


def _roles(pilot_home: Path, text: str = ROLES) -> RoleBook:
    path = pilot_home / "roles.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    return RoleBook(path, TOOL_NAMES)


class Http:
    """The in-process app and the verifier's key cache (to look at its fetches)."""

    def __init__(self, client: httpx.AsyncClient, keys: IssuerKeys, tokens: TokenStore) -> None:
        self.client, self.keys, self.tokens = client, keys, tokens

    async def post(self, token: str | None, body: dict[str, Any] = INITIALIZE) -> httpx.Response:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        return await self.client.post("/mcp", headers=headers, content=json.dumps(body))


async def _http(
    pilot_app: PilotApp, pilot_home: Path, keys: IssuerKeys, scopes: tuple[str, ...] = ()
) -> AsyncIterator[Http]:
    config = OAuthConfig(keys.issuer, RESOURCE, RESOURCE, "groups", scopes)
    tokens = TokenStore(pilot_home / "tokens.json")
    asgi = build_http_app(
        pilot_app, HttpOptions("http"), 8080, tokens, _roles(pilot_home), JwtVerifier(config, keys)
    )
    async with lifespan(asgi):
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as client:
            yield Http(client, keys, tokens)


@pytest.fixture
async def http(provider: Provider, pilot_app: PilotApp, pilot_home: Path) -> AsyncIterator[Http]:
    keys = IssuerKeys(provider.issuer)
    await keys.load()
    async for client in _http(pilot_app, pilot_home, keys):
        yield client


# --- discovery ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
async def test_protected_resource_metadata_names_this_resource_and_the_issuer(
    http: Http, provider: Provider, path: str
) -> None:
    response = await http.client.get(path)
    assert response.status_code == 200
    metadata = response.json()
    assert metadata["resource"] == RESOURCE
    assert metadata["authorization_servers"] == [provider.issuer]  # exactly: no slash added
    assert metadata["bearer_methods_supported"] == ["header"]


async def test_a_request_without_a_token_is_401_naming_the_resource_metadata(http: Http) -> None:
    response = await http.post(None)
    assert response.status_code == 401
    assert f'resource_metadata="{METADATA}"' in response.headers["www-authenticate"]
    assert response.headers["www-authenticate"].startswith("Bearer ")


async def test_the_start_up_check_passes_with_oauth_on_and_no_static_token(
    provider: Provider, pilot_app: PilotApp, pilot_home: Path
) -> None:
    keys = IssuerKeys(provider.issuer)
    config = OAuthConfig(provider.issuer, RESOURCE, RESOURCE)
    tokens = TokenStore(pilot_home / "tokens.json")
    assert not tokens.entries()
    asgi = build_http_app(
        pilot_app, HttpOptions("http"), 8080, tokens, _roles(pilot_home), JwtVerifier(config, keys)
    )
    await self_check(asgi, "127.0.0.1:8080", METADATA)


# --- valid tokens ---------------------------------------------------------------------------
async def test_an_access_token_from_the_provider_is_accepted(http: Http, provider: Provider) -> None:
    response = await http.post(provider.token("alice", RESOURCE))
    assert response.status_code == 200, response.text
    assert "vmware-pilot" in response.text


async def test_a_static_token_still_works_beside_oauth(http: Http) -> None:
    secret = http.tokens.create("ci-bot", "admin")
    assert (await http.post(secret)).status_code == 200
    assert (await http.post(secret + "x")).status_code == 401


async def test_an_expiry_within_the_clock_skew_is_still_accepted(http: Http, provider: Provider) -> None:
    now = int(time.time())
    token = provider.sign({"sub": "alice", "aud": RESOURCE, "groups": ["operators"], "exp": now - 20})
    assert (await http.post(token)).status_code == 200


# --- refused tokens -------------------------------------------------------------------------
def _bad_tokens(provider: Provider) -> dict[str, tuple[str, str, str]]:
    """Name → (token, the reason Pilot logs for refusing it, what its 401 tells the client)."""
    now = int(time.time())
    good = {"sub": "alice", "aud": RESOURCE, "groups": ["operators"]}
    stranger = new_key("stranger")
    return {
        "expired": (
            provider.sign({**good, "iat": now - 7200, "exp": now - 3600}),
            "ExpiredSignatureError",
            "The access token has expired",
        ),
        "not yet valid": (
            provider.sign({**good, "nbf": now + 3600}),
            "ImmatureSignatureError",
            "The access token is not valid yet",
        ),
        "wrong audience (issued by the provider)": (
            provider.token("alice", "http://other.example.com/mcp"),
            "InvalidAudienceError",
            f"its audience (aud) must name {RESOURCE}",
        ),
        "wrong issuer": (
            provider.sign({**good, "iss": "http://127.0.0.1:1/other"}),
            f"issuer 'http://127.0.0.1:1/other' is not '{provider.issuer}'",
            f"The access token was issued by http://127.0.0.1:1/other, not by {provider.issuer}",
        ),
        "the issuer with a trailing slash": (
            provider.sign({**good, "iss": provider.issuer + "/"}),
            f"issuer '{provider.issuer}/' is not '{provider.issuer}'",
            f"The access token was issued by {provider.issuer}/, not by {provider.issuer}",
        ),
        "badly signed (another key under the provider's kid)": (
            provider.sign(good, key=stranger, kid="k1"),
            "InvalidSignatureError",
            "signature does not verify",
        ),
        "unknown kid": (
            provider.sign(good, key=stranger),
            "no signing key 'stranger'",
            f"signed with a key (stranger) that {provider.issuer} does not publish",
        ),
        "no subject": (
            provider.sign({"aud": RESOURCE, "groups": ["operators"]}),
            'missing the "sub" claim',
            "The access token lacks the sub claim",
        ),
        "no expiry": (
            _without_exp(provider, good),
            'missing the "exp" claim',
            "The access token lacks the exp claim",
        ),
        "tampered payload": (
            _tampered(provider.token("erin", RESOURCE)),
            "InvalidSignatureError",
            "signature does not verify",
        ),
        "not a JWT": ("eyJ.not-a-jwt", "not a JWT", "neither a token of this server nor a JWT"),
        "alg none": (
            _unsigned(provider, good),
            "algorithm 'none' is not accepted",
            "not signed with an asymmetric algorithm",
        ),
    }


def _without_exp(provider: Provider, claims: dict[str, Any]) -> str:
    import jwt

    body = {"iss": provider.issuer, **claims}
    return jwt.encode(body, provider.keys[0].private, algorithm="RS256", headers={"kid": "k1"})


def _tampered(token: str) -> str:
    import base64

    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["groups"] = ["admin"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def _unsigned(provider: Provider, claims: dict[str, Any]) -> str:
    import jwt

    now = int(time.time())
    return jwt.encode({"iss": provider.issuer, "exp": now + 300, **claims}, None, algorithm="none")


async def test_every_kind_of_bad_token_is_refused_with_401_for_its_reason(
    http: Http, provider: Provider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vmware_pilot.oauth")
    for name, (token, reason, described) in _bad_tokens(provider).items():
        caplog.clear()
        response = await http.post(token)
        assert response.status_code == 401, (name, response.status_code, response.text)
        challenge = response.headers["www-authenticate"]
        assert f'resource_metadata="{METADATA}"' in challenge, name
        assert 'Bearer error="invalid_token", error_description="' in challenge, (name, challenge)
        assert described in challenge and described in response.json()["error_description"], name
        refusals = [r.getMessage() for r in caplog.records if r.name == "vmware_pilot.oauth"]
        assert any(reason in m for m in refusals), (name, refusals)
        assert token not in caplog.text  # the token itself is never logged


async def test_a_token_another_provider_issued_for_this_resource_is_refused_for_its_issuer(
    http: Http, provider: Provider, tmp_path: Path
) -> None:
    # A real second OpenID Provider issues a token for this very resource: right audience, valid
    # signature by its own keys, wrong issuer. It is refused on the issuer, keys not fetched.
    other = Provider(tmp_path / "other", PEOPLE, [new_key("k1")])
    other.start()
    try:
        token = other.token("alice", RESOURCE)
    finally:
        other.stop()
    before = http.keys.fetches
    response = await http.post(token)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert (
        challenge.startswith('Bearer error="invalid_token", ')
        and f'resource_metadata="{METADATA}"' in challenge
    )
    assert f"issued by {other.issuer}, not by {provider.issuer}, the authorization server" in challenge
    assert http.keys.fetches == before


async def test_an_unknown_kid_refetches_the_keys_at_most_once_per_interval(
    http: Http, provider: Provider
) -> None:
    before = http.keys.fetches
    for _ in range(5):
        token = provider.sign({"sub": "alice", "aud": RESOURCE}, key=new_key("stranger"))
        assert (await http.post(token)).status_code == 401
    assert http.keys.fetches - before <= 1


# --- roles from groups ----------------------------------------------------------------------
async def test_a_caller_whose_groups_give_no_role_gets_403(http: Http, provider: Provider) -> None:
    response = await http.post(provider.token("dave", RESOURCE))
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and f'resource_metadata="{METADATA}"' in challenge
    body = response.json()
    assert "visitors" in body["error_description"] and "groups:" in body["hint"]


async def test_the_roles_file_can_take_a_role_away_from_a_group_named_like_it(
    http: Http, provider: Provider, pilot_home: Path
) -> None:
    token = provider.token("carol", RESOURCE)
    assert (await http.post(token)).status_code == 200  # group admin → role admin
    _roles(pilot_home, ROLES + "  admin: ~\n")
    assert (await http.post(token)).status_code == 403


async def test_a_broken_roles_file_refuses_oauth_callers(
    http: Http, provider: Provider, pilot_home: Path
) -> None:
    _roles(pilot_home, ROLES + "  admin: no-such-role\n")
    response = await http.post(provider.token("carol", RESOURCE))
    assert response.status_code == 403
    assert "roles file is broken" in response.json()["error_description"]


async def test_a_required_scope_missing_from_the_token_gets_403(
    provider: Provider, pilot_app: PilotApp, pilot_home: Path
) -> None:
    keys = IssuerKeys(provider.issuer)
    async for http in _http(pilot_app, pilot_home, keys, scopes=("mcp",)):
        without = await http.post(provider.token("alice", RESOURCE))
        assert without.status_code == 403
        challenge = without.headers["www-authenticate"]
        # Every scope the operation needs, in one challenge (MCP 2026-07-28, scope challenges).
        assert 'error="insufficient_scope"' in challenge and 'scope="mcp"' in challenge
        assert f'resource_metadata="{METADATA}"' in challenge
        unauthenticated = await http.post(None)
        assert (
            unauthenticated.headers["www-authenticate"]
            == f'Bearer resource_metadata="{METADATA}", scope="mcp"'
        )
        assert (await http.post(provider.token("alice", RESOURCE, scope="mcp"))).status_code == 200
        metadata = (await http.client.get("/.well-known/oauth-protected-resource")).json()
        assert metadata["scopes_supported"] == ["mcp"]


# --- key rotation ---------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_key_rotation_is_picked_up_once_the_refresh_interval_allows(
    tmp_path: Path, pilot_app: PilotApp, pilot_home: Path
) -> None:
    retired = new_key("old")
    op = Provider(tmp_path / "rotating", PEOPLE, [retired])
    op.start()
    try:
        clock = Clock()
        keys = IssuerKeys(op.issuer, min_refresh=30, clock=clock)
        async for http in _http(pilot_app, pilot_home, keys):
            assert (await http.post(op.token("alice", RESOURCE))).status_code == 200
            assert keys.fetches == 1
            op.restart([new_key("new")])  # the provider now signs with a key Pilot has not seen
            rotated = op.token("alice", RESOURCE)
            assert json.loads(_header(rotated))["kid"] == "new"
            clock.now += 5  # within the interval: no refetch, the token is refused
            assert (await http.post(rotated)).status_code == 401
            assert keys.fetches == 1
            clock.now += 30  # the next unknown kid fetches the key set again
            assert (await http.post(rotated)).status_code == 200
            assert keys.fetches == 2
            assert keys.key_ids() == ["new"]
            old = op.sign({"sub": "alice", "aud": RESOURCE}, key=retired)
            assert (await http.post(old)).status_code == 401  # the retired kid is gone
    finally:
        op.stop()


def _header(token: str) -> str:
    import base64

    head = token.split(".", maxsplit=1)[0]
    return base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)).decode()


async def test_an_issuer_whose_discovery_names_another_issuer_is_refused(provider: Provider) -> None:
    keys = IssuerKeys(provider.issuer + "/")
    with pytest.raises(IssuerUnreachable, match="names issuer"):
        await keys.load()


async def test_an_old_key_set_is_fetched_again_on_the_next_token(
    provider: Provider, pilot_app: PilotApp, pilot_home: Path
) -> None:
    clock = Clock()
    keys = IssuerKeys(provider.issuer, max_age=3600, clock=clock)
    async for http in _http(pilot_app, pilot_home, keys):
        token = provider.token("alice", RESOURCE)
        assert (await http.post(token)).status_code == 200 and keys.fetches == 1
        clock.now += 600
        assert (await http.post(token)).status_code == 200 and keys.fetches == 1  # cached
        clock.now += 3000
        assert (await http.post(token)).status_code == 200 and keys.fetches == 2
