"""The console's rollback and cancel: the service's preview (its blast radius) first, refused
while it has blockers or unmeasured steps (or undo calls without dispatch), then the service's own
path on a confirmed form (the CLI's rules).

Whether the person's role may roll back or cancel is the service's decision, made on the first
request of a form (the preview, carrying the role); the preview page alone (which changes nothing
and is shown to whoever may see the workflow) asks the service without the role and says what the
role cannot do."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from vmware_pilot.engine.requests import CancelRequest, RollbackRequest
from vmware_pilot.errors import AccessRefused, PilotError, WorkflowNotFound
from vmware_pilot.results import BlastRadius, Preview, Result
from vmware_pilot.safety import roles
from vmware_pilot.safety.duties import Role
from vmware_pilot.transports.console.plumbing import REASON_MAX, STATUS, Caller, requested_id

if TYPE_CHECKING:
    from vmware_pilot.transports.console.routes import Console

__all__ = ["Undoing"]


class Undoing:
    """The rollback and cancel routes of one console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.app = console.app

    async def _radius(
        self, caller: Caller, workflow_id: str, verb: str, ack: bool, role: Role | None
    ) -> BlastRadius:
        """The preview's blast radius; with ``role``, the service refuses a role that may not
        ``verb`` (``AccessRefused``)."""
        service = self.app.service
        answer: Result
        if verb == "rollback":
            answer = await service.rollback(
                RollbackRequest(caller.actor, workflow_id, False, ack, door="console", role=role)
            )
        else:
            answer = await service.cancel_workflow(
                CancelRequest(caller.actor, workflow_id, "", False, ack, door="console", role=role)
            )
        assert isinstance(answer, Preview), answer  # without confirm: always the preview
        return answer.blast_radius

    def _problems(self, verb: str, radius: BlastRadius) -> list[str]:
        """Why ``verb`` cannot go ahead as previewed (the CLI's rules): blockers, unmeasured
        steps, and undo calls that cannot be made without dispatch."""
        problems = [*radius.blockers, *radius.unmeasured]
        if verb == "rollback" and radius.would_roll_back_count and self.app.dispatcher is None:
            problems.append(
                "Pilot undoes steps by calling their skills' undo tools, and this Pilot runs without "
                "dispatch, so every undo would fail"
            )
        return problems

    async def undo_preview(
        self,
        request: Request,
        verb: str,
        error: str = "",
        status: int = 200,
        refused: AccessRefused | None = None,
    ) -> Response:
        """The preview page; ``refused``: the service's refusal of the person's role, when it was
        just asked (else the page says what the role cannot do)."""
        caller = self.console.caller(request, STATUS)
        workflow_id = requested_id(request)
        ack = request.query_params.get("ack") == "1"
        try:
            radius = await self._radius(caller, workflow_id, verb, ack, None)
        except WorkflowNotFound as exc:
            return self.console.page(
                request, "error.html", 404, title="Not found", message=exc.message, session=caller.session
            )
        except PilotError as exc:
            return self.console.page(
                request, "error.html", 409, title="Refused", message=exc.message, session=caller.session
            )
        if refused is None:
            tool = "rollback" if verb == "rollback" else "cancel_workflow"
            refused = roles.call_refusal(caller.actor, caller.role, tool)
        return self.console.page(
            request,
            "undo.html",
            status,
            session=caller.session,
            verb=verb,
            workflow_id=workflow_id,
            radius=radius,
            problems=self._problems(verb, radius),
            role_says=f"Your role cannot do this: {refused.message}" if refused else "",
            ack=ack,
            error=error,
        )

    async def rollback_preview(self, request: Request) -> Response:
        return await self.undo_preview(request, "rollback")

    async def cancel_preview(self, request: Request) -> Response:
        return await self.undo_preview(request, "cancel")

    async def _undo(self, request: Request, verb: str) -> Response:
        what = "Rollback" if verb == "rollback" else "Cancel"
        caller, workflow_id, fields = await self.console.decision_form(request, what)
        ack = fields.get("ack_unknown") == "yes"
        role = caller.role
        try:
            radius = await self._radius(caller, workflow_id, verb, ack, role)
        except AccessRefused as exc:
            return await self.undo_preview(request, verb, f"Refused: {exc.message}", 403, exc)
        except PilotError as exc:
            return await self.undo_preview(request, verb, f"Refused: {exc.message}", 409)
        if fields.get("confirm") != "yes":
            return await self.undo_preview(
                request, verb, "Refused: tick the box to confirm; nothing was changed.", 400
            )
        problems = self._problems(verb, radius)
        if problems:
            return await self.undo_preview(
                request, verb, f"Refused: {'; '.join(problems)}. Nothing was changed.", 409
            )
        if verb == "cancel":
            reason = fields.get("reason", "").strip()[:REASON_MAX]
            if not reason:
                return await self.undo_preview(
                    request, verb, "Refused: say why you cancel; it is written to the audit trail.", 400
                )
            try:
                await self.app.service.cancel_workflow(
                    CancelRequest(caller.actor, workflow_id, reason, True, ack, door="console", role=role)
                )
            except PilotError as exc:
                return await self.undo_preview(request, verb, f"Refused: {exc.message}", 409)
            return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=cancelled", 303)
        undo = RollbackRequest(caller.actor, workflow_id, True, ack, door="console", role=role)
        self.console.detach(self.app.service.rollback(undo))
        return RedirectResponse(f"/console/workflows/{quote(workflow_id)}?notice=rollback", 303)

    async def rollback(self, request: Request) -> Response:
        return await self._undo(request, "rollback")

    async def cancel(self, request: Request) -> Response:
        return await self._undo(request, "cancel")
