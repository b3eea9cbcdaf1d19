"""Undoing and stopping: rollback dispatches each undo tool, last step first; cancel stops the rest.

A failed undo never stops the others; partial, unknown and failed undos are reported in
``rollback_results``. Cancel only stops future steps and undoes nothing.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Event, Outcome, StepStatus
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine import gates
from vmware_pilot.safety.blast import leaves_behind, undo_candidates
from vmware_pilot.safety.classify import is_catalog_read

if TYPE_CHECKING:
    from vmware_pilot.engine.runner import Runner

__all__ = ["cancel", "rollback"]

S = StepStatus


def _append_result(w: Workflow, entry: dict[str, Any]) -> None:
    w.rollback_results.append(entry)


async def rollback(
    runner: Runner, wf: Workflow, actor: Actor, include_unknown: bool = False
) -> dict[str, Any]:
    """Undo every step Pilot recorded as success, last first; a failed undo never stops the rest.

    ``include_unknown`` (the caller acknowledged unknown effects) also attempts the undo of
    steps whose effect is unknown.
    """

    def start(w: Workflow) -> None:
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

    wf, _ = await runner.save(wf, start)
    for index in [s.index for s in undo_candidates(wf, include_unknown=include_unknown)]:
        step = wf.steps[index]
        if not step.rollback_tool:
            if step.is_gate or (step.status is S.SUCCESS and is_catalog_read(step, runner.catalog)):
                continue
            entry = {
                "step": index,
                "tool": step.tool,
                "status": "not_reversible",
                "reason": "no rollback defined: the change stays applied; reverse it by hand",
            }
            wf, _ = await runner.save(wf, functools.partial(_append_result, entry=entry))
            continue
        outcome = await runner.call_step(wf, index, bound=index + 1, reverse=True)
        wf, _ = await runner.save(
            wf, functools.partial(_record_undo, index=index, outcome=outcome, actor=actor)
        )
    bad = [r for r in wf.rollback_results if r["status"] in ("failed", "unknown")]

    def finish(w: Workflow) -> None:
        fire(w, Event.FINISH_ROLLBACK)
        if bad:
            w.blocked_reason = "rollback_failed"
        w.log("rollback_completed", "", actor.label)

    wf, _ = await runner.save(wf, finish)
    out = runner.result(wf, actor)
    if bad:
        listed = "; ".join(f"step {r['step']} {r['tool']} {r['status']}" for r in bad)
        out["outcome"] = Outcome.FAILED.value
        out["error"] = (
            f"{len(bad)} undo(s) did not complete: {listed}. Check those in the target system; "
            "get_workflow_status shows each step."
        )
    return out


def _record_undo(w: Workflow, index: int, outcome: StepOutcome, actor: Actor) -> None:
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
        entry.update(status="unknown", error=outcome.message)
        w.log("rollback_unknown", f"Step {index}: {step.rollback_tool} → {outcome.message}", actor.label)
    else:
        entry.update(status="failed", error=outcome.message)
        w.log("rollback_failed", f"Step {index}: {step.rollback_tool} → {outcome.message}", actor.label)
    w.rollback_results.append(entry)


def cancel(runner: Runner, wf: Workflow, actor: Actor, reason: str, rejected_by: str = "") -> dict[str, Any]:
    """Move to the terminal 'cancelled' state; pending steps become skipped.

    ``rejected_by``: a person rejected the gate the workflow waits at (audited ``rejected``)."""
    why = reason.strip()

    def change(w: Workflow) -> None:
        if rejected_by:
            gate = gates.pending_gate(w)
            where = f"the gate at step {gate.index}" if gate is not None else "the workflow"
            w.log("rejected", f"{rejected_by} rejected {where}: {why}", actor.label, names=(rejected_by,))
        fire(w, Event.CANCEL)
        w.blocked_reason = why or "cancelled"
        w.log("cancelled", why or "no reason given", actor.label)
        for step in w.steps:
            if step.status is S.PENDING:
                step.status = S.SKIPPED

    wf, _ = runner.commit(wf, change)
    runner.vault.forget(wf.id)
    return runner.result(wf, actor, Outcome.CANCELLED)
