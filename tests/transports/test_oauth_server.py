"""A real `vmware-pilot mcp --transport http` process with OAuth on and no static token, called by
the Python and TypeScript SDKs' MCP clients, which find the identity provider (a real
oidc-provider on loopback) from the 401 alone and get their access token there: by the client
credentials grant (one client per person), or as a person signing in through the provider's login
form (authorization code with PKCE; the test plays the browser).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import httpx2
import jwt
import pytest
from mcp import ClientSession
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from tests.support.mcp_client import ERAS, Client, sdk_client
from tests.support.oidc_provider import OIDC_DIR, Person, Provider, new_key
from tests.support.server_proc import PilotProcess, start_server
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.client import PilotClient

pytestmark = pytest.mark.slow

PEOPLE = [
    Person("alice", "alice-secret", "Alice Example", ("vmware-operators",)),
    Person("bob", "bob-secret", "Bob Builder", ("vmware-operators", "unrelated")),
    Person("erin", "erin-secret", "Erin", ("reader",)),
]
ROLES = """roles:
  operator:
    approve: others
    tools: "*"
groups:
  vmware-operators: operator
"""
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "go?"}}
REDIRECT = "http://127.0.0.1:9/callback"  # registered for mcp-desktop in tests/oidc/provider.mjs
READS = {"review_workflow", "get_workflow_status", "list_workflows", "get_skill_catalog"}
_DISCOVER = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
}


class _Memory:
    """Token storage for one client session (the SDK's TokenStorage protocol)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    op = Provider(tmp_path_factory.mktemp("oidc"), PEOPLE, [new_key("k1")])
    op.start()
    yield op
    op.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, provider: Provider) -> Iterator[PilotProcess]:
    home = tmp_path_factory.mktemp("pilot")
    pilot_home = home / ".vmware"
    pilot_home.mkdir(mode=0o700)
    (pilot_home / "roles.yaml").write_text(ROLES)
    (pilot_home / "roles.yaml").chmod(0o600)
    # Requiring the scope mcp also makes the resource metadata announce it, so the client asks
    # for it (and not for what the provider's metadata lists, such as openid).
    env = {"VMWARE_PILOT_OAUTH_ISSUER": provider.issuer, "VMWARE_PILOT_OAUTH_SCOPES": "mcp"}
    with start_server(home, ["--transport", "http"], env=env) as proc:
        yield proc
    assert not (pilot_home / "tokens.json").exists()  # it served without any static token


def _signed_in(server: PilotProcess, provider: Provider, pid: str) -> httpx2.AsyncClient:
    """An HTTP client that gets ``pid``'s token from the provider (client credentials) on its own."""
    person = provider.person(pid)
    auth = ClientCredentialsOAuthProvider(
        server_url=server.url,
        storage=_Memory(),
        client_id=person.id,
        client_secret=person.secret,
        issuer=provider.issuer,
    )
    return httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0, read=120.0))


