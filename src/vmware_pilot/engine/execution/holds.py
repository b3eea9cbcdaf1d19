"""Holds: checks made right before Pilot sends a write step, any of which stops the run at a gate.

With a dispatcher, before the runner marks a write step running it asks each ``PreWriteCheck``
in order (``first_hold``); the first that answers a ``Hold`` keeps the step from being called.
The run then stops at the gate that released the step (the last approval gate before it): that
gate is opened again (``reopen``: status ``pending``, the approvals given before kept under
``earlier`` in its record and no longer counting, the hold under ``hold``), audited with the
hold's ``event``, and the walk stops there as at any gate: the runner inspects it again (the
targets' state and the prediction, from the steps still to run) and reaches it
(``conductor.reach_gate``: ``awaiting_approval``, a fresh expiry, the webhook outbox told with
the hold's event). No step is inserted or renumbered, so ``__from_step_N__`` references, approve
(``gate_step`` is the gate's index), reject, cancel, rollback and ``get_workflow_status`` work as
for any gate; approving it runs the held step (checked again first), rejecting cancels the rest.
A write with no gate before it (a custom plan's ungated low-risk write) has no gate to wait at:
it is recorded ``failed`` with the hold's message, never called, and the run fails.

A check never raises to the runner: one that raises is itself a hold (``CHECK_FAILED``), as
Pilot cannot say the write is safe to send. Everything here but ``first_hold`` is pure.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.records import GateHold, GateRecord
from vmware_pilot.errors import StateRefused

if TYPE_CHECKING:
    from vmware_pilot.catalog.registry import Catalog
    from vmware_pilot.engine.inspection import Inspector

__all__ = [
    "CHECK_FAILED",
    "Hold",
    "PreWriteCheck",
    "WriteContext",
    "first_hold",
    "hold_of",
    "releasing_gate",
    "reopen",
]

_log = logging.getLogger(__name__)
S = StepStatus

CHECK_FAILED: Final = "check_failed"
_MESSAGE_MAX: Final = 2000


@dataclass(frozen=True)
class Hold:
    """Why a write step must not be sent now. ``kind`` names the check (``drift``, …); ``event``
    is the audit action and the webhook event (``drift_detected``); ``message`` what the gate
    says (the object, the field, what the approver saw and what it is now); ``details`` JSON
    data kept on the gate record; ``resumes_at`` when the hold would lift by itself (None: a
    person decides)."""

    kind: str
    event: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)
    resumes_at: datetime | None = None


@dataclass(frozen=True)
class WriteContext:
    """What a check is given: the runner (store, dispatcher, catalog, calls, saves), the workflow
    as loaded, the write step about to be sent and who runs it."""

    runner: Inspector
    wf: Workflow
    index: int
    actor: Actor

    @property
    def step(self) -> Step:
        return self.wf.steps[self.index]


@dataclass(frozen=True)
class PreWriteCheck:
    """One check before a write. ``run`` answers a ``Hold`` or None (send it). ``handed_out``:
    without a dispatcher Pilot checks nothing, and this sentence (or "") tells the agent the
    check is its own, beside a handed-out write step."""

    kind: str
    run: Callable[[WriteContext], Awaitable[Hold | None]]
    handed_out: Callable[[Workflow, int, Catalog], str] | None = None


async def first_hold(checks: Sequence[PreWriteCheck], ctx: WriteContext) -> Hold | None:
    """The first check's hold, in order, or None. A check that raises holds the step."""
    for check in checks:
        try:
            hold = await check.run(ctx)
        except Exception as exc:  # a check's own bug must not let the write through unchecked
            _log.exception("the %s check of step %s of %s raised", check.kind, ctx.index, ctx.wf.id)
            hold = Hold(
                kind=CHECK_FAILED,
                event="pre_write_check_failed",
                message=f"Pilot could not make its {check.kind} check before step {ctx.index} "
                f"({ctx.step.skill}.{ctx.step.tool}): {type(exc).__name__}: {exc}",
                details={"check": check.kind},
            )
        if hold is not None:
            return hold
    return None


def releasing_gate(wf: Workflow, index: int) -> Step | None:
    """The approval gate that released step ``index``: the last gate before it (None: none)."""
    return next((s for s in reversed(wf.steps[:index]) if s.is_gate), None)


def hold_of(record: GateRecord | None) -> GateHold | None:
    """The hold a gate record carries (None: the gate was reached in the plan's own order)."""
    return record.hold if record else None


def reopen(w: Workflow, index: int, hold: Hold, actor: str, now: datetime) -> int | None:
    """Hold write step ``index`` (a change for the runner's save): open the gate that released it
    again and record the hold, audited as ``hold.event``; the gate's index. Without such a gate:
    the step is recorded failed, never called, and None is returned (the run fails)."""
    step = w.steps[index]
    if w.state is not WorkflowState.RUNNING or step.status is not S.PENDING:
        raise StateRefused(  # re-checked on the stored record, as conductor.mark_running does
            f"Workflow '{w.id}' was changed by another caller while this run went on (step {index} is "
            f"{step.status.value}, the workflow {w.state.value}); this run stopped",
            hint=f"get_workflow_status('{w.id}') shows where it stands.",
            workflow_id=w.id,
            state=w.state.value,
        )
    message = hold.message if len(hold.message) <= _MESSAGE_MAX else hold.message[: _MESSAGE_MAX - 1] + "…"
    gate = releasing_gate(w, index)
    if gate is None:
        step.status = S.FAILED
        step.completed_at = now
        step.result = {
            "error": f"Not sent: {message} (no approval gate before it to wait at)",
            "held": hold.kind,
        }
        w.log(hold.event, f"Step {index}: {step.tool} not sent: {message}", actor, at=now)
        return None
    before = w.gates.get(gate.index)
    earlier = list(before.earlier) if before is not None else []
    if before is not None:  # kept without its own earlier records, which move up beside it
        earlier.append(before.without_earlier())
    w.gates[gate.index] = GateRecord(
        index=gate.index,
        hold=GateHold(
            kind=hold.kind,
            event=hold.event,
            step=index,
            message=message,
            details=dict(hold.details),
            at=now,
            resumes_at=hold.resumes_at,
        ),
        earlier=earlier,
    )
    gate.status = S.PENDING
    gate.result = None
    gate.completed_at = None
    w.log(
        hold.event,
        f"Step {index} ({step.skill}.{step.tool}) held at the gate at step {gate.index}: {message}",
        actor,
        at=now,
    )
    return gate.index
