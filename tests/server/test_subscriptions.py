"""Subscriptions: a subscribed client hears notifications/resources/updated when its workflow changes,
whichever process made the change."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.support.mcp_client import Client, connect
from tests.support.updates import Updates
from vmware_pilot.app import PilotApp

PILOT = Path(sys.executable).with_name("vmware-pilot")


@asynccontextmanager
async def subscriber(app: PilotApp) -> AsyncIterator[tuple[Client, Updates]]:
    updates = Updates()
    async with connect(app, message_handler=updates) as client:
        yield client, updates


async def test_run_gate_and_approval_each_notify_the_subscriber(fast_app: PilotApp) -> None:
    async with subscriber(fast_app) as (client, updates):
        workflow_id = await client.incident()
        uri = f"pilot://workflows/{workflow_id}"
        await client.session.subscribe_resource(uri)  # type: ignore[arg-type]
        await client.session.subscribe_resource(f"{uri}/audit")  # type: ignore[arg-type]
        await client.ok("run_workflow", workflow_id=workflow_id)  # runs to the gate
        await updates.wait(uri)
        await updates.wait(f"{uri}/audit")
        seen = len(updates.uris)
        await client.ok("approve", workflow_id=workflow_id, approver="alice", acknowledge_not_executed=True)
        await updates.wait(uri, after=seen)


@pytest.mark.slow
async def test_a_change_made_by_another_process_reaches_the_subscriber(fast_app: PilotApp) -> None:
    async with subscriber(fast_app) as (client, updates):
        workflow_id = await client.incident()
        uri = f"pilot://workflows/{workflow_id}"
        await client.session.subscribe_resource(uri)  # type: ignore[arg-type]
        # The operator CLI is a separate process sharing the database.
        done = await anyio.to_thread.run_sync(
            lambda: subprocess.run(
                [str(PILOT), "cancel", workflow_id, "--reason", "not needed", "--yes"],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        )
        assert done.returncode == 0, done.stderr
        await updates.wait(uri)
        assert (await client.status(workflow_id))["state"] == "cancelled"


async def test_after_unsubscribing_only_the_remaining_subscription_is_notified(fast_app: PilotApp) -> None:
    async with subscriber(fast_app) as (client, updates):
        first, second = await client.incident(), await client.incident()
        for workflow_id in (first, second):
            await client.session.subscribe_resource(f"pilot://workflows/{workflow_id}")  # type: ignore[arg-type]
        await client.session.unsubscribe_resource(f"pilot://workflows/{first}")  # type: ignore[arg-type]
        await client.ok("run_workflow", workflow_id=first)
        await client.ok("run_workflow", workflow_id=second)
        await updates.wait(f"pilot://workflows/{second}")
        # The first changed before the second; still watched, its notice would have come no later.
        assert f"pilot://workflows/{first}" not in updates.uris


@pytest.mark.parametrize(
    ("uri", "code"),
    [("pilot://workflows/wf-missing", -32002), ("pilot://templates", -32602), ("pilot://catalog", -32602)],
)
async def test_subscribing_to_something_that_cannot_change_is_refused(
    fast_app: PilotApp, uri: str, code: int
) -> None:
    async with subscriber(fast_app) as (client, _):
        with pytest.raises(MCPError) as refused:
            await client.session.subscribe_resource(uri)  # type: ignore[arg-type]
        assert refused.value.error.code == code


async def test_percent_encoded_aliases_of_one_uri_are_one_subscription(fast_app: PilotApp) -> None:
    async with subscriber(fast_app) as (client, updates):
        workflow_id, sentinel = await client.incident(), await client.incident()
        assert workflow_id.startswith("wf-")
        uri = f"pilot://workflows/{workflow_id}"
        aliases = [
            uri,
            f"pilot://workflows/%77{workflow_id[1:]}",  # %77 is 'w'
            f"pilot://workflows/wf%2D{workflow_id[3:]}",  # %2D is '-'
            f"pilot://workflows/wf%2d{workflow_id[3:]}",
        ]
        for alias in aliases:
            await client.session.subscribe_resource(alias)  # type: ignore[arg-type]
            await client.session.subscribe_resource(f"{alias}/audit")  # type: ignore[arg-type]
        await client.ok("run_workflow", workflow_id=workflow_id)  # runs to the gate
        await updates.wait(uri)
        await updates.wait(f"{uri}/audit")
        # A later change of another workflow: every notification of the first change came before.
        await client.session.subscribe_resource(f"pilot://workflows/{sentinel}")  # type: ignore[arg-type]
        await client.ok("run_workflow", workflow_id=sentinel)
        await updates.wait(f"pilot://workflows/{sentinel}")
    assert set(updates.uris) == {uri, f"{uri}/audit", f"pilot://workflows/{sentinel}"}
    assert updates.uris.count(uri) == updates.uris.count(f"{uri}/audit")
