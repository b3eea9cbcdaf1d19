"""The MCP Tasks extension (``io.modelcontextprotocol/tasks``, its 2026-07-28 revision): long
calls answered at once with a task the client polls, any replica answering for it.

A client that declares the extension in a request's capabilities, on a 2026-07-28 connection, and
calls ``run_workflow``, ``approve`` (when it may release the gate) or ``rollback`` with ``confirm``
on a Pilot that dispatches (``engine/tasks.py`` decides) is answered at once with a task handle
(``resultType: "task"``, ``taskId``, ``status: "working"``, ``pollIntervalMs``) once the task's row
is durable; the call itself goes on in this process, through the whole tool pipeline as if
synchronous, and its final result, framed exactly as the call would have returned it, is stored
on the row. Every other call passes through unchanged.

- ``tasks/get``: the task's status, a line on its progress (steps done of all, under ``_meta``
  ``vmware-pilot/progress`` too) and, once terminal, ``result`` or ``error``; read from the
  database (the row and the workflow's record), so another replica answers it. A task is its
  starter's: another caller, an unknown id or an expired task is "not found" (-32602).
- ``tasks/cancel``: ``cancel_workflow`` with ``confirm`` through the service's ``CancelRequest``.
  Its answer is the extension's empty acknowledgement, cancellation being eventually consistent
  there (a task may still end otherwise); a refusal is a result too: that acknowledgement with the
  refusal (``error``, ``hint``, …) under ``_meta`` ``vmware-pilot/refusal``, the task going on.
- ``tasks/update``: Pilot's tasks never ask for input; an update of one's own task is
  acknowledged and ignored (the extension says to ignore responses to no outstanding request).

Each needs the client to declare the extension on that request (-32021 otherwise). The server
factory adds it with ``PilotMCPServer(tasks=TasksExtension(app, caller=caller, role_of=role_of))``,
whose ``drain`` the transports await at shutdown (``TasksExtension.drain``: the carried calls end
and record their results).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolRequestParams, RequestParams
from mcp_types.methods import serialize_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field

from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError
from vmware_pilot.ondemand import AppOnDemand
from vmware_pilot.server.bounds import bound_refusal
from vmware_pilot.server.exposure import exposed_tools

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp
    from vmware_pilot.engine.tasks import TaskBook, TaskRow, TaskView
    from vmware_pilot.safety.duties import Role

__all__ = [
    "EXTENSION_ID",
    "POLL_INTERVAL_MS",
    "PROGRESS_META",
    "REFUSAL_META",
    "TASK_TTL_MS",
    "TaskIdParams",
    "TasksExtension",
]

_log = logging.getLogger("vmware_pilot.server")

EXTENSION_ID: Final = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS: Final = 2000
TASK_TTL_MS: Final = 24 * 3600 * 1000  # a task is kept a day from its start: its run ends long before
PROGRESS_META: Final = "vmware-pilot/progress"
REFUSAL_META: Final = "vmware-pilot/refusal"
_VERSIONS: Final = frozenset(MODERN_PROTOCOL_VERSIONS)
_NOT_FOUND: Final = "Task not found"
_SHUT_DOWN: Final = {
    "code": INTERNAL_ERROR,
    "message": "The Pilot serving this task shut down before the call ended; get_workflow_status "
    "shows where its workflow stands",
}


class TaskIdParams(RequestParams):
    """``tasks/get``, ``tasks/cancel`` and ``tasks/update`` name a task by ``taskId``."""

    model_config = ConfigDict(extra="allow")
    task_id: str = Field(max_length=200)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _task_fields(row: TaskRow, status: str, message: str) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "taskId": row.task_id,
        "status": status,
        "statusMessage": message,
        "createdAt": _iso(row.created_at),
        "lastUpdatedAt": _iso(row.updated_at),
        "ttlMs": None if row.ttl is None else round(row.ttl * 1000),
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    return fields


def detailed(view: TaskView) -> dict[str, Any]:
    """``tasks/get``'s answer: the task, with ``result`` or ``error`` once it ended."""
    answer = _task_fields(view.row, view.status, view.message)
    if view.status == "completed" and view.result is not None:
        answer["result"] = view.result
    if view.status == "failed" and view.error is not None:
        answer["error"] = view.error
    answer["_meta"] = {PROGRESS_META: {"done": view.done, "total": view.total}}
    return answer


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return ctx.protocol_version in _VERSIONS and bool(extensions) and EXTENSION_ID in (extensions or {})


def _not_found(verb: str) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=f"Failed to {verb} task: {_NOT_FOUND}")


def wire_result(result: HandlerResult, version: str) -> dict[str, Any]:
    """A ``tools/call`` handler's result as the client would have received it at ``version``
    (the SDK's own dump and per-version sieve)."""
    if isinstance(result, BaseModel):
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif isinstance(result, dict):
        dumped = dict(result)
    else:
        dumped = {}
    shaped = serialize_server_result("tools/call", version, dumped)
    shaped.setdefault("resultType", "complete")
    return shaped


