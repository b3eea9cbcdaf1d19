"""Fenced runs on real processes and a real PostgreSQL (issue 31): a replica paused between marking
a write running and sending it sends nothing once another replica took over; a PostgreSQL restart
right after a step returned loses no outcome; a single replica whose database was away for longer
than the lease neither sweeps its own run nor loses it.

Pauses are found exactly, never by sleeping: the replica (tests/support/replica.py ``pause``)
SIGSTOPs itself right after the commit that marked the write running, and the test waits for the
stop with ``waitpid(WUNTRACED)``; the restart begins inside the skill's answer and ends once the
store's save has failed (a hook on the store's ``save``). The skill of the paused replica is a real
MCP server that logs every call it receives (tests/support/chaos_skill.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support import CHAOS_SKILL
from tests.support.fakes import ScriptedDispatcher, SteppedDispatcher
from tests.support.pg_server import PgServer
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.execution.runlease import run_key
from vmware_pilot.engine.requests import CreateRequest, RunRequest
from vmware_pilot.engine.sweeper import Sweeper, sweeping
from vmware_pilot.errors import DatabaseUnavailable

pytestmark = [pytest.mark.slow, pytest.mark.backends("postgresql")]
REPO = Path(__file__).resolve().parents[2]
LEASE = 3
GUARD = 120  # seconds: a guard against hanging, not a timing claim


def on(vm: str) -> dict[str, Any]:
    return {"action": f"on_{vm}", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": vm}}


@contextmanager
def pilot(
    backend_settings: Settings, dispatcher: ScriptedDispatcher, lease: float = LEASE
) -> Iterator[PilotApp]:
    app = build_app(backend_settings.model_copy(update={"lease_seconds": lease}), dispatcher=dispatcher)
    try:
        yield app
    finally:
        app.close()


@contextmanager
def paused_replica(backend_settings: Settings, log: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Replica A (tests/support/replica.py ``pause``), stopped right after it marked its write
    running; yields it (stopped) and the workflow's id."""
    skill = f"{sys.executable} {CHAOS_SKILL}"
    env = {
        **os.environ,
        "HOME": str(log.parent),
        "VMWARE_PILOT_HOME": str(backend_settings.home_path),
        "VMWARE_PILOT_DATABASE_URL": backend_settings.database_url,
        "VMWARE_PILOT_LEASE_SECONDS": str(LEASE),
        "VMWARE_PILOT_DISPATCH": "stdio",
        "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"aiops": skill}),
        "CHAOS_LOG": str(log),
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.replica", "pause"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        wid = proc.stdout.readline().strip()
        assert wid, "the replica created its workflow"
        _, status = os.waitpid(proc.pid, os.WUNTRACED)  # returns at the SIGSTOP, exactly
        assert os.WIFSTOPPED(status), "the replica stopped itself after marking the write running"
        yield proc, wid
    finally:
        if proc.poll() is None:
            proc.kill()
            os.kill(proc.pid, signal.SIGCONT)
        proc.wait(timeout=60)


async def sweep_until_continued(app: PilotApp, wid: str) -> None:
    """Sweep as a server's loop does until this replica continued ``wid`` (once the paused
    replica's run lease expired on the database's clock)."""
    sweeper = Sweeper(lambda: app.service.runner, interval=0.1)
    deadline = time.monotonic() + GUARD
    while await sweeper.sweep() != [wid]:
        assert time.monotonic() < deadline, "the workflow was never continued"
        await asyncio.sleep(0.1)


async def test_a_replica_paused_between_marking_a_write_running_and_sending_it_sends_nothing_after_a_takeover(
    backend_settings: Settings, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    log.touch()
    with (
        pilot(backend_settings, ScriptedDispatcher()) as b,
        paused_replica(backend_settings, log) as (a, wid),
    ):
        assert b.store.workflows.load(wid).steps[0].status is StepStatus.RUNNING
        await sweep_until_continued(b, wid)
        wf = b.store.workflows.load(wid)
        assert (wf.state, wf.steps[0].status) == (WorkflowState.FAILED, StepStatus.INTERRUPTED)
        taken = b.store.leases.lease(wid)
        assert taken is not None

        os.kill(a.pid, signal.SIGCONT)  # A wakes up, after B took over
        _, stderr = a.communicate(timeout=GUARD)
        assert a.returncode != 0 and "taken over by another Pilot process" in stderr, stderr[-2000:]
        assert "power_on_vm" not in log.read_text(), "A sent nothing"
        after = b.store.workflows.load(wid)
        assert after.version == wf.version, "A wrote nothing more"
        lease = b.store.leases.lease(wid)
        assert lease is not None and (lease.owner, lease.fence) == (taken.owner, taken.fence), (
            "A took nothing"
        )
        assert b.store.audit.verify_audit(wid).ok


async def test_a_postgresql_restart_right_after_a_step_returned_loses_no_outcome(
    backend_settings: Settings, pg_server: PgServer, actor: Actor
) -> None:
    failed = threading.Event()
    restarted = threading.Event()

    def restart_when_a_save_failed() -> None:
        failed.wait(GUARD)
        pg_server.resume()
        restarted.set()

    def returned_then_database_restarts(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        if params["vm_name"] == "a":
            pg_server.halt()  # right after the skill answered, before Pilot saved the outcome
            threading.Thread(target=restart_when_a_save_failed, daemon=True).start()
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True, **params})

    dispatcher = ScriptedDispatcher(answers={"power_on_vm": returned_then_database_restarts})
    with pilot(backend_settings, dispatcher, lease=10) as app:
        save = app.store.workflows.save

        def watched(wf: Workflow, *args: Any, **kwargs: Any) -> None:
            try:
                save(wf, *args, **kwargs)
            except DatabaseUnavailable:
                failed.set()
                raise

        app.store.workflows.save = watched  # type: ignore[method-assign]
        wid = str(
            app.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a"), on("b")])).payload()[
                "workflow_id"
            ]
        )
        try:
            out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
        finally:
            failed.set()
            assert restarted.wait(GUARD), "the server came back"
        assert out["outcome"] == "completed", out
        wf = app.store.workflows.load(wid)
        assert [s.status for s in wf.steps] == [StepStatus.SUCCESS, StepStatus.SUCCESS]
        assert [e.action for e in wf.audit_log].count("step_completed") == 2
        assert [c[2]["vm_name"] for c in dispatcher.step_calls] == ["a", "b"], "nothing sent twice"
        assert app.store.audit.verify_audit(wid).ok


