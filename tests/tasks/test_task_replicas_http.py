"""The issue's "done when" for tasks: a dispatched run started as a task on one real HTTP replica is
followed with ``tasks/get`` from another and cancelled there with ``tasks/cancel``, under
``cancel_workflow``'s rules; the workflow ends cancelled in the database both share.

Two real `vmware-pilot mcp --transport http` processes on one PostgreSQL database
(tests/support/http_replicas.py) dispatch to a skill server whose reading of a VM waits until the
test lets it go (tests/support/fake_servers/held_server.py): the run stands at its gate's
inspection, its read done and nothing in flight, as long as the test needs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import Client as SdkClient
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.support import FAKE_SERVERS
from tests.support.backends import Database
from tests.support.http_replicas import replicas
from tests.support.server_proc import PilotProcess
from tests.support.task_server import EVENTS, GATE, POWER_ON, TaskHandle, call, task_request, tasks_client
from vmware_pilot.server.tasks import PROGRESS_META, REFUSAL_META

pytestmark = [pytest.mark.slow, pytest.mark.backends("postgresql")]

GUARD = 120.0  # seconds: a guard against hanging, never a timing claim


@asynccontextmanager
async def _on(server: PilotProcess, secret: str) -> AsyncIterator[SdkClient]:
    """A 2026-07-28 client that declares the tasks extension, talking to ``server`` only."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60) as http:
        async with tasks_client(streamable_http_client(server.url, http_client=http)) as client:
            yield client


def _payload(result: Any) -> dict[str, Any]:
    assert isinstance(result, CallToolResult) and isinstance(result.structured_content, dict), result
    return result.structured_content


async def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not await condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.1)


async def test_a_run_started_as_a_task_on_one_replica_is_followed_and_cancelled_from_another(
    database: Database, tmp_path: Path
) -> None:
    held = tmp_path / "held"
    held.mkdir()
    skill = f"{sys.executable} {FAKE_SERVERS / 'held_server.py'} {held}"
    env = {
        "VMWARE_PILOT_DISPATCH": "stdio",
        "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"monitor": skill, "aiops": skill}),
    }
    with replicas(database.raw_url, tmp_path, env) as ((a, b), secret):
        async with _on(a, secret) as on_a, _on(b, secret) as on_b:
            created = _payload(
                await call(
                    on_a, "create_workflow", name="held", description="t", steps=[EVENTS, GATE, POWER_ON]
                )
            )
            workflow_id = created["workflow_id"]
            handle = await call(on_a, "run_workflow", workflow_id=workflow_id)
            assert isinstance(handle, TaskHandle) and handle.status == "working", handle

            async def reached() -> bool:
                return (held / "reached").exists()

            await _until(reached, "the run reading the gate's VM")
            working = await task_request(on_b, "tasks/get", handle.task_id)
            assert working["status"] == "working" and working["taskId"] == handle.task_id
            assert working["_meta"][PROGRESS_META] == {"done": 1, "total": 3}  # the read; the gate waits

            ack = await task_request(on_b, "tasks/cancel", handle.task_id)
            assert ack["resultType"] == "complete" and set(ack) <= {"resultType", "_meta"}
            (held / "release").touch()  # the run on A goes on, and finds its workflow cancelled

            async def ended() -> bool:
                return (await task_request(on_b, "tasks/get", handle.task_id))["status"] != "working"

            await _until(ended, "the task ending")
            there = await task_request(on_b, "tasks/get", handle.task_id)
            here = await task_request(on_a, "tasks/get", handle.task_id)
            status = _payload(await call(on_b, "get_workflow_status", workflow_id=workflow_id))
            again = await task_request(on_a, "tasks/cancel", handle.task_id)  # a result, as every refusal
    assert there["status"] == here["status"] == "cancelled" and "result" not in there
    assert status["state"] == "cancelled"
    cancelled = [e for e in status["audit_log"] if e["action"] == "cancelled"]
    assert [(e["actor"], e["detail"]) for e in cancelled] == [
        ("token:alice", "cancelled through its MCP task (run_workflow)")
    ]
    steps = {step["index"]: step["status"] for step in status["steps"]}
    assert steps[0] == "success" and steps[2] != "success"  # the write was never sent
    refusal = again["_meta"][REFUSAL_META]
    assert "already cancelled" in refusal["error"] and refusal["workflow_id"] == workflow_id