@asynccontextmanager
async def _as(server: PilotProcess, provider: Provider, pid: str) -> AsyncIterator[PilotClient]:
    async with (
        _signed_in(server, provider, pid) as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        yield PilotClient(session, init.server_info.name, init.server_info.version)


async def _tools(client: PilotClient) -> set[str]:
    return {t.name for t in (await client.session.list_tools()).tools}


def test_the_banner_names_the_issuer(server: PilotProcess, provider: Provider) -> None:
    assert f"OAuth access token from {provider.issuer}" in server.stderr()


async def test_the_sdk_client_discovers_the_provider_and_calls_tools(
    server: PilotProcess, provider: Provider
) -> None:
    async with _as(server, provider, "alice") as alice:
        assert alice.server_name == "vmware-pilot"
        assert await _tools(alice) == set(TOOL_NAMES)
        listed = await alice.call("list_workflows", {"limit": 5})
    assert not listed.is_error, listed.payload


def test_the_typescript_sdk_client_discovers_the_provider_and_calls_tools(
    server: PilotProcess, provider: Provider
) -> None:
    bob = provider.person("bob")
    done = subprocess.run(
        ["node", str(OIDC_DIR / "ts_client.mjs"), server.url, bob.id, bob.secret, provider.issuer, "mcp"],
        cwd=OIDC_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["server"] == "vmware-pilot" and out["tools"] == sorted(TOOL_NAMES)
    assert not out["result"].get("isError") and "active_workflows" in out["result"]["structuredContent"]


class _Browser:
    """The person's browser: follows the authorization URL, signs in as ``login`` on the provider's
    (development) login form, consents, and catches the redirect back to the client."""

    def __init__(self, login: str) -> None:
        self.login = login
        self.answer: AuthorizationCodeResult | None = None

    async def open(self, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as browser:
            response = await browser.get(url)
            for _ in range(20):
                location = response.headers.get("location", "")
                if location.startswith(REDIRECT):
                    query = parse_qs(urlsplit(location).query)
                    assert "error" not in query, query
                    self.answer = AuthorizationCodeResult(
                        code=query["code"][0],
                        state=query.get("state", [None])[0],
                        iss=query.get("iss", [None])[0],  # RFC 9207: the client checks it
                    )
                    return
                if response.is_redirect:
                    response = await browser.get(urljoin(str(response.url), location))
                    continue
                assert response.status_code == 200, response.text
                action = re.search(r'<form[^>]*action="([^"]+)"', response.text)
                prompt = re.search(r'name="prompt" value="(\w+)"', response.text)
                assert action and prompt, response.text
                form = {"prompt": prompt.group(1)}
                if prompt.group(1) == "login":
                    form |= {"login": self.login, "password": "any"}
                response = await browser.post(
                    urljoin(str(response.url), html.unescape(action.group(1))), data=form
                )
        raise AssertionError("the provider never redirected back to the client")

    async def callback(self) -> AuthorizationCodeResult:
        assert self.answer is not None
        return self.answer


async def test_a_person_signs_in_with_pkce_and_acts_under_their_own_name(
    server: PilotProcess, provider: Provider
) -> None:
    browser = _Browser("alice")
    storage = _Memory()
    storage.client = OAuthClientInformationFull(  # registered at the provider beforehand
        client_id="mcp-desktop", redirect_uris=[AnyUrl(REDIRECT)], token_endpoint_auth_method="none"
    )
    auth = OAuthClientProvider(
        server_url=server.url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(REDIRECT)],
            grant_types=["authorization_code"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    async with (
        httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        assert {t.name for t in (await session.list_tools()).tools} == set(TOOL_NAMES)
        created = await session.call_tool(
            "create_workflow", {"name": "signed-in", "description": "t", "steps": [GATE]}
        )
        assert not created.is_error and isinstance(created.structured_content, dict)
        workflow_id = created.structured_content["workflow_id"]
        status = await session.call_tool("get_workflow_status", {"workflow_id": workflow_id})
    assert isinstance(status.structured_content, dict)
    assert browser.answer is not None and storage.tokens is not None
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["sub"] == "alice" and claims["client_id"] == "mcp-desktop"  # a user's token, not a client's
    assert status.structured_content["created_by"] == "Alice Example (oidc:alice)"


async def test_a_reader_group_sees_only_the_read_tools(server: PilotProcess, provider: Provider) -> None:
    async with _as(server, provider, "erin") as erin:
        assert await _tools(erin) == READS
        refused = await erin.call("create_workflow", {"name": "x", "description": "x", "steps": [GATE]})
    assert refused.is_error and "Role 'reader' may not call create_workflow" in refused.payload["error"]
    assert "mapped to it in the roles file" in refused.payload["hint"]


async def _at_gate(client: PilotClient) -> str:
    created = await client.call("create_workflow", {"name": "four-eyes", "description": "t", "steps": [GATE]})
    assert not created.is_error, created.payload
    workflow_id = str(created.payload["workflow_id"])
    ran = await client.call("run_workflow", {"workflow_id": workflow_id})
    assert ran.payload["state"] == "awaiting_approval", ran.payload
    return workflow_id


async def test_four_eyes_across_two_people_compares_their_subjects(
    server: PilotProcess, provider: Provider
) -> None:
    async with _as(server, provider, "alice") as alice:
        workflow_id = await _at_gate(alice)
        own = (await alice.call("approve", {"workflow_id": workflow_id})).payload
        assert "you created" in own["error"] and own["role"] == "operator"
    async with _as(server, provider, "bob") as bob:
        named: dict[str, Any] = (
            await bob.call("approve", {"workflow_id": workflow_id, "approver": "oidc:alice"})
        ).payload
        assert "differs from the authenticated caller" in named["error"]
        approved = (await bob.call("approve", {"workflow_id": workflow_id, "approver": "oidc:bob"})).payload
    assert "error" not in approved, approved
    assert approved["created_by"] == "Alice Example (oidc:alice)"
    assert approved["approved_by"] == "Bob Builder (oidc:bob)"
    actors = {(e["action"], e["actor"]) for e in approved["audit_log"]}
    assert ("run_started", "Alice Example (oidc:alice)") in actors
    assert ("approved", "Bob Builder (oidc:bob)") in actors


async def test_a_raw_request_without_a_token_learns_where_the_metadata_is(
    server: PilotProcess, provider: Provider
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        metadata_url = f"{server.base}/.well-known/oauth-protected-resource/mcp"
        assert response.status_code == 401
        assert (
            response.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}", scope="mcp"'
        )
        metadata = (await http.get(metadata_url)).json()
        provider_metadata = (await http.get(f"{provider.issuer}/.well-known/openid-configuration")).json()
    # What a 2026-07-28 client needs: this resource, its authorization server written exactly as
    # that server's own metadata writes its issuer (compared as a simple string), the scopes.
    assert metadata == {
        "resource": server.url,
        "authorization_servers": [provider_metadata["issuer"]],
        "bearer_methods_supported": ["header"],
        "resource_name": "vmware-pilot",
        "scopes_supported": ["mcp"],
    }
    assert "S256" in provider_metadata["code_challenge_methods_supported"]


async def test_a_token_from_another_provider_is_refused_with_a_clear_challenge(
    server: PilotProcess, provider: Provider, tmp_path: Path
) -> None:
    other = Provider(tmp_path / "other", PEOPLE, [new_key("k1")])
    other.start()
    try:
        token = other.token("alice", server.url, scope="mcp")  # this resource, the other issuer
    finally:
        other.stop()
    headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(server.url, json=_DISCOVER, headers=headers)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge == (
        f'Bearer error="invalid_token", error_description="The access token was issued by '
        f"{other.issuer}, not by {provider.issuer}, the authorization server of this resource (see "
        f'its protected resource metadata)", resource_metadata="{server.base}/.well-known/'
        f'oauth-protected-resource/mcp", scope="mcp"'
    )
    assert response.json()["error"] == "invalid_token"
    assert "OAuth access token refused: issuer" in server.stderr() and token not in server.stderr()


@pytest.mark.parametrize("era", ERAS)
async def test_the_python_sdk_pinned_to_each_era_gets_its_token_and_walks(
    server: PilotProcess, provider: Provider, era: str
) -> None:
    async with (
        _signed_in(server, provider, "alice") as http,
        sdk_client(streamable_http_client(server.url, http_client=http), era=era) as session,
    ):
        assert session.protocol_version == era
        client = Client(session)
        created = await client.incident()
        status = await client.status(created)
        assert status["created_by"] == "Alice Example (oidc:alice)"
        assert await client.refused("get_workflow_status", workflow_id="wf-nope")
