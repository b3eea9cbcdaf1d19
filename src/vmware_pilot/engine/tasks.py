"""MCP tasks for Pilot's long operations (the ``io.modelcontextprotocol/tasks`` extension, served
by ``server/tasks.py``): which calls become tasks, their rows (``store/tasks.py``), and what a task
is now, read from its row and its workflow's record so that any replica sharing the database
answers for a task another replica started.

A task is one call of ``run_workflow``, of ``approve`` that may release dispatched steps, or of
``rollback`` with ``confirm``, made by a client that declared the extension, on a Pilot that
dispatches (in hand-back mode nothing runs long). Its status while it works, and the steps done
of all, come from the workflow; its final result is what the call returned, recorded by the
replica that made it. If that replica stopped, the workflow's run lease lets another Pilot's
sweeper continue the run (``engine/sweeper.py``); the task then ends ``failed`` once the run
stopped, its error saying where the workflow stands (the original answer died with its process).

Cancelling a task is ``cancel_workflow`` with ``confirm``: the same ``CancelRequest`` through the
service, so the same role check, states and blast-radius rules, and the same refusals.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from vmware_pilot.domain.actor import Actor, identity_key
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.requests import CancelRequest
from vmware_pilot.engine.sweeper import SWEEPER
from vmware_pilot.errors import PilotError, StateRefused
from vmware_pilot.ownership import new_run_owner
from vmware_pilot.results import CancelResult, Preview
from vmware_pilot.store.tasks import TaskRow, TaskStatus

if TYPE_CHECKING:
    from vmware_pilot.engine.service import PilotService
    from vmware_pilot.safety.duties import Role

__all__ = ["INTERNAL_ERROR", "TASK_TOOLS", "TaskBook", "TaskRow", "TaskView", "owner_of"]

TASK_TOOLS: Final = frozenset({"run_workflow", "approve", "rollback"})
INTERNAL_ERROR: Final = -32603  # JSON-RPC's: the call's answer was lost with its process
_TOKEN_BYTES = 24  # task ids are bearer-like: unguessable (the extension's security rule)
_IDLE = (StepStatus.PENDING, StepStatus.RUNNING)


def owner_of(actor: Actor) -> str:
    """Who a task belongs to: the caller's kind and identity (an OAuth caller by subject)."""
    return f"{actor.kind}:{identity_key(actor.label)}"


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task as ``tasks/get`` answers it: ``status`` and ``message`` now, ``done`` of ``total``
    steps of its workflow, and once terminal ``result`` (completed) or ``error`` (failed)."""

    row: TaskRow
    status: TaskStatus
    message: str
    done: int
    total: int
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskBook:
    """The tasks of one app: started, finished and read over its store, cancelled through its
    service. ``process`` names this Pilot process in the rows it starts."""

    def __init__(self, service: PilotService, process: str = "") -> None:
        self.service = service
        self.process = process or new_run_owner()

    @property
    def _rows(self) -> Any:
        return self.service.store.tasks

    # --- which calls become tasks ---------------------------------------------------------
    async def worth_a_task(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether this call of ``tool`` runs long enough to be a task: Pilot dispatches, and it
        is a run of a workflow that can run, a confirmed rollback, or an approval that may release
        the gate (the last approval it needs, outside the ``elicit`` policy, whose form is asked
        in the call). Anything else is answered in the call, refusals at once."""
        workflow_id = arguments.get("workflow_id")
        if (
            tool not in TASK_TOOLS
            or not isinstance(workflow_id, str)
            or self.service.runner.dispatcher is None
        ):
            return False
        if tool == "rollback":
            return arguments.get("confirm") is True
        if tool == "approve":
            if self.service.core.approvals == "elicit":
                return False
            try:
                decision = await asyncio.to_thread(self.service.decision, workflow_id)
            except PilotError:  # unknown or unreadable: the call refuses it at once
                return False
            return decision is not None and decision.approvals_missing <= 1
        try:  # a run: of a workflow that can run (any other is refused at once by the call)
            wf = await asyncio.to_thread(self.service.records.load, workflow_id)
        except PilotError:
            return False
        return wf.state in (WorkflowState.PENDING, WorkflowState.RUNNING)

    # --- rows -------------------------------------------------------------------------------
    def start(self, actor: Actor, tool: str, workflow_id: str, ttl: float | None) -> TaskRow:
        """A new ``working`` task of ``actor``'s, durable before it is returned."""
        task_id = secrets.token_urlsafe(_TOKEN_BYTES)
        row: TaskRow = self._rows.create_task(task_id, owner_of(actor), tool, workflow_id, self.process, ttl)
        return row

    def complete(self, task_id: str, result: dict[str, Any]) -> bool:
        """Record the call's final result (a tool result, refusals included)."""
        done: bool = self._rows.finish_task(task_id, "completed", _summary(result), {"result": result})
        return done

    def fail(self, task_id: str, error: dict[str, Any]) -> bool:
        """Record the JSON-RPC error the call ended with."""
        failed: bool = self._rows.finish_task(
            task_id, "failed", str(error.get("message", "")), {"error": error}
        )
        return failed

    def find(self, actor: Actor, task_id: str) -> TaskRow | None:
        """The task if it exists, has not expired and is ``actor``'s; None otherwise (another
        caller's task is not found, as an unknown one)."""
        row: TaskRow | None = self._rows.task(task_id)
        if row is None or row.expired or row.owner != owner_of(actor):
            return None
        return row

    # --- what a task is now -----------------------------------------------------------------
    def view(self, actor: Actor, task_id: str) -> TaskView | None:
        """The task as it stands (None: not found for ``actor``)."""
        row = self.find(actor, task_id)
        if row is None:
            return None
        try:
            wf: Workflow | None = self.service.records.load(row.workflow_id)
        except PilotError:
            wf = None
        done, total = _progress(wf)
        if not row.terminal and wf is not None and _continued_elsewhere(wf, row.created_at):
            if wf.state is not WorkflowState.RUNNING:
                self.fail(row.task_id, _lost_answer(wf, row))
                row = self._rows.task(row.task_id) or row
            else:
                message = (
                    f"{_working(row, wf, done, total)}; the Pilot that started this task stopped, "
                    "and another Pilot continues the run"
                )
                return TaskView(row, "working", message, done, total)
        if row.terminal:
            outcome = row.outcome or {}
            return TaskView(
                row, row.status, row.status_message, done, total, outcome.get("result"), outcome.get("error")
            )
        return TaskView(row, "working", _working(row, wf, done, total), done, total)

    # --- cancelling -------------------------------------------------------------------------
    async def cancel(self, actor: Actor, role: Role | None, task_id: str) -> CancelResult | None:
        """Cancel the task's workflow as ``cancel_workflow`` with ``confirm`` does (the service's
        ``CancelRequest``: role, states, blast radius, a step still in flight); None when the task
        is not found for ``actor``. Raises the service's refusal (``PilotError``), or
        ``StateRefused`` for a task already ended."""
        row = self.find(actor, task_id)
        if row is None:
            return None
        if row.terminal:
            raise StateRefused(
                f"Task '{task_id}' has already {row.status}: there is nothing of it to cancel",
                hint=f"cancel_workflow('{row.workflow_id}') cancels the workflow itself (preview first).",
                workflow_id=row.workflow_id,
            )
        request = CancelRequest(
            actor,
            row.workflow_id,
            reason=f"cancelled through its MCP task ({row.tool})",
            confirm=True,
            door="mcp",
            role=role,
        )
        out = await self.service.cancel_workflow(request)
        if isinstance(out, Preview):  # confirm=True never previews; kept honest if it did
            raise StateRefused(f"Workflow '{row.workflow_id}' was not cancelled", workflow_id=row.workflow_id)
        message = f"Cancelled: workflow '{row.workflow_id}' is {out.state}"
        await asyncio.to_thread(self._rows.finish_task, row.task_id, "cancelled", message, None)
        return out


