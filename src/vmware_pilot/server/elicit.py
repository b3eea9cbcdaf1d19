"""The approval form: asks the person at the MCP client through elicitation (approvals = elicit).

The form shows the decision summary first (who asked and why, the verdict and what approving
changes, the approvals still needed, the time left: ``engine.decision``), then the gate message,
the prediction, the steps the gate releases with their risk tier, what ran before it and the plan
digest, and asks for a decision (approve or reject), the person's name, to reject a reason, an
optional comment on an approval and, to approve despite a predicted failure, the reason for that.
What comes back is the person's answer, never the agent's arguments.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import ClientCapabilities, ElicitationCapability
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field

from vmware_pilot.errors import PilotError

if TYPE_CHECKING:  # the engine is imported when the app is built, not at start-up
    from vmware_pilot.engine.gateview import GateView
    from vmware_pilot.engine.policy import AskHuman, HumanAnswer
    from vmware_pilot.results import Decision

__all__ = ["ApprovalForm", "SignedInApprovalForm", "human_asker"]

_log = logging.getLogger("vmware_pilot.server")

DECISIONS = ("approve", "reject")


def _decision() -> Any:
    return Field(
        title="Decision",
        description="approve lets the run go on; reject cancels the workflow (give a reason).",
        json_schema_extra={"enum": list(DECISIONS)},
    )


def _reason() -> Any:
    return Field(default="", title="Reason", description="Why you reject (required to reject).")


def _comment() -> Any:
    return Field(
        default="", title="Comment", description="Optional: a comment on your approval, recorded with it."
    )


def _despite() -> Any:
    return Field(
        default="",
        title="Approve despite the predicted failure",
        description="Only when the prediction above says the run fails: why you approve anyway "
        "(recorded with your approval; without it such an approval is refused).",
    )


class ApprovalForm(BaseModel):
    """The elicitation schema (primitive fields only, as the MCP form mode requires)."""

    decision: str = _decision()
    approver: str = Field(
        default="",
        title="Your name",
        description="Recorded in the audit trail as the approver.",
    )
    reason: str = _reason()
    comment: str = _comment()
    despite: str = _despite()


# The form for a caller the transport authenticated (a token or OAuth caller): the approver recorded
# is that identity, so the form asks for no name. A name a client sends anyway is read (``extra``)
# and must be that identity. (A docstring would be sent to the client as the form's description.)
class SignedInApprovalForm(BaseModel):
    model_config = ConfigDict(extra="allow", title="Approval")

    decision: str = _decision()
    reason: str = _reason()
    comment: str = _comment()
    despite: str = _despite()


def _can_elicit(ctx: Context[Any, Any]) -> bool:
    try:
        request = ctx.request_context
    except ValueError:  # no request in flight
        return False
    if request.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return False  # 2026-07-28 has no server-to-client requests: no form to send
    capability = ClientCapabilities(elicitation=ElicitationCapability())
    return bool(request.session.check_client_capability(capability))


def human_asker(ctx: Context[Any, Any]) -> AskHuman | None:
    """The form for this request's client, or None when the client cannot show forms (it did
    not declare elicitation, or its connection speaks 2026-07-28)."""
    if not _can_elicit(ctx):
        return None

    async def ask(
        view: GateView, decision: Decision | None, default_approver: str, signed_in: bool
    ) -> HumanAnswer:
        from vmware_pilot.engine.policy import HumanAnswer, describe_gate

        message = describe_gate(view, decision)
        form: type[ApprovalForm | SignedInApprovalForm] = ApprovalForm
        if signed_in:
            message += f"\n(You decide as {default_approver}, the identity you connected with.)"
            form = SignedInApprovalForm
        elif default_approver:
            message += f"\n(Leave your name empty to be recorded as {default_approver}.)"
        try:
            result = await ctx.elicit(message, form)
        except MCPError as exc:
            _log.warning("approval form failed: %s", exc.error.message)
            raise PilotError(
                f"The MCP client could not show the approval form ({exc.error.message}); nothing was approved",
                hint=f"Ask the user to run `vmware-pilot approve {view.workflow_id}` on the Pilot host.",
                workflow_id=view.workflow_id,
            ) from exc
        except ValueError as exc:  # accepted with no content, or content not in the form's shape
            raise PilotError(
                "The approval form came back in a shape Pilot cannot read; nothing was approved",
                hint="Call approve again and answer the form (decision: approve or reject).",
                workflow_id=view.workflow_id,
            ) from exc
        if result.action != "accept":
            return HumanAnswer("decline")
        data = result.data
        if data.decision not in DECISIONS:
            return HumanAnswer("decline")
        named = getattr(data, "approver", None)
        return HumanAnswer(
            "approve" if data.decision == "approve" else "reject",
            approver=str(named).strip() if named is not None else "",
            reason=data.reason.strip(),
            despite=data.despite.strip(),
            comment=data.comment.strip(),
        )

    return ask
