"""The tasks extension's client side for tests: a 2.x ``Client`` pinned to 2026-07-28 that
declares the extension, on Pilot's real server (``create_server``: in memory, or a transport),
and the raw ``tools/call`` and ``tasks/*`` requests the tests follow a task with.

``READ``, ``EVENTS``, ``GATE`` and ``POWER_ON`` are the steps the task tests' plans are made of;
``workflow`` creates one through the engine's door.

``HeldPreflight`` is a dispatcher whose preflight (the skills starting) waits until the test lets
it go: the one point a real skill cannot be held at on demand.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, Result
from pydantic import ConfigDict, TypeAdapter

from tests.support.fakes import SteppedDispatcher
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Step
from vmware_pilot.engine.requests import CreateRequest
from vmware_pilot.server.tasks import EXTENSION_ID, TaskIdParams

MODERN = "2026-07-28"
ALICE = Actor("alice", kind="token")
READ = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}
EVENTS = {"action": "events", "skill": "monitor", "tool": "get_events", "params": {}}
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
POWER_ON = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "web-01"}}


def workflow(app: PilotApp, steps: list[dict[str, Any]], actor: Actor = ALICE) -> str:
    """A workflow of ``steps`` created by ``actor`` (alice by default); its id."""
    return app.service.create_workflow(CreateRequest(actor, "ops", "tasks", steps)).workflow_id


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


@asynccontextmanager
async def tasks_client(server: Any, *, declare: bool = True) -> AsyncIterator[Client]:
    """A 2.x client pinned to 2026-07-28 on ``server`` (Pilot's server object, in memory, or a
    transport), declaring the tasks extension (or not)."""
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
