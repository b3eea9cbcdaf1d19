"""A tool waiting for the database's write lock never holds up other callers' requests.

Another connection (as another Pilot process or the operator CLI would) holds SQLite's write
lock with ``BEGIN IMMEDIATE``. A writing tool started meanwhile waits for it; a reader's
``get_workflow_status`` on the same server is answered while that write is still blocked.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.console_locking import write_begins
from tests.support.mcp_client import Client, connect
from vmware_pilot.app import PilotApp
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor

Prepare = Callable[[Client], Awaitable[tuple[str, dict[str, Any]]]]


async def _fresh_for_run(client: Client) -> tuple[str, dict[str, Any]]:
    wf = await client.incident()
    return wf, {"workflow_id": wf}


async def _fresh_for_cancel(client: Client) -> tuple[str, dict[str, Any]]:
    wf = await client.incident()
    return wf, {"workflow_id": wf, "confirm": True, "reason": "not needed"}


async def _at_gate_for_approve(client: Client) -> tuple[str, dict[str, Any]]:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    return wf, {"workflow_id": wf, "approver": "bob", "acknowledge_not_executed": True}


async def _at_gate_for_rollback(client: Client) -> tuple[str, dict[str, Any]]:
    wf = await client.incident()
    await client.ok("run_workflow", workflow_id=wf)
    return wf, {"workflow_id": wf, "confirm": True}


@pytest.mark.parametrize(
    ("tool", "prepare"),
    [
        ("run_workflow", _fresh_for_run),
        ("approve", _at_gate_for_approve),
        ("rollback", _at_gate_for_rollback),
        ("cancel_workflow", _fresh_for_cancel),
    ],
)
@pytest.mark.slow
async def test_a_status_read_is_answered_while_a_writing_tool_waits_for_the_write_lock(
    pilot_app: PilotApp, settings: Settings, tool: str, prepare: Prepare
) -> None:
    async with connect(pilot_app, Actor("alice")) as writer, connect(pilot_app, Actor("rita")) as reader:
        wf, arguments = await prepare(writer)
        before = await reader.status(wf)

        holder = sqlite3.connect(settings.home_path / "pilot.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        released = False
        try:
            with write_begins(pilot_app) as asking:
                blocked = asyncio.create_task(writer.call(tool, **arguments))
                # Guard against a hang only: the tool asks for the lock promptly.
                assert await asyncio.to_thread(asking.wait, 60), f"{tool} never asked for the write lock"
                seen = await reader.status(wf)
                # Answered while the write still waits: nothing of it has landed yet.
                assert not blocked.done()
                assert seen["state"] == before["state"]
                assert seen["audit_log"] == before["audit_log"]
            holder.execute("ROLLBACK")
            released = True
            reply = await blocked
        finally:
            if not released:
                holder.execute("ROLLBACK")
            holder.close()

    assert not reply.is_error, reply.payload
    after = await _status(pilot_app, wf)
    assert after["audit_log"] != before["audit_log"]  # the write went through once the lock was free


async def _status(app: PilotApp, workflow_id: str) -> dict[str, Any]:
    async with connect(app) as client:
        return await client.status(workflow_id)
