"""Gate records: what a reached approval gate releases, its plan digest, expiry and approvals.

When a run reaches a gate, ``reach`` records in ``wf.gates`` (``domain.records.GateRecord``) the
digest of what the gate releases (the gate's own params and every step after it up to the next
gate: action, skill, tool, params with references as written, rollback tool and params, group),
when it was reached, when it expires and how many distinct approvers it needs. Params are digested with
secrets masked, as the store keeps them, so the digest computed before a save matches the one
computed after a reload. ``admit`` is the rule approve applies before recording an approval.
Everything here is a pure function of the workflow and ``now``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.actor import identity_key
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.gate_options import gate_options
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.records import Approval, GatePolicy, GateRecord, Inspection
from vmware_pilot.engine.gateview import GateView, build_view, empty_view
from vmware_pilot.errors import AlreadyApproved, StateRefused
from vmware_pilot.results import Prediction
from vmware_pilot.safety.classify import Tier, classify_step
from vmware_pilot.safety.predict import predict
from vmware_pilot.safety.redaction import redact

__all__ = [
    "admit",
    "approver_names",
    "default_expiry",
    "expiry_unnoticed",
    "gate_record",
    "gate_view",
    "gates_status",
    "inspection_of",
    "is_expired",
    "mark_expired",
    "pending_gate",
    "plan_digest",
    "prediction_of",
    "reach",
    "record_approval",
    "released_steps",
    "required_approvals",
    "steps_to_run",
    "stored_prediction",
    "void_approvals",
]


def pending_gate(wf: Workflow) -> Step | None:
    """The first gate still pending: the one an ``awaiting_approval`` workflow waits at."""
    return next((s for s in wf.steps if s.is_gate and s.status is StepStatus.PENDING), None)


def released_steps(wf: Workflow, gate_index: int) -> list[Step]:
    """The steps approving gate ``gate_index`` lets run: those after it, up to the next gate."""
    out: list[Step] = []
    for step in wf.steps[gate_index + 1 :]:
        if step.is_gate:
            break
        out.append(step)
    return out


def steps_to_run(wf: Workflow, gate_index: int) -> list[Step]:
    """The released steps still pending: all of them at a gate reached in order; from the held
    step on at a gate a check before a write opened again (engine.execution.holds)."""
    return [s for s in released_steps(wf, gate_index) if s.status is StepStatus.PENDING]


def _canonical(step: Step) -> dict[str, Any]:
    return {
        "index": step.index,
        "action": step.action,
        "skill": step.skill,
        "tool": step.tool,
        "params": redact(step.params),
        "rollback_tool": step.rollback_tool,
        "rollback_params": redact(step.rollback_params),
        "group_id": step.group_id,
    }


def plan_digest(wf: Workflow, gate_index: int) -> str:
    """``sha256:<hex>`` over the workflow id, the gate and the steps it releases."""
    body = {
        "workflow_id": wf.id,
        "gate": _canonical(wf.steps[gate_index]),
        "releases": [_canonical(s) for s in released_steps(wf, gate_index)],
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def gate_record(wf: Workflow, gate_index: int) -> GateRecord | None:
    return wf.gates.get(gate_index)


def reach(
    wf: Workflow,
    gate_index: int,
    now: datetime,
    policy: GatePolicy | None = None,
    default_minutes: float | None = None,
) -> GateRecord:
    """Record that the run reached gate ``gate_index`` now (a fresh record: no approvals yet; a
    hold that opened the gate again, and the earlier records, are kept). ``policy``: the policy
    rule the gate follows (``engine.guard.GateRule.record``): its quorum and validity can only
    tighten the gate's own options, and it is kept in the record. ``default_minutes``: the expiry
    this gate gets at most (``VMWARE_PILOT_GATE_EXPIRY_MINUTES`` for a gate releasing destructive
    steps, see ``default_expiry``); the plan's own ``expires_in_minutes`` applies when shorter."""
    previous = gate_record(wf, gate_index)
    options = gate_options(wf.steps[gate_index].params)
    minutes = options.expires_in_minutes
    if default_minutes is not None:
        minutes = default_minutes if minutes is None else min(minutes, default_minutes)
    required = options.approvals_required
    if policy is not None:
        limit = policy.max_validity_minutes
        if limit is not None:
            minutes = limit if minutes is None else min(minutes, limit)
        required = max(required, policy.quorum)
    expires = now + timedelta(minutes=minutes) if minutes is not None else None
    kept = {"hold", "earlier"} & previous.model_fields_set if previous is not None else set()
    record = GateRecord(
        index=gate_index,
        digest=plan_digest(wf, gate_index),
        reached_at=now,
        expires_at=expires,
        approvals_required=required,
        approvals=[],
        **{k: getattr(previous, k) for k in sorted(kept)},
    )
    if policy is not None:
        record.policy = policy
    wf.gates[gate_index] = record
    return record


