"""The HTTP layer in-process: options, Host/Origin allow-lists, /healthz, and the start-up self-check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.errors import InvalidInput, PilotError
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.http import (
    HttpOptions,
    build_http_app,
    parse_public_names,
    public_base,
    self_check,
)
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


def test_public_names_are_split_on_commas_and_trimmed() -> None:
    assert parse_public_names(" a.example.com, ,10.0.0.5,") == ("a.example.com", "10.0.0.5")


def test_https_allows_only_its_public_names_with_and_without_the_port() -> None:
    options = HttpOptions("https", public_names=("Pilot.Example.com", "2001:db8::1"))
    assert options.allowed_hosts(8443) == [
        "pilot.example.com",
        "pilot.example.com:8443",
        "[2001:db8::1]",
        "[2001:db8::1]:8443",
    ]
    assert "https://pilot.example.com:8443" in options.allowed_origins(8443)
    assert not any(o.startswith("http://") for o in options.allowed_origins(8443))


def test_loopback_http_also_allows_the_loopback_names_and_both_schemes() -> None:
    options = HttpOptions("http", public_names=("pilot.example.com",))
    hosts = options.allowed_hosts(8080)
    assert {"pilot.example.com", "127.0.0.1:8080", "localhost:8080", "[::1]:8080"} <= set(hosts)
    origins = options.allowed_origins(8080)
    assert "http://localhost:8080" in origins and "https://pilot.example.com" in origins


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_http_accepts_loopback_addresses(host: str) -> None:
    assert HttpOptions("http", host=host).validated().host == host


def test_out_of_range_port_is_refused() -> None:
    with pytest.raises(InvalidInput, match="out of range"):
        HttpOptions("http", port=70000).validated()


async def _guarded(pilot_app: PilotApp, pilot_home: Path) -> httpx.AsyncClient:
    tokens = TokenStore(pilot_home / "tokens.json")
    tokens.create("alice", "admin")
    asgi = build_http_app(
        pilot_app, HttpOptions("http"), 8080, tokens, RoleBook(pilot_home / "r.yaml", TOOL_NAMES)
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1:8080")


async def test_healthz_needs_no_token_or_host_and_other_methods_are_405(
    pilot_app: PilotApp, pilot_home: Path
) -> None:
    async with await _guarded(pilot_app, pilot_home) as client:
        ok = await client.get("/healthz/", headers={"host": "whatever"})
        assert ok.status_code == 200 and ok.json() == {"status": "ok"}
        assert (await client.post("/healthz")).status_code == 405


async def test_the_built_app_passes_the_self_check(pilot_app: PilotApp, pilot_home: Path) -> None:
    tokens = TokenStore(pilot_home / "tokens.json")
    tokens.create("alice", "admin")
    asgi = build_http_app(
        pilot_app, HttpOptions("http"), 8080, tokens, RoleBook(pilot_home / "r.yaml", TOOL_NAMES)
    )
    await self_check(asgi, "127.0.0.1:8080")


async def test_the_self_check_refuses_an_app_that_answers_without_a_token() -> None:
    async def open_app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    with pytest.raises(PilotError, match="unauthenticated requests were not refused") as exc:
        await self_check(open_app, "127.0.0.1:8080")
    assert "POST /mcp without a token → 200" in exc.value.message


def test_the_public_url_is_configured_or_derived_without_a_default_port() -> None:
    https = HttpOptions("https", public_names=("pilot.example.com", "10.0.0.5"))
    assert public_base(https, 443) == "https://pilot.example.com"
    assert public_base(https, 8443) == "https://pilot.example.com:8443"
    assert public_base(HttpOptions("http"), 8080) == "http://127.0.0.1:8080"
    assert public_base(https, 8443, "https://proxy.example.com/") == "https://proxy.example.com"


async def test_the_self_check_with_oauth_wants_the_resource_metadata_in_the_401(
    pilot_app: PilotApp, pilot_home: Path
) -> None:
    tokens = TokenStore(pilot_home / "tokens.json")
    tokens.create("alice", "admin")
    asgi = build_http_app(
        pilot_app, HttpOptions("http"), 8080, tokens, RoleBook(pilot_home / "r.yaml", TOOL_NAMES)
    )
    metadata = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
    with pytest.raises(PilotError, match="401 without resource_metadata"):
        await self_check(asgi, "127.0.0.1:8080", metadata)  # an app without OAuth does not name it
