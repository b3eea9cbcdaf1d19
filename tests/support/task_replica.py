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
from tests.support.task_server import TaskHandle, call, tasks_client
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest
from vmware_pilot.server import create_server

READ = {"action": "events", "skill": "monitor", "tool": "get_events", "params": {}}
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
WRITE = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "a"}}
CALLER = Actor("alice", kind="token")


async def main() -> None:
    app = build_app(Settings(), dispatcher=ScriptedDispatcher(delay=3600))
    wid = app.service.create_workflow(CreateRequest(CALLER, "ops", "t", [READ, GATE, WRITE])).workflow_id
    server = create_server(app, actor=CALLER)
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
