"""The tasks extension's test rig: a small 2.x ``MCPServer`` over Pilot's real service with
``TasksExtension`` added as the server factory adds it, and a 2.x in-memory ``Client`` pinned to
2026-07-28 that declares the extension.

The server's tools call the service with the same requests and frame results and refusals with
the same functions as Pilot's tools (``server/errors.py``), so what a task records is what the
synchronous call returns. ``HeldPreflight`` is a dispatcher whose preflight (the skills starting)
waits until the test lets it go: the one point a real skill cannot be held at on demand.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, Request, Result
from pydantic import BaseModel, ConfigDict, TypeAdapter

from tests.support.fakes import SteppedDispatcher
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Step
from vmware_pilot.engine.requests import ApproveRequest, CancelRequest, RollbackRequest, RunRequest
from vmware_pilot.errors import PilotError
from vmware_pilot.safety.duties import Role
from vmware_pilot.server.errors import refusal_result, tool_result
from vmware_pilot.server.tasks import EXTENSION_ID, TaskIdParams, TasksExtension

MODERN = "2026-07-28"


class TaskHandle(Result):
    """A ``CreateTaskResult`` as the client parses it (``resultType: "task"``)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    poll_interval_ms: int | None = None
    ttl_ms: int | None = None


class TasksClient(ClientExtension):
    """Declares the tasks extension; the tests follow the handle themselves (``allow_claimed``)."""

    identifier = EXTENSION_ID

    def claims(self) -> Sequence[ResultClaim[Any]]:
        async def resolve(handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
            raise AssertionError("the tests poll tasks/get themselves")

        return [ResultClaim(result_type="task", model=TaskHandle, resolve=resolve)]


class _TaskRequest(Request[TaskIdParams, str]):
    method: str
    params: TaskIdParams


_ANY: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def pilot_tasks_server(
    app: PilotApp, actor: Actor, role_of: Callable[[Actor], Role] | None = None
) -> tuple[MCPServer, TasksExtension]:
    """An MCPServer with run_workflow, approve, rollback and cancel_workflow over ``app``'s service,
    and the tasks extension added as the factory adds it."""
    extension = TasksExtension(app, caller=lambda: actor, role_of=role_of)
    server = MCPServer("vmware-pilot", extensions=[extension])
    service = app.service

    def role() -> Role | None:
        return role_of(actor) if role_of is not None else None

    async def framed(arguments: dict[str, Any], work: Callable[[], Awaitable[BaseModel]]) -> CallToolResult:
        try:
            return tool_result(await work(), arguments)
        except PilotError as exc:
            return refusal_result(exc, arguments)

    @server.tool()
    async def run_workflow(workflow_id: str, force: bool = False) -> CallToolResult:
        request = RunRequest(actor, workflow_id, force, role=role())
        return await framed({"workflow_id": workflow_id}, lambda: service.run_workflow(request))

    @server.tool()
    async def approve(workflow_id: str, approver: str = "") -> CallToolResult:
        request = ApproveRequest(actor, workflow_id, door="mcp", role=role(), approver=approver)
        return await framed({"workflow_id": workflow_id}, lambda: service.approve(request))

    @server.tool()
    async def rollback(workflow_id: str, confirm: bool = False) -> CallToolResult:
        request = RollbackRequest(actor, workflow_id, confirm, role=role())
        return await framed({"workflow_id": workflow_id}, lambda: service.rollback(request))

    @server.tool()
    async def cancel_workflow(workflow_id: str, confirm: bool = False) -> CallToolResult:
        request = CancelRequest(actor, workflow_id, confirm=confirm, role=role())
        return await framed({"workflow_id": workflow_id}, lambda: service.cancel_workflow(request))

    return server, extension


@asynccontextmanager
async def tasks_client(server: MCPServer, *, declare: bool = True) -> AsyncIterator[Client]:
    """An in-memory 2.x client pinned to 2026-07-28, declaring the tasks extension (or not)."""
    async with Client(server, mode=MODERN, extensions=[TasksClient()] if declare else None) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> TaskHandle | CallToolResult:
    """``tools/call`` answered either way: a task handle or the tool's result."""
    result = await client.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(result, TaskHandle | CallToolResult), result
    return result


async def task_request(client: Client, method: str, task_id: str) -> dict[str, Any]:
    """``tasks/get``, ``tasks/cancel`` or ``tasks/update`` for ``task_id``: the raw result."""
    request = _TaskRequest(method=method, params=TaskIdParams(task_id=task_id))
    return await client.session.send_request(request, _ANY)


@dataclass
class HeldPreflight(SteppedDispatcher):
    """A dispatcher whose preflight waits for ``go`` (the skills still starting); ``waiting`` is
    set once a run reached it."""

    go: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)

    async def preflight(self, steps: Sequence[Step]) -> list[str]:
        self.waiting.set()
        await self.go.wait()
        return await super().preflight(steps)
