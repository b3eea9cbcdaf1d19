"""Approving a gate: plan-bound, expiring, and with a quorum of distinct approvers.

Each approval is checked (``gate_records.admit``: not expired, plan unchanged since the gate was
reached or since it was shown, not the same person twice) and recorded in the gate's record with
the plan digest, and audited. Until the gate has the approvals it requires the workflow keeps
waiting (audit ``approval_recorded``); the last one releases it (audit ``approved``, naming the
approver and the digest) and the run continues.

This module decides and records; ``Approver.approve`` (engine/execution/approving.py) carries it
out (the dispatch refusal, the save, the run that follows), so nothing here calls back into the
runner.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, NamedTuple

from vmware_pilot.domain.actor import Actor, identity_key
from vmware_pilot.domain.enums import Event, StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine import handout
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.errors import StateRefused, StepsNotExecuted
from vmware_pilot.safety.predict import verdict_key

__all__ = [
    "COMMENT_MAX",
    "PERSON_DOORS",
    "Admitted",
    "QuorumReached",
    "approvals_missing",
    "precheck",
    "recipient",
    "record",
    "release_notice",
    "waiting_message",
]

S = StepStatus

# The doors a person approves through, outside the agent's MCP session.
PERSON_DOORS: Final = frozenset({"cli", "console"})
# The longest approval comment kept (characters, on one line).
COMMENT_MAX: Final = 500


class Admitted(NamedTuple):
    """What ``precheck`` found: the pending gate, the plan digest, the approvals so far and the
    approvals the gate requires."""

    gate: Step
    digest: str
    so_far: int
    required: int


class QuorumReached(StateRefused):
    """An approval recorded as one of several (``release=False``) would complete the quorum: it
    has to be recorded by a process holding the run lease, which then continues the run."""


def recipient(wf: Workflow, actor: Actor, channel: str, dispatching: bool) -> Actor:
    """Who the steps a gate releases go to without dispatch: the approving caller itself when it
    approves through MCP (the agent), otherwise (a person at the CLI or console) the agent that
    runs the workflow (``handout.agent_label``), so its next run_workflow gets them. With dispatch
    Pilot runs them, and the approver is the one on record."""
    if dispatching or channel not in PERSON_DOORS:
        return actor
    agent = handout.agent_label(wf)
    if agent and identity_key(agent) == identity_key(actor.label):
        return actor  # the person is the one running it (e.g. `vmware-pilot run`)
    return Actor(name=agent, kind="os")


def release_notice(wf: Workflow, dispatching: bool) -> str:
    """What a person approving ``wf`` at the CLI or console is told about the released steps
    (nothing with dispatch, where Pilot runs them)."""
    if dispatching:
        return ""
    who = handout.agent_label(wf) or "not known to Pilot"
    return (
        "Pilot runs nothing without dispatch: the steps this gate releases are handed to the agent that "
        f"runs this workflow ({who}), not to you. Its next run_workflow returns them in "
        "pending_dispatch, and it performs them with the skills' own tools."
    )


def _waiting_gate(wf: Workflow) -> Step:
    if wf.state is not WorkflowState.AWAITING_APPROVAL:
        raise StateRefused(f"Workflow {wf.id} is not awaiting approval (state: {wf.state.value})")
    gate = gate_records.pending_gate(wf)
    if gate is None:
        raise StateRefused(
            f"Workflow {wf.id} is awaiting approval but has no pending gate",
            hint="get_workflow_status shows its steps; cancel it and create a new workflow.",
            workflow_id=wf.id,
            state=wf.state.value,
        )
    return gate


def _not_this_gate(wf: Workflow, gate: Step, gate_step: int) -> StateRefused:
    released = gate_records.released_steps(wf, gate.index)
    releases = ", ".join(f"step {s.index} ({s.skill}.{s.tool})" for s in released[:10]) or "no step"
    if len(released) > 10:
        releases += f" and {len(released) - 10} more"
    message = str(gate.params.get("message", "")).strip()
    said = f" ({message[:200]!r})" if message else ""
    return StateRefused(
        f"Refusing to approve the gate at step {gate_step} of workflow '{wf.id}': it is not the gate "
        f"waiting for approval. The workflow waits at the gate at step {gate.index}{said}, which "
        f"releases {releases}. Nothing was changed",
        hint=f"Show the person the gate at step {gate.index} (get_workflow_status('{wf.id}') lists it "
        f"under gates) and approve with gate_step={gate.index} only if they approve that one.",
        workflow_id=wf.id,
        state=wf.state.value,
        refused="not_the_waiting_gate",
        gate_step=gate_step,
        waiting_gate=gate.index,
    )


def _refuse_unacknowledged_failure(wf: Workflow, gate: Step, acknowledge_failure: str) -> None:
    """Refuse an approval of a gate whose prediction fails unless the approver gave a reason."""
    prediction = gate_records.stored_prediction(wf, gate.index)
    if prediction is None or prediction.verdict != "fails" or acknowledge_failure.strip():
        return
    raise StateRefused(
        f"Refusing to approve workflow '{wf.id}' (gate at step {gate.index}): Pilot predicts the run "
        f"fails. {prediction.summary}",
        hint="Fix the plan or the estate and look at the gate again; to approve anyway, give your "
        "reason as acknowledge_predicted_failure (CLI: --acknowledge-failure REASON; console: the "
        "acknowledgment box).",
        workflow_id=wf.id,
        state=wf.state.value,
        refused="predicted_failure",
        failing_step=prediction.failing_step,
        prediction=prediction.summary,
    )


def precheck(
    wf: Workflow,
    approver: str | None,
    acknowledge_not_executed: bool,
    expected_digest: str = "",
    *,
    now: datetime,
    gate_step: int | None = None,
    acknowledge_failure: str = "",
) -> Admitted:
    """Every refusal approve can give before anything changes, in the contract's order
    (docs/contract.md#approve), judged at ``now`` (the database's clock: ``Store.now``).

    ``approver`` None skips the approver checks and the predicted failure (a person has not
    been asked, nor shown the prediction, yet). ``gate_step``: the gate the approver means;
    refused unless it is the one waiting. ``acknowledge_failure``: the approver's reason for
    approving although the gate's prediction says the run fails. Returns the pending gate,
    the plan digest, the approvals so far and the approvals required."""
    if wf.state is not WorkflowState.AWAITING_APPROVAL:
        raise StateRefused(f"Workflow {wf.id} is not awaiting approval (state: {wf.state.value})")
    if approver is not None and not approver.strip():
        raise StateRefused(
            "approver is required for the audit trail. Pass the name of the person who approved.",
            workflow_id=wf.id,
            state=wf.state.value,
        )
    gate = _waiting_gate(wf)
    if gate_step is not None and gate_step != gate.index:
        raise _not_this_gate(wf, gate, gate_step)
    digest, so_far, required = gate_records.admit(wf, gate, approver or "", now, expected_digest)
    unrun = [s for s in wf.steps[: gate.index] if s.status is S.NOT_EXECUTED]
    if unrun and not acknowledge_not_executed:
        labels = ", ".join(f"step {s.index} ({s.skill}.{s.tool})" for s in unrun)
        raise StepsNotExecuted(
            f"Refusing to approve: {labels} before this gate were handed out and Pilot has no record "
            "that they ran. Call approve again with acknowledge_not_executed=True only if you "
            "performed them and showed the user their results; otherwise cancel_workflow.",
            workflow_id=wf.id,
            state=wf.state.value,
            steps=[s.ref() for s in unrun],
        )
    if approver is not None:
        _refuse_unacknowledged_failure(wf, gate, acknowledge_failure)
    return Admitted(gate, digest, so_far, required)


def record(
    w: Workflow,
    *,
    gate_index: int,
    who: str,
    digest: str,
    required: int,
    channel: str,
    actor: Actor,
    to: Actor,
    dispatching: bool,
    now: datetime,
    release: bool = True,
    acknowledge_failure: str = "",
    policy_digest: str = "",
    comment: str = "",
) -> bool:
    """Record ``who``'s approval of gate ``gate_index`` in ``w`` at ``now`` (a change for the
    runner's save); True when it is the last approval the gate requires and the gate is released
    (``approve``). ``release`` False: refuse (``QuorumReached``, nothing recorded) to be the last.
    ``comment``: the approver's words (one line, at most ``COMMENT_MAX`` characters), recorded
    with the approval and in its audit event.

    Re-checked on the stored record: a concurrent approval may have landed since the load. The
    steps the gate releases go to ``to`` without dispatch (refused here when they cannot)."""
    step = _waiting_gate(w)
    if step.index != gate_index:
        raise _not_this_gate(w, step, gate_index)
    gate_records.admit(w, step, who, now, digest)
    if not release and approvals_missing(w, gate_index, required) <= 1:
        raise QuorumReached(
            f"The approval by {who} completes the quorum of the gate at step {gate_index} of "
            f"workflow '{w.id}'",
            hint="Record it where the run lease is held.",
            workflow_id=w.id,
            state=w.state.value,
        )
    _refuse_unacknowledged_failure(w, step, acknowledge_failure)
    prediction = gate_records.stored_prediction(w, gate_index)
    failing = prediction is not None and prediction.verdict == "fails"
    reason = acknowledge_failure.strip()[:2000] if failing else ""
    said = " ".join(comment.split())[:COMMENT_MAX]
    names = gate_records.record_approval(
        w,
        gate_index,
        who,
        channel,
        digest,
        now,
        verdict=verdict_key(prediction),
        acknowledged=reason,
        policy_digest=policy_digest,
        comment=said,
    )
    told = f"; prediction shown: {prediction.summary}" if prediction is not None else ""
    told = told if len(told) <= 600 else told[:599] + "…"
    told += f"; comment: {said}" if said else ""
    if reason:
        w.log(
            "approved_despite_predicted_failure",
            f"{who} approved step {gate_index} although Pilot predicted: "
            f"{prediction.summary if prediction else ''} Reason given: {reason}",
            actor.label,
            names=(who,),
            at=now,
        )
    if len(names) >= required and not dispatching:
        handout.refuse_walk(w, to, start=gate_index + 1)
    if len(names) < required:
        w.log(
            "approval_recorded",
            f"{who} approved step {gate_index} ({len(names)} of {required} distinct approvals; "
            f"plan {digest}{told})",
            actor.label,
            names=(who,),
            at=now,
        )
        return False
    everyone = ", ".join(names)
    quorum = f", {len(names)} of {required} approvals: {everyone}" if required > 1 else ""
    w.approved_by = everyone
    w.log(
        "approved",
        f"Approved by {who} (plan {digest}{quorum}{told})",
        actor.label,
        names=(who, *names),
        at=now,
    )
    acknowledged = [s.index for s in w.steps[:gate_index] if s.status is S.NOT_EXECUTED]
    for index in acknowledged:
        w.steps[index].status = S.REPORTED_DONE
        w.steps[index].result = {
            "reason": f"{who} stated this step was performed outside Pilot; Pilot has no result"
        }
    if acknowledged:
        w.log(
            "approved_over_unexecuted_steps",
            f"{who} acknowledged steps {acknowledged} as performed outside Pilot",
            actor.label,
            names=(who,),
            at=now,
        )
    gate_step = w.steps[gate_index]
    gate_step.status = S.SUCCESS
    gate_step.result = {"approved_by": everyone}
    if required > 1:
        gate_step.result["approvals"] = names
    if acknowledged:
        gate_step.result["acknowledged_not_executed"] = acknowledged
    gate_step.completed_at = now
    fire(w, Event.APPROVE)
    return True


def approvals_missing(wf: Workflow, gate_index: int, required: int) -> int:
    """How many more distinct approvers gate ``gate_index`` needs."""
    return required - len(gate_records.approver_names(gate_records.gate_record(wf, gate_index)))


def waiting_message(who: str, gate_index: int, missing: int) -> str:
    """What an approver is told when the gate still needs ``missing`` more approvals."""
    return (
        f"Approval by {who} recorded; the gate at step {gate_index} needs {missing} more distinct "
        "approver(s) before the run goes on."
    )
