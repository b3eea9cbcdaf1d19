"""A Pilot whose HTTP server shuts down while a call carried for a task goes on waits for it, so
the task's result is recorded on its row (transports/http.py, ``PilotMCPServer.drain``) instead of
the "shut down" failure a cancelled call leaves; through the HTTP transport's real ASGI app, its
lifespan run in this process, and a 2026-07-28 client declaring the extension."""

from __future__ import annotations

import asyncio
from contextlib import closing
from pathlib import Path

import httpx2
from mcp.client.streamable_http import streamable_http_client

from tests.support.asgi import BASE, PORT, lifespan
from tests.support.fakes import SteppedDispatcher
from tests.support.task_server import READ, TaskHandle, call, tasks_client
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.engine.requests import CreateRequest
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.http import HttpOptions, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore


async def test_an_http_server_shutting_down_records_the_result_of_a_task_still_running(
    settings: Settings, pilot_home: Path
) -> None:
    answer = asyncio.Event()
    dispatcher = SteppedDispatcher(answer={"list_virtual_machines": answer})
    with closing(build_app(settings, dispatcher=dispatcher)) as app:
        secret = TokenStore(pilot_home / "tokens.json").create("ann", "admin")
        asgi = build_http_app(
            app, HttpOptions("http"), PORT, TokenStore(pilot_home / "tokens.json"),
            RoleBook(pilot_home / "roles.yaml", TOOL_NAMES),
        )  # fmt: skip
        workflow_id = app.service.create_workflow(
            CreateRequest(Actor("ann", kind="token"), "ops", "t", [READ])
        ).workflow_id
        transport = httpx2.ASGITransport(app=asgi)
        headers = {"Authorization": f"Bearer {secret}"}
        serving = lifespan(asgi)
        await serving.__aenter__()
        try:
            async with (
                httpx2.AsyncClient(transport=transport, headers=headers, timeout=30) as http,
                tasks_client(streamable_http_client(f"{BASE}/mcp", http_client=http)) as client,
            ):
                handle = await call(client, "run_workflow", workflow_id=workflow_id)
            assert isinstance(handle, TaskHandle)
            await dispatcher.went_out.wait()  # the read is in flight; its client has left
        finally:
            stopping = asyncio.ensure_future(serving.__aexit__(None, None, None))
            answer.set()
            await stopping
        row = app.store.tasks.task(handle.task_id)
        assert row is not None and row.status == "completed", row
        assert row.outcome is not None and row.outcome["result"]["structuredContent"]["state"] == "completed"
        assert app.store.workflows.load(workflow_id).state is WorkflowState.COMPLETED