class TasksExtension(Extension):
    """The tasks extension over one app (built on first use if an ``AppOnDemand``). ``caller``
    gives the caller of the request being handled (raising ``PilotError`` when there is none);
    ``role_of`` their role, when the server knows roles (a task's cancel is checked against it).
    A call the server would refuse at once (a tool it does not offer, one the caller's role lacks)
    is never made a task: it passes through to its refusal."""

    identifier = EXTENSION_ID

    def __init__(
        self,
        app: PilotApp | AppOnDemand,
        *,
        caller: Callable[[], Actor],
        role_of: Callable[[Actor], Role] | None = None,
        ttl_ms: int | None = TASK_TTL_MS,
    ) -> None:
        self._source = app if isinstance(app, AppOnDemand) else AppOnDemand.ready(app)
        settings = self._source.settings
        self._offered = exposed_tools(settings.mcp_expose, settings.mcp_allow_write)
        self._caller = caller
        self._role_of = role_of
        self._ttl = None if ttl_ms is None else ttl_ms / 1000
        self._book: TaskBook | None = None
        self._carried: set[asyncio.Task[None]] = set()

    # --- the extension's surface ------------------------------------------------------------
    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self._get, protocol_versions=_VERSIONS),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel, protocol_versions=_VERSIONS),
            MethodBinding("tasks/update", TaskIdParams, self._update, protocol_versions=_VERSIONS),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Answer a long call with a task handle when the client declared the extension; the
        call goes on in this process and its result lands on the task's row."""
        arguments = params.arguments or {}
        if params.name not in self._offered or not _declared(ctx):
            return await call_next(ctx)
        try:
            actor = self._caller()
            if self._role_of is not None and not self._role_of(actor).may_call(params.name):
                return await call_next(ctx)  # refused at once by the call itself
        except PilotError:  # no caller, or no usable role: the call refuses it, as always
            return await call_next(ctx)
        book = await self.book()
        if not await book.worth_a_task(params.name, arguments):
            return await call_next(ctx)
        workflow_id = str(arguments["workflow_id"])
        row = await asyncio.to_thread(book.start, actor, params.name, workflow_id, self._ttl)
        carried = asyncio.create_task(
            self._carry(book, row.task_id, ctx, call_next), name=f"task-{params.name}"
        )
        self._carried.add(carried)
        carried.add_done_callback(self._carried.discard)
        handle = _task_fields(row, "working", f"{params.name} of workflow '{workflow_id}' started")
        return {"resultType": "task", **handle}

    async def drain(self) -> None:
        """Wait for the calls still carried for tasks (their results are recorded)."""
        while self._carried:
            await asyncio.gather(*list(self._carried), return_exceptions=True)

    # --- internals ---------------------------------------------------------------------------
    async def book(self) -> TaskBook:
        if self._book is None:
            from vmware_pilot.engine.tasks import TaskBook  # at the first call: start-up loads no engine

            app = await asyncio.to_thread(self._source.get)
            self._book = TaskBook(app.service)
        return self._book

    async def _carry(
        self, book: TaskBook, task_id: str, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> None:
        """The call, through the rest of the tools/call chain; its end recorded on the task."""
        try:
            result = await call_next(ctx)
            answer = wire_result(result, ctx.protocol_version)
        except asyncio.CancelledError:  # this Pilot shuts down: the answer will never come
            book.fail(task_id, _SHUT_DOWN)  # at once, in this task: it is being cancelled
            raise
        except MCPError as exc:
            await asyncio.to_thread(
                book.fail, task_id, exc.error.model_dump(by_alias=True, exclude_none=True)
            )
        except Exception as exc:  # the call's bug, not the client's: logged, named by an id
            correlation_id = uuid.uuid4().hex[:12]
            _log.error("task %s failed (correlation id %s)", task_id, correlation_id, exc_info=exc)
            error = {"code": INTERNAL_ERROR, "message": f"Internal error (correlation id {correlation_id})"}
            await asyncio.to_thread(book.fail, task_id, error)
        else:
            await asyncio.to_thread(book.complete, task_id, answer)

    def _actor(self, verb: str) -> Actor:
        try:
            return self._caller()
        except PilotError:
            raise _not_found(verb) from None

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        require_client_extension(ctx, EXTENSION_ID)
        actor = self._actor("retrieve")
        book = await self.book()
        view = await asyncio.to_thread(book.view, actor, params.task_id)
        if view is None:
            raise _not_found("retrieve")
        return detailed(view)

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        require_client_extension(ctx, EXTENSION_ID)
        actor = self._actor("cancel")
        book = await self.book()
        try:
            role = self._role_of(actor) if self._role_of is not None else None
            out = await book.cancel(actor, role, params.task_id)
        except PilotError as exc:
            # Refused by cancel_workflow's rules (a step in flight, a role without it, a task
            # already ended): a result, as every refusal is. The extension's answer to tasks/cancel
            # is an empty acknowledgement and its cancellation eventually consistent (the task may
            # still end otherwise), so the acknowledgement carries the refusal and the task goes on;
            # tasks/get shows how it ends. Only a task the caller cannot see is an error (-32602).
            return {"_meta": {REFUSAL_META: bound_refusal(exc.payload(), (params.task_id,))}}
        if out is None:
            raise _not_found("cancel")
        return {}

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        require_client_extension(ctx, EXTENSION_ID)
        actor = self._actor("update")
        book = await self.book()
        if await asyncio.to_thread(book.find, actor, params.task_id) is None:
            raise _not_found("update")
        return {}
