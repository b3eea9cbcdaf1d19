"""One clock (issue 31): a gate's expiry, its approvals' times and the steps' times are the
database's clock (``Store.now``; SQLite: the host's), so replicas whose own clocks disagree agree on
every gate. The slow test runs one replica under libfaketime two hours ahead of the others
(scripts/faketime-setup.sh installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.backends import Database
from tests.support.mcp_client import Client, connect
from vmware_pilot.app import PilotApp
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import from_iso

GATE = {
    "action": "require_approval",
    "skill": "pilot",
    "tool": "approve",
    "params": {"message": "Within the hour", "expires_in_minutes": 60},
}
READ = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}
AHEAD = timedelta(hours=2)


def _gate(status: dict[str, Any]) -> dict[str, Any]:
    gates = status["gates"]
    assert [g["index"] for g in gates] == [0], gates
    return dict(gates[0])


def _at(text: str) -> datetime:
    when = from_iso(text)
    assert when is not None, text
    return when


async def test_gate_expiry_and_approval_times_read_the_stores_clock(
    app: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cheap: with the store's clock moved past the expiry, every view and approve say expired,
    whatever this host's clock says; the approval's time is the store's."""
    async with connect(app, Actor("tester")) as client:
        wid = str(
            (await client.ok("create_workflow", name="c", description="t", steps=[GATE, READ]))["workflow_id"]
        )
        await client.ok("run_workflow", workflow_id=wid)
        gate = _gate(await client.status(wid))
        assert _at(gate["expires_at"]) - _at(gate["reached_at"]) == timedelta(minutes=60)
        assert gate["expired"] is False

        now = app.store.now
        monkeypatch.setattr(app.store, "now", lambda: now() + timedelta(minutes=61))
        assert _gate(await client.status(wid))["expired"] is True
        late = await client.refused("approve", workflow_id=wid, approver="alice", gate_step=0)
        assert late["refused"] == "gate_expired"

        monkeypatch.setattr(app.store, "now", lambda: now() + timedelta(minutes=30))
        out = await client.ok("approve", workflow_id=wid, approver="alice", gate_step=0)
    assert out["steps"][0]["result"]["approved_by"] == "alice"
    approved_at = _at(_gate(await _status(app, wid))["approvals"][0]["at"])
    assert approved_at - _at(gate["reached_at"]) >= timedelta(minutes=29), "the store's time, not the host's"


async def _status(app: PilotApp, wid: str) -> dict[str, Any]:
    async with connect(app) as client:
        return await client.status(wid)


@asynccontextmanager
async def _replica_ahead(home: Path, database: Database) -> AsyncIterator[Client]:
    """A stdio Pilot on the same database, its own clock two hours ahead (libfaketime)."""
    faketime = shutil.which("faketime")
    assert faketime, "libfaketime is missing: run scripts/faketime-setup.sh (scripts/test.sh does)"
    env = {
        **os.environ,
        "VMWARE_PILOT_HOME": str(home),
        "VMWARE_PILOT_DATABASE_URL": database.settings_url,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    command = [faketime, "-f", "+2h", sys.executable]
    seen = subprocess.run(
        [*command, "-c", "import time; print(time.time())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    ahead = float(seen.stdout) - datetime.now().timestamp()
    assert ahead > AHEAD.total_seconds() - 600, f"faketime did not move the clock ({ahead:.0f} s)"
    params = StdioServerParameters(
        command=faketime, args=["-f", "+2h", sys.executable, "-m", "vmware_pilot"], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield Client(session)


@pytest.mark.slow
@pytest.mark.backends("postgresql")
async def test_a_replica_two_hours_ahead_agrees_with_the_others_on_every_gates_expiry(
    app: PilotApp, backend_settings: Settings, database: Database, tmp_path: Path
) -> None:
    async with connect(app, Actor("tester")) as here, _replica_ahead(tmp_path / "ahead", database) as ahead:
        reached_here = str(
            (await here.ok("create_workflow", name="h", description="t", steps=[GATE, READ]))["workflow_id"]
        )
        await here.ok("run_workflow", workflow_id=reached_here)
        reached_ahead = str(
            (await ahead.ok("create_workflow", name="a", description="t", steps=[GATE, READ]))["workflow_id"]
        )
        await ahead.ok("run_workflow", workflow_id=reached_ahead)

        for wid in (reached_here, reached_ahead):
            seen_here, seen_ahead = _gate(await here.status(wid)), _gate(await ahead.status(wid))
            keys = ("reached_at", "expires_at", "expired")
            assert [seen_here[k] for k in keys] == [seen_ahead[k] for k in keys], wid
            assert seen_here["expired"] is False, "a fresh 60-minute gate is not expired on any replica"
            assert _at(seen_here["expires_at"]) - _at(seen_here["reached_at"]) == timedelta(minutes=60)
        gap = _at(_gate(await here.status(reached_ahead))["reached_at"]) - _at(
            _gate(await here.status(reached_here))["reached_at"]
        )
        assert abs(gap) < AHEAD / 4, f"the gate reached ahead was stamped {gap} after the other"

        # The replica ahead approves a gate reached here, and this one a gate reached there.
        there = await ahead.ok("approve", workflow_id=reached_here, approver="alice", gate_step=0)
        assert there["steps"][0]["status"] == "success"
        back = await here.ok("approve", workflow_id=reached_ahead, approver="bob", gate_step=0)
        assert back["steps"][0]["status"] == "success"
        at = _at(_gate(await here.status(reached_here))["approvals"][0]["at"])
        assert abs(at - app.store.now()) < AHEAD / 4, "the approval ahead is stamped on the database's clock"
