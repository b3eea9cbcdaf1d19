"""Undoing and stopping: rollback dispatches each undo tool, last step first; cancel stops the rest.

A failed undo never stops the others; partial, unknown and failed undos are reported in
``rollback_results``. Cancel only stops future steps and undoes nothing.

This module decides and records; ``Closer.rollback`` and ``Closer.cancel``
(engine/execution/closing.py) carry it out (the undo calls and the saves), so nothing here calls
back into the runner.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Event, StepStatus
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.execution.settling import SETTLED_KEY
from vmware_pilot.safety.blast import leaves_behind, undo_candidates
from vmware_pilot.safety.classify import is_catalog_read

__all__ = [
    "CALL",
    "SKIP",
    "UndoStep",
    "append_result",
    "cancel",
    "finish_rollback",
    "incomplete",
    "record_undo",
    "rollback_error",
    "start_rollback",
    "to_undo",
    "undo_of",
]

S = StepStatus
CALL: Final = "call"
SKIP: Final = "skip"
UndoStep = Literal["call", "skip"] | dict[str, Any]


def append_result(w: Workflow, entry: dict[str, Any]) -> None:
    """Add one entry to ``rollback_results`` (a change for the runner's save)."""
    w.rollback_results.append(entry)


def start_rollback(w: Workflow, actor: Actor) -> None:
    """``rollback`` begins: ``rolling_back``, fresh ``rollback_results`` (steps an earlier rollback
    left partially undone are listed, not run again)."""
    fire(w, Event.START_ROLLBACK)
    w.log("rollback_started", "", actor.label)
    w.rollback_results = []
    for step in w.steps:
        if step.status is S.PARTIALLY_ROLLED_BACK:
            w.rollback_results.append(
                {
                    "step": step.index,
                    "tool": step.rollback_tool,
                    "status": "partial",
                    "reason": "rolled back by an earlier rollback call; not run again",
                    "left_behind": leaves_behind(step),
                }
            )


def to_undo(wf: Workflow, include_unknown: bool = False) -> list[int]:
    """The steps a rollback goes through, last first: every step Pilot recorded as success, and
    with ``include_unknown`` (the caller acknowledged unknown effects) those whose effect is unknown."""
    return [s.index for s in undo_candidates(wf, include_unknown=include_unknown)]


def undo_of(step: Step, catalog: Catalog) -> UndoStep:
    """What rollback does for ``step``: dispatch its undo tool (``CALL``), pass over it (``SKIP``:
    a gate, or a read that succeeded), or an entry saying the change stays (no undo defined)."""
    if step.rollback_tool:
        return CALL
    if step.is_gate or (step.status is S.SUCCESS and is_catalog_read(step, catalog)):
        return SKIP
    return {
        "step": step.index,
        "tool": step.tool,
        "status": "not_reversible",
        "reason": "no rollback defined: the change stays applied; reverse it by hand",
    }


def record_undo(w: Workflow, index: int, outcome: StepOutcome, actor: Actor) -> None:
    """Record the outcome of step ``index``'s undo tool in the step and in ``rollback_results``."""
    step = w.steps[index]
    entry: dict[str, Any] = {"step": index, "tool": step.rollback_tool}
    if outcome.ok:
        left = leaves_behind(step)
        step.status = S.PARTIALLY_ROLLED_BACK if left else S.ROLLED_BACK
        entry.update(status="partial" if left else "success", result=outcome.payload)
        if left:
            entry["left_behind"] = left
        w.log("rollback_step", f"Step {index}: {step.rollback_tool} → {entry['status']}", actor.label)
    elif outcome.kind is OutcomeKind.EFFECT_UNKNOWN:
        step.status = S.INTERRUPTED
        if isinstance(step.result, dict):  # settled for the step itself, not for its undo
            step.result.pop(SETTLED_KEY, None)
        entry.update(status="unknown", error=outcome.message)
        w.log("rollback_unknown", f"Step {index}: {step.rollback_tool} → {outcome.message}", actor.label)
    else:
        entry.update(status="failed", error=outcome.message)
        w.log("rollback_failed", f"Step {index}: {step.rollback_tool} → {outcome.message}", actor.label)
    w.rollback_results.append(entry)


def incomplete(wf: Workflow) -> list[dict[str, Any]]:
    """The undos that did not complete (failed, or effect unknown)."""
    return [r for r in wf.rollback_results if r["status"] in ("failed", "unknown")]


def finish_rollback(w: Workflow, actor: Actor) -> None:
    """``rollback`` ends: ``failed``, blocked as ``rollback_failed`` when an undo did not complete."""
    fire(w, Event.FINISH_ROLLBACK)
    if incomplete(w):
        w.blocked_reason = "rollback_failed"
    w.log("rollback_completed", "", actor.label)


def rollback_error(bad: list[dict[str, Any]]) -> str:
    """The ``error`` of a rollback with undos that did not complete."""
    listed = "; ".join(f"step {r['step']} {r['tool']} {r['status']}" for r in bad)
    return (
        f"{len(bad)} undo(s) did not complete: {listed}. Check those in the target system; "
        "get_workflow_status shows each step."
    )


def cancel(w: Workflow, actor: Actor, reason: str, rejected_by: str = "") -> None:
    """Move to the terminal 'cancelled' state; pending steps become skipped (a change for the
    runner's save).

    ``rejected_by``: a person rejected the gate the workflow waits at (audited ``rejected``)."""
    why = reason.strip()
    if rejected_by:
        gate = gate_records.pending_gate(w)
        where = f"the gate at step {gate.index}" if gate is not None else "the workflow"
        w.log("rejected", f"{rejected_by} rejected {where}: {why}", actor.label, names=(rejected_by,))
    fire(w, Event.CANCEL)
    w.blocked_reason = why or "cancelled"
    w.log("cancelled", why or "no reason given", actor.label)
    for step in w.steps:
        if step.status is S.PENDING:
            step.status = S.SKIPPED
