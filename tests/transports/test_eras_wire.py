"""One server, both protocol eras, over the wire: the SDK's client pinned to 2025-11-25 (the
``initialize`` handshake, an HTTP session) and one pinned to 2026-07-28 (no handshake: every
request one stateless POST carrying its own ``_meta``) each walk the demo and get refusals as
results whose structured content matches the output schema, over streamable HTTP (in this process
through the ASGI app, and a real `vmware-pilot mcp --transport http`) and over stdio (a real
`vmware-pilot mcp`); over a real server, a client of each era then reads a refusal of every tool
(tests/support/refusals.py) as a result, the same payloads in both eras. The in-memory counterpart
is tests/server/test_eras.py."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.subscriptions import ResourceUpdated
from starlette.types import ASGIApp

from tests.support.asgi import BASE, lifespan
from tests.support.eras import demo_walk, every_refusal, refusals
from tests.support.mcp_client import ERAS, LEGACY, MODERN, Client, sdk_client
from tests.support.refusals import REFUSALS
from tests.support.server_proc import PILOT, clean_env, start_server
from vmware_pilot import __version__
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore


@pytest.fixture
def pilot_app(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


async def identity(client: Client, era: str) -> tuple[str, str]:
    """The server's name and version as a client of ``era`` learns them: ``initialize``'s
    serverInfo, or on 2026-07-28 the ``serverInfo`` of ``server/discover``'s ``_meta``."""
    if era == LEGACY:
        info = client.session.server_info
        assert info is not None
        return info.name, info.version
    discovered = await client.session.session.send_discover(era)
    assert era in discovered["supportedVersions"] and "tools" in discovered["capabilities"], discovered
    stamped = discovered["_meta"]["io.modelcontextprotocol/serverInfo"]
    return stamped["name"], stamped["version"]


@asynccontextmanager
async def http_client(
    url: str, token: str, era: str, transport: httpx2.AsyncBaseTransport | None = None
) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP to ``url``, sending ``token`` as the bearer."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60, transport=transport) as http:
        async with sdk_client(streamable_http_client(url, http_client=http), era=era) as session:
            assert session.protocol_version == era
            yield Client(session)


@pytest.mark.parametrize("era", ERAS)
async def test_each_era_walks_the_demo_over_http_in_process(
    pilot_app: PilotApp, pilot_home: Path, era: str
) -> None:
    tokens = TokenStore(pilot_home / "tokens.json")
    admin, reader = tokens.create("ann", "admin"), tokens.create("rita", "reader")
    asgi: ASGIApp = build_http_app(
        pilot_app, HttpOptions("http"), 8080, tokens, RoleBook(pilot_home / "roles.yaml", TOOL_NAMES)
    )
    async with lifespan(asgi):
        transport = httpx2.ASGITransport(app=asgi)
        async with http_client(f"{BASE}/mcp", admin, era, transport) as client:
            await demo_walk(client, dispatched=False, approver="")
            await refusals(client)
            assert list(await every_refusal(client)) == list(REFUSALS)
            created = await client.incident()
        async with http_client(f"{BASE}/mcp", reader, era, transport) as client:
            # The caller of each request is its own bearer's, in either era: a reader may read…
            status = await client.status(created)
            assert status["state"] == "pending" and status["created_by"] == "token:ann"
            # …and is refused a write, as a result naming its role.
            refused = await client.refused("run_workflow", workflow_id=created)
            assert refused["role"] == "reader" and refused["tool"] == "run_workflow"
            listed = [t.name for t in (await client.session.list_tools()).tools]
    assert "run_workflow" not in listed and "get_workflow_status" in listed


@pytest.mark.slow
async def test_both_eras_walk_the_demo_against_one_real_http_server(tmp_path: Path) -> None:
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    admin = TokenStore(pilot_home / "tokens.json").create("ann", "admin")
    seen: dict[str, dict[str, Any]] = {}
    with start_server(tmp_path, ["--transport", "http"]) as server:
        for era in ERAS:
            async with http_client(server.url, admin, era) as client:
                await demo_walk(client, dispatched=False, approver="")
                await refusals(client)
                seen[era] = await every_refusal(client)
                assert await identity(client, era) == ("vmware-pilot", __version__)
        assert server.stop() == 0, server.stderr()
    assert seen[MODERN] == seen[LEGACY]


@pytest.mark.slow
async def test_each_era_walks_the_demo_over_a_real_stdio_server(tmp_path: Path) -> None:
    seen: dict[str, dict[str, Any]] = {}
    for era in ERAS:
        (tmp_path / era).mkdir()
        params = StdioServerParameters(command=str(PILOT), args=["mcp"], env=clean_env(tmp_path / era))
        async with sdk_client(params, era=era) as session:
            assert session.protocol_version == era
            client = Client(session)
            await demo_walk(client, dispatched=False)
            await refusals(client)
            seen[era] = await every_refusal(client)
            assert await identity(client, era) == ("vmware-pilot", __version__)
    assert seen[MODERN] == seen[LEGACY]


@pytest.mark.slow
async def test_a_2026_listen_stream_over_a_real_http_server_hears_a_change_made_by_the_cli(
    tmp_path: Path,
) -> None:
    """subscriptions/listen over stateless HTTP: the stream is the response to one POST; the change
    is made by the operator CLI, another process on the same database."""
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    admin = TokenStore(pilot_home / "tokens.json").create("ann", "admin")
    env = {"VMWARE_PILOT_WATCH_INTERVAL": "0.05"}
    with start_server(tmp_path, ["--transport", "http"], env=env) as server:
        async with http_client(server.url, admin, MODERN) as client:
            workflow_id = await client.incident()
            uri = f"pilot://workflows/{workflow_id}"
            async with client.session.listen(resource_subscriptions=[uri]) as stream:
                assert stream.honored.resource_subscriptions == [uri]
                done = await anyio.to_thread.run_sync(
                    lambda: subprocess.run(
                        [str(PILOT), "cancel", workflow_id, "--reason", "not needed", "--yes"],
                        env=clean_env(tmp_path, env), cwd=tmp_path, capture_output=True, text=True,
                        timeout=120, check=False,
                    )
                )  # fmt: skip
                assert done.returncode == 0, done.stderr
                with anyio.fail_after(30):
                    event = await anext(stream)
                assert isinstance(event, ResourceUpdated) and event.uri == uri
            assert (await client.status(workflow_id))["state"] == "cancelled"