def default_expiry(wf: Workflow, gate_index: int, catalog: Catalog, minutes: float) -> float | None:
    """The expiry a gate gets when its plan sets none (or a longer one): ``minutes`` when it releases
    a destructive step, None (only the plan's own) for a gate releasing writes or reads, and for
    ``minutes`` 0 (no default)."""
    if minutes <= 0:
        return None
    released = released_steps(wf, gate_index)
    return minutes if any(classify_step(s, catalog)[0] is Tier.DESTRUCTIVE for s in released) else None


def waited_seconds(wf: Workflow, gate_index: int, now: datetime) -> float | None:
    """Seconds gate ``gate_index`` has waited since the run reached it (None: no record of it)."""
    record = gate_record(wf, gate_index)
    reached = record.reached_at if record else None
    return None if reached is None else max(0.0, (now - reached).total_seconds())


def is_expired(record: GateRecord | None, now: datetime) -> bool:
    expires = record.expires_at if record else None
    return expires is not None and now >= expires


def expiry_unnoticed(wf: Workflow, now: datetime) -> bool:
    """True when the gate ``wf`` waits at has expired at ``now`` and nobody recorded that yet."""
    gate = pending_gate(wf)
    if wf.state is not WorkflowState.AWAITING_APPROVAL or gate is None:
        return False
    record = gate_record(wf, gate.index)
    return is_expired(record, now) and record is not None and record.expiry_noticed_at is None


def mark_expired(w: Workflow, actor: str, now: datetime) -> bool:
    """Record (a change for the runner's save) that the waiting gate expired: once per gate, with
    the audit event ``gate_expired`` (which the webhook announces). False: nothing to record."""
    if not expiry_unnoticed(w, now):
        return False
    gate = pending_gate(w)
    assert gate is not None  # expiry_unnoticed checked it
    record = gate_record(w, gate.index)
    assert record is not None
    record.expiry_noticed_at = now  # once per gate
    names = approver_names(record)
    given = f"; {len(names)} of {required_approvals(gate, record)} approvals given" if names else ""
    w.log(
        "gate_expired",
        f"The gate at step {gate.index} expired at {iso(record.expires_at)} without a decision"
        f"{given}; it can no longer be approved (reject or cancel it)",
        actor,
        at=now,
    )
    return True


def approver_names(record: GateRecord | None) -> list[str]:
    return record.approver_names if record else []


def required_approvals(gate: Step, record: GateRecord | None) -> int:
    """How many distinct approvers gate ``gate`` needs (its record's count, else its options)."""
    if record is not None and record.approvals_required is not None:
        return max(1, record.approvals_required)
    return gate_options(gate.params).approvals_required


def admit(
    wf: Workflow, gate: Step, approver: str, now: datetime, expected_digest: str = ""
) -> tuple[str, int, int]:
    """Refuse an expired gate, a plan changed since the gate was reached (or since ``expected_digest``
    was shown) and a second approval by the same person. Returns (digest, approvals so far, required)."""
    record = gate_record(wf, gate.index)
    current = plan_digest(wf, gate.index)
    where = f"workflow '{wf.id}' (gate at step {gate.index})"
    if is_expired(record, now):
        raise StateRefused(
            f"Refusing to approve {where}: the gate expired at {iso(record.expires_at) if record else ''}; "
            "an expired approval request cannot be approved",
            hint=f"Reject it (`vmware-pilot reject {wf.id} --reason ...`) or cancel_workflow, then create "
            "a new workflow if the change is still wanted.",
            workflow_id=wf.id,
            state=wf.state.value,
            refused="gate_expired",
            expired_at=iso(record.expires_at) if record else "",
        )
    recorded = record.digest if record else current
    if current != recorded or (expected_digest and expected_digest != current):
        shown = expected_digest if expected_digest and expected_digest != current else recorded
        raise StateRefused(
            f"Refusing to approve {where}: the steps this gate releases changed after they were "
            f"{'shown for approval' if shown == expected_digest else 'recorded at the gate'} "
            f"(digest {shown[:19]}… is now {current[:19]}…); nobody approved the plan as it stands",
            hint="Inspect it with get_workflow_status / `vmware-pilot status`; reject or cancel it and "
            "create a new workflow for the plan you mean to approve.",
            workflow_id=wf.id,
            state=wf.state.value,
            refused="plan_changed",
            approved_digest=shown,
            current_digest=current,
        )
    names = approver_names(record)
    if identity_key(approver) in {identity_key(n) for n in names}:
        raise AlreadyApproved(
            f"Refusing to approve {where}: {approver} already approved this gate; it needs "
            f"{required_approvals(gate, record)} distinct approvers",
            hint="Another person has to approve it.",
            workflow_id=wf.id,
            state=wf.state.value,
            approvals=names,
        )
    return current, len(names), required_approvals(gate, record)


