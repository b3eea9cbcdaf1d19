"""A Pilot replica in its own process (run by test_replica_death and test_durable_runs): creates a
workflow, prints its id, and runs it until killed.

``python -m tests.engine.replica [MODE]``, MODE one of:

- ``write`` (default): one write step, against a skill whose call never returns;
- ``read``: a read, a gate and a write; the read's call never returns;
- ``between``: two reads, a gate and a write; the process SIGKILLs itself right after the commit
  that recorded the first read's result, before the second read is marked running.

Settings come from the environment the test gives it (database, home, lease time).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from tests.engine.fakes import ScriptedDispatcher
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.engine.execution.runner import Runner

STEP = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "a"}}
READ = {"action": "events", "skill": "monitor", "tool": "get_events", "params": {}}
ALARMS = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}}
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
PLANS: dict[str, list[dict[str, Any]]] = {
    "write": [STEP],
    "read": [READ, GATE, STEP],
    "between": [READ, ALARMS, GATE, STEP],
}


def die_after_first_step() -> None:
    """SIGKILL this process right after the commit that records step 0's success."""
    commit = Runner.commit

    def commit_then_die(self: Runner, wf: Any, *args: Any, **kwargs: Any) -> Any:
        done = commit(self, wf, *args, **kwargs)
        steps = done[0].steps
        if steps[0].status is StepStatus.SUCCESS and steps[1].status is StepStatus.PENDING:
            os.kill(os.getpid(), signal.SIGKILL)
        return done

    Runner.commit = commit_then_die  # type: ignore[method-assign]


async def main(mode: str) -> None:
    if mode == "between":
        die_after_first_step()
    delay = 0 if mode == "between" else 3600
    app = build_app(Settings(), dispatcher=ScriptedDispatcher(delay=delay))
    actor = Actor("replica")
    wid = app.service.create_workflow(actor, "ops", "t", PLANS[mode])["workflow_id"]
    print(wid, flush=True)
    await app.service.run_workflow(actor, wid)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "write")))