def _progress(wf: Workflow | None) -> tuple[int, int]:
    if wf is None:
        return 0, 0
    return sum(1 for s in wf.steps if s.status not in _IDLE), len(wf.steps)


def _working(row: TaskRow, wf: Workflow | None, done: int, total: int) -> str:
    if wf is None:
        return f"{row.tool} of workflow '{row.workflow_id}' is working"
    text = f"{row.tool} of workflow '{wf.id}': {done} of {total} steps done, state {wf.state.value}"
    flying = [s for s in wf.steps if s.status is StepStatus.RUNNING]
    if flying:
        text += "; in flight: " + ", ".join(f"step {s.index} ({s.skill}.{s.tool})" for s in flying)
    return text


def _continued_elsewhere(wf: Workflow, since: float) -> bool:
    """Whether another Pilot's sweeper continued the run after the task started: the run's lease
    lapsed, so the process that started the task stopped (engine/sweeper.py)."""
    return any(e.actor == SWEEPER.label and e.ts.timestamp() >= since for e in wf.audit_log)


def _lost_answer(wf: Workflow, row: TaskRow) -> dict[str, Any]:
    return {
        "code": INTERNAL_ERROR,
        "message": (
            f"The Pilot process that ran this {row.tool} stopped before it answered; another Pilot "
            f"continued workflow '{wf.id}', which is now {wf.state.value}"
        ),
        "data": {
            "workflow_id": wf.id,
            "state": wf.state.value,
            "hint": f"get_workflow_status('{wf.id}') shows every step's outcome.",
        },
    }


def _summary(result: Mapping[str, Any]) -> str:
    """One line on a final tool result: its error, else the workflow's state and outcome."""
    structured = result.get("structuredContent")
    if not isinstance(structured, Mapping):
        return "Completed"
    if structured.get("error"):
        return str(structured["error"])[:500]
    said = [f"{key} {structured[key]}" for key in ("state", "outcome", "action") if structured.get(key)]
    return "Completed: " + ", ".join(said) if said else "Completed"
