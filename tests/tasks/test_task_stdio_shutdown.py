"""A real `vmware-pilot mcp` (stdio) whose client leaves while a run it started as a task goes on:
the server lets the run finish and records the task's result before it exits
(``serve_stdio`` awaits ``PilotMCPServer.drain`` before the service drains and the app closes,
so this does not rest on how long closing takes), so the task is ``completed`` in the database,
not ``failed`` for a shutdown. The client speaks raw 2026-07-28 JSON-RPC lines, so the test
decides when stdin closes; the skill holds the run at its gate's inspection
(tests/support/fake_servers/held_server.py) until the client has left."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.support import FAKE_SERVERS
from tests.support.server_proc import PILOT, clean_env
from tests.support.task_server import EVENTS, GATE, POWER_ON
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.server.tasks import EXTENSION_ID

pytestmark = pytest.mark.slow

GUARD = 120.0  # seconds: a guard against hanging, never a timing claim
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION_ID: {}}},
}


def _ask(proc: subprocess.Popen[str], ident: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    params = {"name": tool, "arguments": arguments, "_meta": META}
    proc.stdin.write(
        json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}) + "\n"
    )
    proc.stdin.flush()
    while True:
        message = json.loads(proc.stdout.readline())
        if message.get("id") == ident:
            assert "result" in message, message
            result: dict[str, Any] = message["result"]
            return result


def _wait(condition: Any, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def test_a_stdio_server_whose_client_left_records_the_result_of_its_task(tmp_path: Path) -> None:
    held = tmp_path / "held"
    held.mkdir()
    skill = f"{sys.executable} {FAKE_SERVERS / 'held_server.py'} {held}"
    env = clean_env(
        tmp_path,
        {
            "VMWARE_PILOT_DISPATCH": "stdio",
            "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"monitor": skill, "aiops": skill}),
        },
    )
    proc = subprocess.Popen(
        [str(PILOT), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        created = _ask(
            proc,
            1,
            "create_workflow",
            {"name": "held", "description": "t", "steps": [EVENTS, GATE, POWER_ON]},
        )
        workflow_id = created["structuredContent"]["workflow_id"]
        handle = _ask(proc, 2, "run_workflow", {"workflow_id": workflow_id})
        assert handle["resultType"] == "task" and handle["status"] == "working", handle
        _wait((held / "reached").exists, "the run reading the gate's VM")
        assert proc.stdin is not None
        proc.stdin.close()  # the client leaves, its task's run still going
        (held / "release").touch()
        _wait(lambda: proc.poll() is not None, "the server exiting once the run ended")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == 0
    with closing(build_app(Settings(home=tmp_path / ".vmware"))) as app:
        row = app.store.tasks.task(handle["taskId"])
        state = app.store.workflows.load(workflow_id).state
    assert row is not None and row.status == "completed", row
    assert (
        row.outcome is not None and row.outcome["result"]["structuredContent"]["state"] == "awaiting_approval"
    )
    assert state is WorkflowState.AWAITING_APPROVAL
