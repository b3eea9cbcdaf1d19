"""A Pilot replica in its own process (run by test_replica_death and test_durable_runs): creates a
workflow, prints its id, and runs it until killed.

``python -m tests.support.replica [MODE]``, MODE one of:

- ``write`` (default): one write step, against a skill whose call never returns;
- ``read``: a read, a gate and a write; the read's call never returns;
- ``between``: two reads, a gate and a write; the process SIGKILLs itself right after the commit
  that recorded the first read's result, before the second read is marked running;
- ``pause``: one write, dispatched for real (``VMWARE_PILOT_DISPATCH=stdio`` and the skill's
  command from the environment); the process SIGSTOPs itself right after the commit that marked
  the write running, before its skill session is started and the call sent.

Settings come from the environment the test gives it (database, home, lease time).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.requests import CreateRequest, RunRequest
from vmware_pilot.store.workflows import Workflows

STEP = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "a"}}
READ = {"action": "events", "skill": "monitor", "tool": "get_events", "params": {}}
ALARMS = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}}
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
PLANS: dict[str, list[dict[str, Any]]] = {
    "write": [STEP],
    "read": [READ, GATE, STEP],
    "between": [READ, ALARMS, GATE, STEP],
    "pause": [STEP],
}


def after_each_commit(act: Callable[[Workflow], None]) -> None:
    """Call ``act`` with the saved workflow right after each commit of the store's ``save``."""
    save = Workflows.save

    def save_then_act(self: Workflows, wf: Workflow, *args: Any, **kwargs: Any) -> None:
        save(self, wf, *args, **kwargs)
        act(wf)

    Workflows.save = save_then_act  # type: ignore[method-assign]


def die_after_first_step() -> None:
    """SIGKILL this process right after the commit that records step 0's success."""

    def die(wf: Workflow) -> None:
        if wf.steps[0].status is StepStatus.SUCCESS and wf.steps[1].status is StepStatus.PENDING:
            os.kill(os.getpid(), signal.SIGKILL)

    after_each_commit(die)


def stop_after_marking_running() -> None:
    """SIGSTOP this process right after the commit that marks step 0 running (once): a pause
    (GC, a paused VM, CPU starvation) between marking a write running and sending it."""
    stopped: list[bool] = []

    def stop(wf: Workflow) -> None:
        if wf.steps[0].status is StepStatus.RUNNING and not stopped:
            stopped.append(True)
            os.kill(os.getpid(), signal.SIGSTOP)

    after_each_commit(stop)


async def main(mode: str) -> None:
    if mode == "between":
        die_after_first_step()
    if mode == "pause":
        stop_after_marking_running()
    delay = 0 if mode == "between" else 3600
    app = build_app(Settings(), dispatcher=None if mode == "pause" else ScriptedDispatcher(delay=delay))
    actor = Actor("replica")
    wid = app.service.create_workflow(CreateRequest(actor, "ops", "t", PLANS[mode])).payload()["workflow_id"]
    print(wid, flush=True)
    try:
        (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    finally:
        await app.aclose()  # the skill servers it started end with it


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "write")))