def record_approval(
    wf: Workflow,
    gate_index: int,
    approver: str,
    channel: str,
    digest: str,
    now: datetime,
    *,
    verdict: str = "",
    acknowledged: str = "",
    policy_digest: str = "",
    comment: str = "",
) -> list[str]:
    """Append one approval to the gate's record (created if missing); the approvers so far.
    ``verdict`` is the prediction it was given for (``safety.predict.verdict_key``);
    ``acknowledged`` the approver's reason for approving despite a failing prediction."""
    record = gate_record(wf, gate_index) or reach(wf, gate_index, now)
    given = {
        "verdict": verdict,
        "acknowledged_failure": acknowledged,
        "policy_digest": policy_digest,
        "comment": comment,
    }
    entry = Approval(
        approver=approver,
        at=now,
        channel=channel,
        digest=digest,
        **{k: v for k, v in given.items() if v},  # each kept only when given
    )
    record.approvals = [*record.approvals, entry]
    return approver_names(record)


def void_approvals(wf: Workflow, gate_index: int, verdict: str) -> list[str]:
    """Move the approvals given for another prediction than ``verdict`` out of the gate's count
    (kept under ``voided_approvals``); the names of those approvers."""
    record = gate_record(wf, gate_index)
    if record is None:
        return []
    stale = [a for a in record.approvals if a.verdict and a.verdict != verdict]
    if not stale:
        return []
    record.approvals = [a for a in record.approvals if a not in stale]
    record.voided_approvals = [*record.voided_approvals, *stale]
    return [a.approver for a in stale]


def stored_prediction(wf: Workflow, gate_index: int) -> Prediction | None:
    """The prediction the last inspection of gate ``gate_index`` made (None: not inspected)."""
    inspection = inspection_of(wf, gate_index)
    raw = inspection.prediction if inspection else None
    return Prediction.model_validate(raw) if raw is not None else None


def prediction_of(wf: Workflow, gate_index: int, catalog: Catalog, dispatching: bool) -> Prediction:
    """The prediction shown at gate ``gate_index``: the last inspection's, or, when the targets were
    not read, one that says so step by step."""
    stored = stored_prediction(wf, gate_index)
    if stored is not None:
        return stored
    note = (
        "Pilot runs without dispatch (hand-back mode), so it read nothing"
        if not dispatching
        else "The gate's targets were not read yet"
    )
    return predict(steps_to_run(wf, gate_index), wf.steps, None, catalog, note=note)


def _view_of(wf: Workflow, gate: Step, now: datetime) -> dict[str, Any]:
    record = gate_record(wf, gate.index)
    names = approver_names(record)
    required = required_approvals(gate, record)
    message = str(gate.params.get("message", ""))
    held = record.hold if record else None
    if held is not None and gate.status is StepStatus.PENDING:
        # What stopped the run comes first; the plan's own words follow.
        message = held.message + (f" (The gate's message: {message})" if message else "")
    view: dict[str, Any] = {
        "index": gate.index,
        "status": gate.status.value,
        "message": message,
        "digest": record.digest if record else "",
        "reached_at": iso(record.reached_at) if record else "",
        "expires_at": iso(record.expires_at) if record else "",
        "expired": gate.status is StepStatus.PENDING and is_expired(record, now),
        "approvals_required": required,
        "approvals": [a.stored() for a in record.approvals] if record else [],
        "approvals_missing": max(0, required - len(names)) if gate.status is StepStatus.PENDING else 0,
    }
    if record and record.policy is not None:
        view["policy"] = record.policy.stored()
    if record and held is not None:  # and the records of the approvals given before the hold
        view["hold"] = held.stored()
        view["earlier"] = [r.stored() for r in record.earlier]
    return view


def gates_status(wf: Workflow, now: datetime) -> list[dict[str, Any]]:
    """Every gate the runs reached, for get_workflow_status (``expired`` computed at ``now``)."""
    return [_view_of(wf, s, now) for s in wf.steps if s.is_gate and gate_record(wf, s.index) is not None]


def gate_view(wf: Workflow, catalog: Catalog, now: datetime, dispatching: bool = False) -> GateView:
    """What a person deciding on the pending gate is shown (an empty ``gate`` when none is
    pending). ``dispatching``: Pilot can read the targets' state."""
    gate = pending_gate(wf)
    if gate is None:
        return empty_view(wf)
    view = _view_of(wf, gate, now)
    current = plan_digest(wf, gate.index)
    view["plan_changed"] = bool(view["digest"]) and view["digest"] != current
    view["digest"] = view["digest"] or current
    inspection = inspection_of(wf, gate.index)
    prediction = prediction_of(wf, gate.index, catalog, dispatching)
    return build_view(
        wf, gate, view, released_steps(wf, gate.index), catalog, inspection, dispatching, prediction
    )


def inspection_of(wf: Workflow, gate_index: int) -> Inspection | None:
    """The stored result of the last inspection of gate ``gate_index`` (engine.inspection)."""
    return wf.inspections.get(gate_index)
