"""The decision summary of a waiting gate, and what one caller may do at it.

``decision_of`` builds, once, what a person needs to decide on the gate a workflow waits at: the
verdict of the gate's prediction and what approving would change (object, field, before → after;
and every object the released steps name),
who asked (the creator, and the agent that created it when that is not the creator) and why (the
workflow's description or goal, a ticket when one is named), the approvals still needed and who
gave them, and the expiry with the time left on the database's clock. Every approval surface (the
console, the CLI's panel, the elicitation form, the webhook) shows it first, from this one model.

``eligibility`` says what a given caller may do now at that gate, and when not, why (the code and
the sentence a surface shows in place of the control): the gate expired or its plan changed, the
caller's role cannot approve, four-eyes forbids the creator or an author, the caller already
approved. Both are pure functions of the workflow, the catalog and ``now``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import from_iso, iso
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.targets import named_objects
from vmware_pilot.results import Decision, DecisionChange, Eligibility, Prediction
from vmware_pilot.safety.duties import ADMIN, Role, approval_refusal, tool_refusal
from vmware_pilot.safety.predict import object_label
from vmware_pilot.safety.redaction import redact_text

__all__ = [
    "asked_through",
    "decision_lines",
    "decision_of",
    "eligibility",
    "rehearsal_summary",
    "time_left",
]

# Params that name a change ticket, in the order they are read; else a ticket-shaped word of the
# description (``CHG0012345``, ``INC123``, ``OPS-42``).
_TICKET_KEYS: Final = ("ticket", "ticket_id", "change_ticket", "change_id", "change_request")
_TICKET: Final = re.compile(r"\b(?:(?:CHG|INC|RITM|REQ|CR|PRB|TASK)\d{3,}|[A-Z][A-Z0-9]{1,9}-\d{1,7})\b")
_TEXT_MAX: Final = 500


def asked_through(wf: Workflow, actor: Actor) -> None:
    """Record on a new workflow the agent its creator asked through (``Actor.via``), if known."""
    if actor.via:
        wf.requested_via = actor.via


def _text(value: object) -> str:
    """One line, secrets masked, bounded: text from the workflow shown to a person."""
    line = " ".join(str(value or "").split())
    line = redact_text(line)
    return line if len(line) <= _TEXT_MAX else line[: _TEXT_MAX - 1] + "…"


def _why(wf: Workflow) -> str:
    for key in ("description", "goal", "reason"):
        value = wf.params.get(key)
        if isinstance(value, str) and value.strip():
            return _text(value)
    return ""


def _ticket(wf: Workflow, why: str) -> str:
    for key in _TICKET_KEYS:
        value = wf.params.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return _text(value)[:100]
    found = _TICKET.search(why)
    return found.group(0) if found else ""


def rehearsal_summary(prediction: Prediction) -> str:
    """The rehearsal on a twin in one line for a person: its verdict, which capture and how old
    (stale flagged), where it disagrees with the model; why it did not run. Empty without one."""
    r = prediction.rehearsal
    if r is None:
        return ""
    c = r.capture
    where = "no capture"
    if c:
        where = f"capture of {c.get('vcenter') or c.get('target')}, {c.get('age_hours')} h old"
        if c.get("stale"):
            where += ", STALE: older than VMWARE_PILOT_TWIN_MAX_AGE"
    if r.status != "rehearsed":
        return _text(f"Not rehearsed on a twin ({where})" + (f": {r.reason}" if r.reason else ""))
    text = f"Rehearsed on a twin: {r.verdict} ({where})"
    if r.disagreements:
        text += f"; the model said otherwise: {r.disagreements[0]}"
    return _text(text)


def decision_of(
    wf: Workflow, catalog: Catalog, now: datetime, dispatching: bool, prediction: Prediction | None = None
) -> Decision | None:
    """The decision summary of the gate ``wf`` waits at (None: it waits at none). ``now`` is the
    database's time (``Store.now``); ``prediction``: the gate's, when the caller has it already."""
    gate = gate_records.pending_gate(wf)
    if wf.state is not WorkflowState.AWAITING_APPROVAL or gate is None:
        return None
    record = gate_records.gate_record(wf, gate.index)
    if prediction is None:
        prediction = gate_records.prediction_of(wf, gate.index, catalog, dispatching)
    changes = [
        DecisionChange(
            step=step.step,
            tool=step.tool,
            object=change.object,
            field=change.field,
            before=change.before,
            after=change.after,
        )
        for step in prediction.steps
        for change in step.changes
    ]
    named = (
        object_label(n.kind, n.name)
        for step in gate_records.released_steps(wf, gate.index)
        for n in named_objects(step.skill, step.tool, step.params)
    )
    objects = list(dict.fromkeys([*(c.object for c in changes), *named]))
    names = gate_records.approver_names(record)
    required = gate_records.required_approvals(gate, record)
    expires = record.expires_at if record else None
    digest = record.digest if record else ""
    via = wf.requested_via
    why = _why(wf)
    return Decision(
        workflow_id=wf.id,
        gate=gate.index,
        message=_text(gate.params.get("message", "")),
        verdict=prediction.verdict,
        verdict_summary=_text(prediction.summary),
        failing_step=prediction.failing_step,
        rehearsal=rehearsal_summary(prediction),
        changes=changes,
        objects=objects,
        requested_by=wf.created_by,
        requested_via=via if via and via != wf.created_by else "",
        why=why,
        ticket=_ticket(wf, why),
        approvals_required=required,
        approved_by=names,
        approvals_missing=max(0, required - len(names)),
        expires_at=iso(expires) or "",
        seconds_left=None if expires is None else max(0.0, round((expires - now).total_seconds(), 3)),
        expired=gate_records.is_expired(record, now),
        plan_changed=bool(digest) and digest != gate_records.plan_digest(wf, gate.index),
        at=iso(now) or "",
    )


def eligibility(
    wf: Workflow, actor: Actor, now: datetime, role: Role | None = None, door_refusal: str = ""
) -> Eligibility:
    """What ``actor`` (with ``role``; None: a door without roles, such as the operator CLI, where the
    person approves as themselves) may do now at the gate ``wf`` waits at, and if not, why.
    ``door_refusal``: why this door takes no approvals at all (the approvals policy), if so."""
    role = role or ADMIN
    gate = gate_records.pending_gate(wf)
    if wf.state is not WorkflowState.AWAITING_APPROVAL or gate is None:
        why = f"Workflow '{wf.id}' is not waiting at an approval gate (state: {wf.state.value})."
        return Eligibility(
            may_approve=False,
            may_reject=False,
            approve_refused="not_waiting",
            approve_why=why,
            reject_refused="not_waiting",
            reject_why=why,
        )
    record = gate_records.gate_record(wf, gate.index)
    reject_code, reject_why = "", ""
    reject_role = tool_refusal(role, "cancel_workflow")
    if reject_role:
        reject_code, reject_why = "role_cannot_reject", f"{reject_role}."
    code, why = "", ""
    digest = record.digest if record else ""
    role_says = tool_refusal(role, "approve") or approval_refusal(role, actor, wf)
    if gate_records.is_expired(record, now):
        expired_at = iso(record.expires_at) if record else ""
        code, why = "gate_expired", f"The gate expired at {expired_at}; it can only be rejected or cancelled."
    elif digest and digest != gate_records.plan_digest(wf, gate.index):
        code, why = (
            "plan_changed",
            "The steps this gate releases changed after the gate was reached; nobody can approve the "
            "plan as it stands. Reject or cancel it.",
        )
    elif door_refusal:
        code, why = "door_closed", door_refusal
    elif role_says:
        creator = actor.is_same_person(wf.created_by) if wf.created_by.strip() else False
        author = any(actor.is_same_person(a) for a in wf.authors)
        code = (
            "role_cannot_approve"
            if role.approve == "none" or not role.may_call("approve")
            else "creator_four_eyes"
            if creator
            else "author_four_eyes"
            if author
            else "no_creator"
        )
        why = f"{role_says}."
    elif any(actor.is_same_person(n) for n in gate_records.approver_names(record)):
        code, why = (
            "already_approved",
            f"You already approved this gate; it needs {gate_records.required_approvals(gate, record)} "
            "different approvers, so someone else has to approve it.",
        )
    return Eligibility(
        may_approve=not code,
        may_reject=not reject_code,
        approve_refused=code,
        approve_why=why,
        reject_refused=reject_code,
        reject_why=reject_why,
    )


def time_left(seconds: float | None) -> str:
    """``seconds`` left as a person reads it: ``2 h 5 min left``, ``40 s left``, ``expired``."""
    if seconds is None:
        return "no expiry"
    if seconds <= 0:
        return "expired"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h left"
    if hours:
        return f"{hours} h {minutes} min left"
    if minutes:
        return f"{minutes} min left"
    return f"{secs} s left"


def _value(value: object) -> str:
    return "?" if value is None else _text(value)[:80]


def _when(stamp: str) -> str:
    """An ISO time as a person reads it: ``2026-12-03 13:56 UTC``."""
    at = from_iso(stamp)
    return at.strftime("%Y-%m-%d %H:%M UTC") if at is not None else stamp


_SHORT_VERDICT: Final = 160


def decision_lines(decision: Decision, *, short: bool = False) -> list[str]:
    """The decision summary as a few plain lines (the CLI's panel, the form, a chat message);
    ``short``: the verdict's summary cut to a line or two (a terminal's panel)."""
    asked = decision.requested_by or "unknown"
    if decision.requested_via:
        asked += f" via {decision.requested_via}"
    lines = [f"Asked by {asked}" + (f" — {decision.why}" if decision.why else "")]
    if decision.ticket and decision.ticket not in decision.why:
        lines.append(f"Ticket: {decision.ticket}")
    summary = decision.verdict_summary
    if short and len(summary) > _SHORT_VERDICT:
        summary = summary[: _SHORT_VERDICT - 1] + "…"
    lines.append(f"Verdict: {decision.verdict}" + (f" — {summary}" if summary else ""))
    if decision.rehearsal:
        lines.append(decision.rehearsal)
    shown = decision.changes[:8]
    for change in shown:
        lines.append(
            f"  step {change.step}: {change.object} {change.field} {_value(change.before)} → {_value(change.after)}"
        )
    if len(decision.changes) > len(shown):
        lines.append(f"  … and {len(decision.changes) - len(shown)} more changes")
    if not decision.changes:
        lines.append("  No change to an object is known in advance.")
    approvals = f"Approvals: {decision.approvals_required - decision.approvals_missing} of {decision.approvals_required}"
    if decision.approved_by:
        approvals += f" (approved by {', '.join(decision.approved_by)})"
    if decision.approvals_missing:
        approvals += f"; {decision.approvals_missing} more needed"
    lines.append(approvals)
    if decision.expired:
        lines.append(f"Expired at {_when(decision.expires_at)}: it can no longer be approved.")
    elif decision.expires_at:
        lines.append(f"Expires {_when(decision.expires_at)} ({time_left(decision.seconds_left)})")
    else:
        lines.append("No expiry: the gate waits until someone decides.")
    if decision.plan_changed:
        lines.append("The plan changed after the gate was reached: it cannot be approved as it stands.")
    return lines