async def test_a_replica_whose_database_was_away_longer_than_the_lease_keeps_its_run(
    backend_settings: Settings, pg_server: PgServer, actor: Actor
) -> None:
    """One replica, its sweeper running: an outage of three lease times while a write is in
    flight; its own sweeper never takes the run, the run takes its leases again and completes."""
    skill = SteppedDispatcher(answer={"power_on_vm": asyncio.Event()})
    with pilot(backend_settings, skill, lease=1.5) as app:
        wid = str(
            app.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a"), on("b")])).payload()[
                "workflow_id"
            ]
        )
        sweeper = Sweeper(lambda: app.service.runner, interval=0.2)
        passes: list[list[str]] = []
        sweep = sweeper.sweep

        async def counted() -> list[str]:
            done = await sweep()
            passes.append(done)
            return done

        sweeper.sweep = counted  # type: ignore[method-assign]
        async with sweeping(sweeper):
            run = asyncio.create_task(app.service.run_workflow(RunRequest(actor, wid)))
            await asyncio.wait_for(skill.went_out.wait(), GUARD)
            fence = app.store.leases.lease(run_key(wid))
            await asyncio.to_thread(pg_server.halt)
            await asyncio.sleep(3 * 1.5)  # the outage: longer than the lease
            await asyncio.to_thread(pg_server.resume)
            seen = len(passes)
            deadline = time.monotonic() + GUARD
            while len(passes) < seen + 3:  # the sweeper looked at it again, with the database back
                assert time.monotonic() < deadline, "the sweeper stopped sweeping"
                await asyncio.sleep(0.1)
            skill.answer["power_on_vm"].set()
            out = await asyncio.wait_for(run, GUARD)
        assert out.payload()["outcome"] == "completed", out
        assert all(p == [] for p in passes), "its own sweeper never continued its live run"
        wf = app.store.workflows.load(wid)
        assert "interrupted_step_detected" not in [e.action for e in wf.audit_log]
        lease = app.store.leases.lease(run_key(wid))
        assert fence is not None and lease is not None and lease.fence > fence.fence, "taken again"
        assert skill.sent == ["power_on_vm", "power_on_vm"]
