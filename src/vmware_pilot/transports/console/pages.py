"""The console's reading pages: the inbox (waiting gates first, search, a state filter), one
workflow (its steps in plain words, its gates, the audit tail and what the person may do next), one
step's result, and the live updates of both."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.gates import waiting_gate
from vmware_pilot.errors import WorkflowNotFound
from vmware_pilot.results import StatusView
from vmware_pilot.safety.redaction import redact, redact_identity
from vmware_pilot.safety.roles import call_refusal
from vmware_pilot.transports.console import inbox
from vmware_pilot.transports.console.events import workflow_events, workflows_events
from vmware_pilot.transports.console.outcome import ending
from vmware_pilot.transports.console.plumbing import LIST, STATUS, Caller, requested_id
from vmware_pilot.transports.console.words import evidence_line

if TYPE_CHECKING:
    from vmware_pilot.transports.console.routes import Console

__all__ = ["Pages"]

PAGE_SIZE: Final = 20
_AUDIT_TAIL: Final = 20
_MAX_PAGE: Final = 1_000_000
# The states in which a rollback or a cancel can be asked for (domain.transitions).
_ROLLBACK_STATES: Final = frozenset(
    {WorkflowState.PENDING, WorkflowState.RUNNING, WorkflowState.AWAITING_APPROVAL, WorkflowState.FAILED}
)
_CANCEL_STATES: Final = frozenset(
    {
        WorkflowState.DRAFT,
        WorkflowState.PENDING,
        WorkflowState.RUNNING,
        WorkflowState.AWAITING_APPROVAL,
        WorkflowState.ROLLING_BACK,
    }
)


def _details_named(raw: dict[str, Any], shown: dict[str, Any]) -> dict[str, Any]:
    """``shown`` (the status with secrets masked) with its audit details naming their callers
    (``token:alice``): the details are masked at rest already, and scrubbing them again would
    mask the names they mention."""
    for mine, theirs in zip(shown.get("audit_log", []), raw.get("audit_log", []), strict=True):
        mine["detail"] = redact_identity(str(theirs.get("detail", "")))
    return shown


class Pages:
    """The reading pages of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.app = console.app

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/console/workflows", 303)

    async def workflows(self, request: Request) -> Response:
        """The inbox: waiting gates first, each row with who asked, targets, risk, verdict, age and
        time left; a search over id, requester, targets and text; a state filter."""
        session = self.console.caller(request, LIST).session
        wanted = request.query_params.get("state", "")
        known = [s.value for s in WorkflowState]
        shown = request.query_params.get("page", "1")
        query = request.query_params.get("q", "")[:200]
        problem = (
            f"state must be one of {', '.join(known)}, or empty for any (got {wanted[:40]!r})."
            if wanted and wanted not in known
            else f"page must be a whole number from 1 to {_MAX_PAGE:,} (got {shown[:40]!r})."
            if not (shown.isascii() and shown.isdigit() and 1 <= int(shown) <= _MAX_PAGE)
            else ""
        )
        if problem:
            return self.console.page(
                request, "error.html", 400, title="Bad request", message=problem, session=session
            )
        states = [WorkflowState(wanted)] if wanted else None
        page = int(shown)
        rows = await asyncio.to_thread(self._inbox, states, query)
        first = (page - 1) * PAGE_SIZE
        return self.console.page(
            request,
            "workflows.html",
            session=session,
            rows=rows[first : first + PAGE_SIZE],
            more=len(rows) > first + PAGE_SIZE,
            page=page,
            state=wanted if states else "",
            states=known,
            q=query,
            waiting=sum(1 for r in rows if r.waiting),
            scanned=inbox.SCANNED,
        )

    def _inbox(self, states: list[WorkflowState] | None, query: str) -> list[inbox.Row]:
        """The newest ``inbox.SCANNED`` workflows (in ``states``) as inbox rows, matching
        ``query``, waiting gates first."""
        records, catalog = self.app.service.records, self.app.service.catalog
        now = records.now()
        rows = []
        for summary_row in records.list_all(inbox.SCANNED, 0, states):
            try:
                rows.append(inbox.row_of(records.load(str(summary_row["id"])), catalog, now))
            except WorkflowNotFound:
                continue  # deleted between the list and the load
        return inbox.sort_waiting_first(inbox.search(rows, query) if query.strip() else rows)

    async def workflow(self, request: Request) -> Response:
        caller = self.console.caller(request, STATUS)
        session = caller.session
        try:
            # The version before the read: a change in between makes the page update, never stick.
            wf = await asyncio.to_thread(self.app.service.records.load, requested_id(request))
            version = wf.version
            read = await asyncio.to_thread(self.app.service.get_workflow_status, requested_id(request))
            raw = read.payload()
            status = StatusView.model_validate(_details_named(raw, redact(raw)))
            now = await asyncio.to_thread(self.app.service.records.now)
        except WorkflowNotFound as exc:
            return self.console.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=session
            )
        catalog = self.app.service.catalog
        lines = {
            s.index: evidence_line(redact(s.result), s.tool)
            for s in wf.steps
            if s.result is not None and not s.is_gate
        }
        pending = waiting_gate(wf)
        waiting = next((g for g in status.gates if pending is not None and g.index == pending.index), None)
        return self.console.page(
            request,
            "workflow.html",
            session=session,
            wf=status,
            lines=lines,
            version=version,
            audit=status.audit_log[-_AUDIT_TAIL:],
            notice=request.query_params.get("notice", "")[:200],
            released=self.app.service.release_notice(wf),
            ending=ending(wf, catalog),
            display=inbox.display_state(wf, now),
            waiting=waiting,
            mine=waiting is not None
            and any(caller.actor.is_same_person(a.approver) for a in waiting.approvals),
            why=str(wf.params.get("description", "") or ""),
            actions=self._next_actions(caller, wf),
        )

    def _next_actions(self, caller: Caller, wf: Workflow) -> dict[str, str]:
        """What this person may do next about ``wf`` (rollback, cancel): each action's refusal in
        words, "" when they may. Actions that do not apply to the state are left out."""
        actions: dict[str, str] = {}
        rolled_back = wf.state is WorkflowState.FAILED and bool(wf.rollback_results)
        if wf.state in _ROLLBACK_STATES and not rolled_back:
            why = call_refusal(caller.actor, caller.role, "rollback")
            actions["rollback"] = f"Your role cannot roll back: {why.message}" if why else ""
        if wf.state in _CANCEL_STATES:
            why = call_refusal(caller.actor, caller.role, "cancel_workflow")
            actions["cancel"] = f"Your role cannot cancel: {why.message}" if why else ""
        return actions

    async def step_result(self, request: Request) -> Response:
        session = self.console.caller(request, STATUS).session
        try:
            status = self.app.service.get_workflow_status(requested_id(request))
            step = status.steps[int(request.path_params["index"])]
        except (WorkflowNotFound, IndexError, ValueError):
            return self.console.page(
                request, "error.html", 404, title="Not found", message="No such step.", session=session
            )
        return self.console.page(
            request, "result.html", session=session, wf=status, step=redact(step.payload())
        )

    async def events(self, request: Request) -> Response:
        refused = self.console.stream_refusal(request, STATUS)
        if refused is not None:
            return refused
        return workflow_events(self.app, requested_id(request), request, self.console.still(request, STATUS))

    async def list_events(self, request: Request) -> Response:
        refused = self.console.stream_refusal(request, LIST)
        if refused is not None:
            return refused
        return workflows_events(self.app, request, self.console.still(request, LIST))
