"""A replica SIGKILLed with a step in flight: its workflow is held until the lease expires on the
database's clock, then freed for any other replica, the step marked interrupted, never rerun."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.engine.execution.runlease import run_key
from vmware_pilot.engine.requests import RunRequest
from vmware_pilot.errors import StateRefused

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
LEASE = 10


def _poll(condition: object, what: str, limit: float = 120) -> None:
    """Wait for ``condition()`` (a guard against hanging, not a timing claim)."""
    deadline = time.monotonic() + limit
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)


async def test_a_killed_replicas_workflow_is_freed_after_the_lease_and_its_step_never_rerun(
    backend_settings: Settings, actor: Actor
) -> None:
    env = {
        **os.environ,
        "VMWARE_PILOT_HOME": str(backend_settings.home_path),
        "VMWARE_PILOT_DATABASE_URL": backend_settings.database_url,
        "VMWARE_PILOT_LEASE_SECONDS": str(LEASE),
        "PYTHONPATH": str(REPO),
    }
    replica = subprocess.Popen(
        [sys.executable, "-m", "tests.support.replica"], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
    )
    dispatcher = ScriptedDispatcher()
    survivor = build_app(backend_settings.model_copy(update={"lease_seconds": LEASE}), dispatcher=dispatcher)
    try:
        assert replica.stdout is not None
        wid = replica.stdout.readline().strip()
        assert wid, "the replica created its workflow"
        _poll(
            lambda: survivor.store.workflows.load(wid).steps[0].status is StepStatus.RUNNING, "step running"
        )
        replica.kill()
        replica.wait(timeout=30)

        with pytest.raises(StateRefused, match="running in another Pilot process"):
            (
                await survivor.service.run_workflow(RunRequest(actor, wid))
            ).payload()  # while the dead replica's lease lasts
        lease = survivor.store.leases.lease(wid)
        assert lease is not None and lease.fence == 1
        _poll(lambda: survivor.store.leases.lease(wid).expired, "the lease expired")  # type: ignore[union-attr]
        _poll(lambda: survivor.store.leases.lease(run_key(wid)).expired, "the run lease expired")  # type: ignore[union-attr]

        out = (await survivor.service.run_workflow(RunRequest(actor, wid))).payload()
        assert (out["outcome"], out["steps"][0]["status"]) == ("failed", "interrupted")
        # Settling reads the VM, its tasks and events; the step itself is never sent again.
        resent = [c for c in dispatcher.step_calls if c[1] == "power_on_vm"]
        assert resent == [], "the step whose effect is unknown was not started again"
        actions = [e.action for e in survivor.store.workflows.load(wid).audit_log]
        assert actions.count("interrupted_step_detected") == 1
        assert survivor.store.audit.verify_audit().ok
    finally:
        if replica.poll() is None:
            replica.kill()
            replica.wait(timeout=30)
        survivor.close()
