"""How a workflow ended, for the banner at the top of its console page.

Completed, failed (which step, its whole error, what the steps before it already changed), rolled
back (what was undone, what was not) and cancelled (by whom, why). Built from the stored workflow
with secrets masked; reads only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.safety.classify import Tier, classify_step
from vmware_pilot.safety.redaction import redact, redact_identity, redact_text

__all__ = ["Ending", "ending"]

S = StepStatus


@dataclass(frozen=True)
class Ending:
    kind: str  # completed | failed | rolled_back | rollback_incomplete | cancelled
    title: str
    lines: list[str] = field(default_factory=list)
    error: str = ""  # the failing step's whole error
    changed: list[str] = field(default_factory=list)  # what was already changed, one line each


def _label(step: Step) -> str:
    return f"step {step.index} ({step.skill}.{step.tool})"


def _error_of(step: Step) -> str:
    result: Any = redact(step.result)
    if isinstance(result, Mapping):
        for key in ("error", "message", "detail"):
            if result.get(key):
                return str(result[key])
    return str(result) if result is not None else ""


def _changed(wf: Workflow, catalog: Catalog) -> list[str]:
    """The steps that ran and change things (not reads), in order."""
    done = (S.SUCCESS, S.REPORTED_DONE)
    return [
        _label(s) + ("" if s.status is S.SUCCESS else ", reported done by the agent")
        for s in wf.steps
        if not s.is_gate and s.status in done and classify_step(s, catalog)[0] is not Tier.READ
    ]


def _cancel_note(wf: Workflow) -> str:
    """Who ended the workflow and why: a rejection at its gate, else the cancel."""
    for action, verb in (("rejected", "Rejected"), ("cancelled", "Cancelled")):
        entry = next((e for e in reversed(wf.audit_log) if e.action == action), None)
        if entry is not None:
            # The event's detail names who and why ("… rejected the gate at step 0: REASON").
            return redact_identity(entry.detail) if entry.detail else f"{verb} by {entry.actor or 'someone'}."
    return ""


def _undo_line(entry: Mapping[str, Any]) -> str:
    why = entry.get("error") or entry.get("left_behind") or entry.get("reason") or ""
    said = f"Step {entry.get('step')} ({entry.get('tool', '')}): undo {entry.get('status')}"
    return said + (f": {redact_text(str(why))}" if why else ".")


def ending(wf: Workflow, catalog: Catalog) -> Ending | None:
    """The banner of a workflow that ended (None while it has not)."""
    changed = _changed(wf, catalog)
    if wf.state is WorkflowState.COMPLETED:
        ran = [s for s in wf.steps if not s.is_gate and s.status is S.SUCCESS]
        lines = [f"All {len(ran)} step(s) ran."]
        lines.append("A completed workflow is final: it cannot be rolled back.")
        return Ending("completed", "Completed", lines, changed=changed)
    if wf.state is WorkflowState.FAILED and wf.rollback_results:
        undone = [r for r in wf.rollback_results if r.get("status") == "success"]
        bad = [r for r in wf.rollback_results if r.get("status") in ("failed", "unknown", "partial")]
        kept = [r for r in wf.rollback_results if r.get("status") == "not_reversible"]
        lines = [f"Undid {len(undone)} step(s)."]
        lines += [_undo_line(r) for r in bad]
        if kept:
            lines.append(
                "Left as they are (no undo): " + ", ".join(f"step {r.get('step')}" for r in kept) + "."
            )
        if bad:
            return Ending("rollback_incomplete", "Rollback incomplete", lines, changed=changed)
        return Ending("rolled_back", "Rolled back", lines, changed=changed)
    if wf.state is WorkflowState.FAILED:
        failing = next((s for s in wf.steps if s.status is S.FAILED), None)
        error = _error_of(failing) if failing is not None else ""
        error = error or wf.blocked_reason or "Pilot recorded no error text."
        title = f"Failed at {_label(failing)}" if failing is not None else "Failed"
        lines = [] if changed else ["Nothing was changed before the failure."]
        return Ending("failed", title, lines, error=redact_text(error), changed=changed)
    if wf.state is WorkflowState.CANCELLED:
        note = _cancel_note(wf)
        return Ending("cancelled", "Cancelled", [note] if note else [], changed=changed)
    return None
