"""A Pilot replica in its own process (run by test_replica_death): creates a one-step workflow,
prints its id, and runs it against a skill whose call never returns, until killed.

Settings come from the environment the test gives it (database, home, lease time).
"""

from __future__ import annotations

import asyncio
import sys

from tests.engine.fakes import ScriptedDispatcher
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor

STEP = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "a"}}


async def main() -> None:
    app = build_app(Settings(), dispatcher=ScriptedDispatcher(delay=3600))
    actor = Actor("replica")
    wid = app.service.create_workflow(actor, "ops", "t", [STEP])["workflow_id"]
    print(wid, flush=True)
    await app.service.run_workflow(actor, wid)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
