"""Resources, subscriptions and protocol edges through the real entry points: stdio and HTTP processes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextResourceContents

from tests.support.mcp_client import INCIDENT
from tests.support.server_proc import INIT, PILOT, clean_env, start_server
from tests.support.updates import Updates
from vmware_pilot.transports.tokens import TokenStore

FAST = {"VMWARE_PILOT_WATCH_INTERVAL": "0.1"}


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PILOT), *args],
        env=clean_env(home, FAST),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def subscribe_and_cancel_elsewhere(session: ClientSession, updates: Updates, home: Path) -> None:
    """Create a workflow, subscribe to it, cancel it from another process, and wait for the notice."""
    created = await session.call_tool(
        "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
    )
    assert created.structured_content is not None
    uri = f"pilot://workflows/{created.structured_content['workflow_id']}"
    await session.subscribe_resource(uri)  # type: ignore[arg-type]
    done = await anyio.to_thread.run_sync(
        lambda: cli(home, "cancel", uri.rsplit("/", 1)[1], "--reason", "elsewhere", "--yes")
    )
    assert done.returncode == 0, done.stderr
    await updates.wait(uri, within=60)  # a change made by another process
    read = await session.read_resource(uri)  # type: ignore[arg-type]
    content = read.contents[0]
    assert isinstance(content, TextResourceContents)
    assert json.loads(content.text)["state"] == "cancelled"


@pytest.mark.slow
async def test_stdio_subscriber_hears_a_change_made_by_another_process(tmp_path: Path) -> None:
    updates = Updates()
    params = StdioServerParameters(command=str(PILOT), args=["mcp"], env=clean_env(tmp_path, FAST))
    errors = (tmp_path / "stderr.log").open("w")
    async with (
        stdio_client(params, errlog=errors) as (read, write),
        ClientSession(read, write, message_handler=updates) as session,
    ):
        await session.initialize()
        await subscribe_and_cancel_elsewhere(session, updates, tmp_path)
    errors.close()


@pytest.mark.slow
def test_stdio_answers_an_unknown_method_with_method_not_found_and_a_quiet_log(tmp_path: Path) -> None:
    lines = [
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *({"jsonrpc": "2.0", "id": 10 + i, "method": "server/discover", "params": {}} for i in range(5)),
        {"jsonrpc": "2.0", "id": 99, "method": "ping"},
    ]
    done = subprocess.run(
        [str(PILOT), "mcp"],
        input="".join(json.dumps(m) + "\n" for m in lines),
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    replies = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert all(replies[10 + i]["error"]["code"] == -32601 for i in range(5))
    assert replies[99]["result"] == {}
    assert "server/discover" not in done.stderr and "Failed to validate" not in done.stderr
    assert done.returncode == 0, done.stderr


@asynccontextmanager
async def http_session(url: str, token: str, updates: Updates) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, message_handler=updates) as session,
    ):
        await session.initialize()
        yield session


def _sse_json(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("application/json"):
        data: dict[str, Any] = response.json()
        return data
    payload = next(line[5:] for line in response.text.splitlines() if line.startswith("data:"))
    data = json.loads(payload)
    return data


@pytest.mark.slow
async def test_http_subscriber_hears_a_change_and_unknown_methods_get_method_not_found(
    tmp_path: Path,
) -> None:
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    store = TokenStore(pilot_home / "tokens.json")
    admin, reader = store.create("ann", "admin"), store.create("rita", "reader")
    with start_server(tmp_path, ["--transport", "http"], env=FAST) as server:
        updates = Updates()
        async with http_session(server.url, admin, updates) as session:
            await subscribe_and_cancel_elsewhere(session, updates, tmp_path)
        reader_updates = Updates()
        async with http_session(server.url, reader, reader_updates) as session:
            await subscribe_and_cancel_elsewhere_as_reader(
                session, reader_updates, tmp_path, admin, server.url
            )
        headers = {
            "Authorization": f"Bearer {admin}",
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            init = await http.post(server.url, json=INIT)
            headers = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            await http.post(
                server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            )
            reply = await http.post(
                server.url, json={"jsonrpc": "2.0", "id": 5, "method": "server/discover"}, headers=headers
            )
            assert _sse_json(reply)["error"]["code"] == -32601
        assert server.stop() == 0
    assert "server/discover" not in server.stderr() and "Failed to validate" not in server.stderr()


async def subscribe_and_cancel_elsewhere_as_reader(
    session: ClientSession, updates: Updates, home: Path, admin: str, url: str
) -> None:
    """A reader cannot create workflows, but may subscribe to one an admin made and read it."""
    async with http_session(url, admin, Updates()) as admin_session:
        created = await admin_session.call_tool(
            "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
        )
    assert created.structured_content is not None
    workflow_id = created.structured_content["workflow_id"]
    uri = f"pilot://workflows/{workflow_id}"
    await session.subscribe_resource(uri)  # type: ignore[arg-type]
    done = await anyio.to_thread.run_sync(lambda: cli(home, "cancel", workflow_id, "--yes"))
    assert done.returncode == 0, done.stderr
    await updates.wait(uri, within=60)  # a change made by another process


@pytest.mark.slow
async def test_http_offers_only_the_exposed_tools_to_every_caller(tmp_path: Path) -> None:
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    admin = TokenStore(pilot_home / "tokens.json").create("ann", "admin")
    args = ["--transport", "http", "--expose", "read", "--allow-write", "cancel_workflow"]
    with start_server(tmp_path, args) as server:
        async with http_session(server.url, admin, Updates()) as session:
            listed = [t.name for t in (await session.list_tools()).tools]
            assert listed == [
                "cancel_workflow",
                "review_workflow",
                "get_workflow_status",
                "list_workflows",
                "get_skill_catalog",
            ]
            hidden = await session.call_tool(
                "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
            )
            assert hidden.is_error is True
            assert hidden.structured_content is not None
            assert hidden.structured_content["error"] == "Unknown tool: create_workflow_from_template"
            assert hidden.structured_content["field"] == "name"
            listing = await session.call_tool("list_workflows", {})
            assert listing.is_error is False
        assert server.stop() == 0
