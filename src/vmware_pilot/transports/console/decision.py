"""What the console tells a person deciding on a gate, and what this person may do now.

``summary`` builds the decision summary shown first on the gate page (the verdict, what approving
changes before → after, who asked and why, approvals still needed and by whom given, the time
left); ``eligibility`` says what the signed-in person may do now and, when not, why, from the
engine's own checks (``safety.duties.approve_refusal``, ``engine.execution.approval.precheck``)
so the page refuses before the click exactly what the click would be refused. Both read the
engine's gate view and the stored workflow; nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import from_iso
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine import handout
from vmware_pilot.engine.execution.approval import precheck
from vmware_pilot.engine.gateview import GateView
from vmware_pilot.errors import AlreadyApproved, PilotError
from vmware_pilot.results import GateStatus
from vmware_pilot.safety.duties import Role, approve_refusal, tool_refusal
from vmware_pilot.safety.predict import NOT_REACHED

__all__ = [
    "COMMENTS",
    "Change",
    "Decision",
    "Eligibility",
    "approve_options",
    "eligibility",
    "left_text",
    "summary",
]

_CHANGES_SHOWN: Final = 12
# Whether the engine records an approver's comment with the approval: until it does, the console
# offers no comment box (a comment it would drop is worse than none).
COMMENTS: Final = False


def approve_options(comment: str) -> dict[str, str]:
    """The engine's ``approve`` arguments that carry the approver's ``comment`` (none until it can)."""
    return {"comment": comment} if COMMENTS and comment else {}


@dataclass(frozen=True)
class Change:
    object: str
    field: str
    before: str
    after: str


@dataclass(frozen=True)
class Decision:
    """The decision summary of a pending gate."""

    verdict: str  # succeeds | fails | unknown | "" (no prediction)
    verdict_line: str
    changes: list[Change]
    more_changes: int
    requester: str
    agent: str  # the agent running the workflow when it is not the requester
    why: str  # the workflow's description
    message: str  # the gate's own message
    approvals_required: int
    approvers: list[str]
    approvals_missing: int
    expires_at: str
    seconds_left: int | None  # None: no expiry
    expired: bool
    superseded: bool


def _text(value: object) -> str:
    return "not known" if value is None else str(value)


def summary(view: GateView, wf: Workflow, now: datetime) -> Decision:
    gate = view.pending() or GateStatus()
    prediction = view.prediction
    changes: list[Change] = []
    if prediction is not None:
        for step in prediction.steps:
            if step.reason.startswith(NOT_REACHED):
                continue
            changes += [Change(c.object, c.field, _text(c.before), _text(c.after)) for c in step.changes]
    expires = from_iso(gate.expires_at) if gate.expires_at else None
    left = None if expires is None else max(0, int((expires - now).total_seconds()))
    agent = handout.agent_label(wf)
    requester = wf.created_by or "not recorded"
    return Decision(
        verdict=prediction.verdict if prediction is not None else "",
        verdict_line=prediction.summary if prediction is not None else "",
        changes=changes[:_CHANGES_SHOWN],
        more_changes=max(0, len(changes) - _CHANGES_SHOWN),
        requester=requester,
        agent=agent if agent and agent != wf.created_by else "",
        why=str(wf.params.get("description", "") or ""),
        message=gate.message,
        approvals_required=gate.approvals_required,
        approvers=[a.approver for a in gate.approvals],
        approvals_missing=max(0, gate.approvals_required - len(gate.approvals)),
        expires_at=gate.expires_at,
        seconds_left=left,
        expired=gate.expired or (left == 0 and expires is not None),
        superseded=gate.plan_changed,
    )


def left_text(seconds: int | None) -> str:
    """``seconds`` left in words: "2 d 3 h", "3 h 12 min", "4 min", "less than a minute"."""
    if seconds is None:
        return "no expiry set"
    if seconds <= 0:
        return "expired"
    minutes, _ = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h left"
    if hours:
        return f"{hours} h {minutes} min left"
    return f"{minutes} min left" if minutes else "less than a minute left"


@dataclass(frozen=True)
class Eligibility:
    """What the signed-in person may do at this gate now; each ``*_why`` says why not ("" : may)."""

    approve_why: str
    reject_why: str
    already_approved: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def may_approve(self) -> bool:
        return not self.approve_why

    @property
    def may_reject(self) -> bool:
        return not self.reject_why


# The engine's refusals (``refused`` of a StateRefused) in plain words for the person looking.
_PLAIN: Final = {
    "gate_expired": "This gate expired: it can no longer be approved. Reject it, or cancel the workflow, "
    "and ask for a new one if the change is still wanted.",
    "plan_changed": "The steps this gate releases changed after it was reached: this gate is superseded "
    "and cannot be approved. Reject it and ask for a new workflow.",
}


def eligibility(wf: Workflow, actor: Actor, role: Role, now: datetime) -> Eligibility:
    """What ``actor`` (with ``role``) may do at ``wf``'s pending gate at ``now``."""
    if wf.state is not WorkflowState.AWAITING_APPROVAL:
        why = f"The workflow is {wf.state.value.replace('_', ' ')}: there is no gate waiting for a decision."
        return Eligibility(why, why)
    reject_why = tool_refusal(role, "cancel_workflow") or ""
    reject_why = f"Your role cannot reject: {reject_why}." if reject_why else ""
    role_says = approve_refusal(role, actor, wf)
    try:
        # The engine's own checks before an approval: expired, superseded, already approved.
        precheck(wf, actor.label, True, now=now, acknowledge_failure="shown")
    except PilotError as exc:
        kind = str(exc.fields.get("refused", ""))
        if kind in _PLAIN:
            return Eligibility(_PLAIN[kind], reject_why)
        if isinstance(exc, AlreadyApproved):
            return Eligibility(
                "You already approved this gate; another person has to give the next approval.",
                reject_why,
                already_approved=True,
            )
        if not role_says:
            return Eligibility(f"{exc.message}.", reject_why)
    if role_says:
        if actor.is_same_person(wf.created_by) and "created" in role_says:
            why = (
                f"You asked for this change, and your role ({role.name}) approves only what someone "
                "else asked for (four eyes): another person has to approve it."
            )
        else:
            why = f"Your role cannot approve this: {role_says}."
        return Eligibility(why, reject_why)
    return Eligibility("", reject_why)
