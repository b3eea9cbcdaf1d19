"""A Pilot replica in its own process that starts a task (run by tests/tasks/test_task_replicas.py):
it creates a workflow (a read, a gate, a write), calls ``run_workflow`` through the tasks
extension as a 2026-07-28 client that declares it, prints the workflow's id and the task's id,
and waits until killed, its read in flight (the read's call never returns).

``python -m tests.support.task_replica``; settings come from the environment the test gives it
(database, home, lease time).
"""

from __future__ import annotations

import asyncio
import sys

from tests.support.fakes import ScriptedDispatcher
from tests.support.task_server import ALICE, EVENTS, GATE, POWER_ON, TaskHandle, call, tasks_client, workflow
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.server import create_server


async def main() -> None:
    app = build_app(Settings(), dispatcher=ScriptedDispatcher(delay=3600))
    wid = workflow(app, [EVENTS, GATE, POWER_ON])
    server = create_server(app, actor=ALICE)
    try:
        async with tasks_client(server) as client:
            handle = await call(client, "run_workflow", workflow_id=wid)
            assert isinstance(handle, TaskHandle)
            print(wid, handle.task_id, flush=True)
            await server.drain()
    finally:
        await app.aclose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
