"""The console's gate page and its decisions: approve and reject, as the signed-in person.

The gate page starts with the decision summary and offers only what this person may do now,
saying why not in place of a control; the gate view, the summary and what the person may do come
from one read of the gate (``PilotService.gate_page``: one prediction). A decision is one request
to the service (``ApproveRequest``, ``RejectRequest``) with the person and their role: the service
makes every check once (the role, the plan digest the page showed, which the form must carry,
expiry, four eyes, the policy) and answers a refusal before anything changes; an approval then
goes on after the answer (it may dispatch for minutes)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import quote

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.engine.requests import ApproveRequest, RejectRequest
from vmware_pilot.errors import AccessRefused, InvalidInput, PilotError, WorkflowNotFound
from vmware_pilot.results import GateStatus
from vmware_pilot.safety.redaction import redact
from vmware_pilot.transports.console.plumbing import GATE, REASON_MAX, requested_id
from vmware_pilot.transports.console.words import evidence_line

if TYPE_CHECKING:
    from vmware_pilot.transports.console.routes import Console

__all__ = ["Decisions"]


def _status_of(exc: PilotError) -> int:
    """The HTTP status of a refused decision: the role 403, a form without what it needs 400, the
    engine's refusals (state, expiry, plan, four eyes, policy) 409."""
    if isinstance(exc, AccessRefused):
        return 403
    return 400 if isinstance(exc, InvalidInput) else 409


class Decisions:
    """The gate page and the approve and reject routes of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.app = console.app

    async def gate(self, request: Request, error: str = "", status: int = 200) -> Response:
        caller = self.console.caller(request, GATE)
        session = caller.session
        workflow_id = requested_id(request)
        service = self.app.service
        try:
            shown = await service.gate_page(caller.actor, workflow_id, caller.role, "console")
            wf = await asyncio.to_thread(service.records.load, workflow_id)
        except WorkflowNotFound as exc:
            return self.console.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=session
            )
        except PilotError:
            return RedirectResponse(f"/console/workflows/{quote(workflow_id)}", 303)
        gate = shown.view.pending() or GateStatus()
        evidence = {
            s.index: evidence_line(redact(s.result), s.tool)
            for s in wf.steps[: max(0, gate.index)]
            if not s.is_gate and s.status in (StepStatus.SUCCESS, StepStatus.FAILED)
        }
        return self.console.page(
            request,
            "gate.html",
            status,
            session=session,
            view=shown.view,
            gate=gate,
            error=error,
            decision=shown.decision,
            may=shown.may,
            evidence=evidence,
        )

    async def approve(self, request: Request) -> Response:
        caller, workflow_id, fields = await self.console.decision_form(request, "Approval")
        step = fields.get("gate_step", "")
        # Approving despite a failing prediction takes the box ticked and a reason.
        despite = fields.get("ack_failure_reason", "").strip() if fields.get("ack_failure") == "yes" else ""
        approving = ApproveRequest(
            caller.actor,
            workflow_id,
            door="console",
            role=caller.role,
            acknowledge_not_executed=fields.get("ack_not_executed") == "yes",
            # The form names the plan and the gate it showed (the digest is bound to that gate too).
            expected_digest=fields.get("digest", "").strip(),
            gate_step=int(step) if step.isascii() and step.isdigit() and len(step) <= 6 else None,
            acknowledge_failure=despite,
            comment=fields.get("comment", "").strip()[:REASON_MAX],
        )
        admitted = asyncio.get_running_loop().create_future()

        async def answer_now() -> bool:  # every check passed: the person gets the answer page
            admitted.set_result(None)
            return True

        work = self.console.detach(self.app.service.approve(approving, confirm=answer_now))
        await asyncio.wait({work, admitted}, return_when=asyncio.FIRST_COMPLETED)
        if not admitted.done():  # refused before anything changed
            refused = work.exception()
            if not isinstance(refused, PilotError):
                raise refused or RuntimeError("the approval ended without an answer")
            return await self.gate(request, f"Refused: {refused.message}", _status_of(refused))
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=approved", 303)

    async def reject(self, request: Request) -> Response:
        caller, workflow_id, fields = await self.console.decision_form(request, "Rejection")
        reason = fields.get("reason", "")[:REASON_MAX]
        rejecting = RejectRequest(caller.actor, workflow_id, reason, role=caller.role)
        try:  # the role first, then the state, then the reason (written to the audit trail)
            await anyio.to_thread.run_sync(self.app.service.reject, rejecting)
        except PilotError as exc:
            return await self.gate(request, f"Refused: {exc.message}", _status_of(exc))
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=rejected", 303)
