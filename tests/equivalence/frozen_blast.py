"""Blast radius: what a rollback or a cancel would do, and what it would leave.

See docs/contract.md#rollback-and-cancel.

Both previews are pure functions of the workflow. Lists are capped at ``CAP`` entries, each
with a ``<key>_count`` holding the true length. ``blockers`` (the state forbids the action) and
``unmeasured`` (steps whose effect nobody knows, or whose status is not recognised) must both
be empty before the action may proceed; ``acknowledge_unknown_effects`` clears only the
unknown-effect messages. Rollback params in previews are redacted (``safety.redaction``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.catalog.renames import skill_key
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.safety.classify import is_catalog_read
from vmware_pilot.safety.redaction import redact

__all__ = [
    "CANCEL_BLOCKED_STATES",
    "CAP",
    "CREATE_REMOVERS",
    "HANDED_OUT_NOTE",
    "KNOWN_STATUSES",
    "LEFT_IN_PLACE_NOTE",
    "NOT_REVERSIBLE_OUTSIDE_PILOT_NOTE",
    "ROLLBACK_BLOCKED_STATES",
    "cancel_blast_radius",
    "leaves_behind",
    "rollback_blast_radius",
    "undo_candidates",
]

CAP: Final = 16
KNOWN_STATUSES: Final = frozenset(s.value for s in StepStatus)
_UNKNOWN_EFFECT = frozenset({StepStatus.RUNNING.value, StepStatus.INTERRUPTED.value})
_OUTSIDE = frozenset({StepStatus.NOT_EXECUTED.value, StepStatus.REPORTED_DONE.value})

ROLLBACK_BLOCKED_STATES: Final[Mapping[str, str]] = {
    WorkflowState.DRAFT: "a draft has run nothing, so there is nothing to undo",
    WorkflowState.COMPLETED: "a completed workflow is final; plan a new workflow to change it back",
    WorkflowState.ROLLING_BACK: (
        "a rollback was under way when its process stopped; check every step with get_workflow_status "
        "before anything else"
    ),
    WorkflowState.CANCELLED: "a cancelled workflow is final",
}
CANCEL_BLOCKED_STATES: Final = frozenset(
    {WorkflowState.COMPLETED, WorkflowState.FAILED, WorkflowState.CANCELLED}
)

# Steps that create an object → the undo tools that remove it again. An undo not in the set
# succeeds but leaves the object behind (partially_rolled_back). Empty set: no undo is full.
CREATE_REMOVERS: Final[Mapping[tuple[str, str], frozenset[str]]] = {
    ("aiops", "deploy_linked_clone"): frozenset({"delete_vm"}),
    ("aiops", "clone_vm"): frozenset({"delete_vm"}),
    ("aiops", "deploy_vm_from_template"): frozenset({"delete_vm"}),
    ("aiops", "deploy_vm_from_ova"): frozenset({"delete_vm"}),
    ("aiops", "create_vm"): frozenset({"delete_vm"}),
    ("aiops", "batch_clone_vms"): frozenset(),
    ("aiops", "batch_linked_clone_vms"): frozenset(),
}

LEFT_IN_PLACE_NOTE: Final = (
    "Pilot cannot reverse these: they have no rollback_tool, so their change stays applied. "
    "Reverse them by hand if needed."
)
NOT_REVERSIBLE_OUTSIDE_PILOT_NOTE: Final = (
    "These were handed to the caller and have no rollback tool, so nothing undoes them: a clone "
    "stays in the inventory, a production resize stays applied. Check each one in the target "
    "system and reverse it by hand."
)
HANDED_OUT_NOTE: Final = (
    "These steps were handed to the caller, who may already have performed them; cancelling "
    "neither stops nor undoes them."
)


def _what(step: Step) -> str:
    for key in ("new_name", "vm_name"):
        value = step.params.get(key)
        if isinstance(value, str) and value:
            return value
    return "the object it created"


def leaves_behind(step: Step) -> str:
    """Why undoing ``step`` with its rollback tool leaves the created object in place, or ``""``."""
    removers = CREATE_REMOVERS.get((skill_key(step.skill), step.tool))
    if removers is None or not step.rollback_tool or step.rollback_tool in removers:
        return ""
    what = _what(step)
    return (
        f"{step.tool} created '{what}'; its rollback {step.rollback_tool} does not remove it, so "
        f"'{what}' (and any disk it owns) stays in the inventory. Delete it by hand once it is no "
        "longer needed."
    )


def _capped(out: dict[str, Any], key: str, items: Sequence[Any]) -> None:
    out[f"{key}_count"] = len(items)
    out[key] = list(items[:CAP])


def _undo_entry(step: Step) -> dict[str, Any]:
    entry: dict[str, Any] = {
        **step.ref(),
        "rollback_tool": step.rollback_tool,
        "rollback_params": redact(step.rollback_params),
    }
    note = leaves_behind(step)
    if note:
        entry["leaves_behind"] = note
    return entry


def _status(step: Step) -> str:
    return str(getattr(step.status, "value", step.status))


def _head(wf: Workflow, state_after: str, acknowledged: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workflow": {"id": wf.id, "type": wf.workflow_type, "state": str(wf.state.value)},
        "state_after": state_after,
    }
    _capped(out, "unknown_effects", [s.ref() for s in wf.steps if _status(s) in _UNKNOWN_EFFECT])
    out["unknown_effects_acknowledged"] = acknowledged
    return out


def _unmeasured(wf: Workflow, acknowledged: bool) -> list[str]:
    unknown_undo = {
        r.get("step") for r in wf.rollback_results if isinstance(r, Mapping) and r.get("status") == "unknown"
    }
    out: list[str] = []
    for step in wf.steps:
        status = _status(step)
        if status not in KNOWN_STATUSES:
            out.append(
                f"step {step.index} ({step.skill}.{step.tool}) has status '{status}', which Pilot does "
                "not recognise, so its effect cannot be measured"
            )
        elif status in _UNKNOWN_EFFECT and not acknowledged:
            which = (
                f"its rollback tool {step.rollback_tool}"
                if step.index in unknown_undo and step.rollback_tool
                else f"the tool {step.tool}"
            )
            out.append(
                f"step {step.index} ({step.skill}.{step.tool}) is '{status}': whether {which} took effect "
                "is unknown. Check the target system, then call again with "
                "acknowledge_unknown_effects=True"
            )
    return out


def _refs(steps: Sequence[Step], keep: Callable[[Step], bool]) -> list[dict[str, Any]]:
    return [s.ref() for s in steps if keep(s)]


def undo_candidates(wf: Workflow, *, include_unknown: bool) -> list[Step]:
    """Steps a rollback visits, last first: Pilot's successes and, once the caller acknowledged
    unknown effects, the steps whose effect is unknown (their undo is attempted best-effort)."""
    wanted = {StepStatus.SUCCESS.value} | (_UNKNOWN_EFFECT if include_unknown else set())
    return [s for s in reversed(wf.steps) if _status(s) in wanted]


def rollback_blast_radius(
    wf: Workflow, catalog: Catalog, *, acknowledge_unknown_effects: bool
) -> dict[str, Any]:
    """What ``rollback(confirm=True)`` would undo and leave behind.

    Keys in the order of docs/contract.md#rollback-preview.
    """
    out = _head(wf, WorkflowState.FAILED.value, acknowledge_unknown_effects)
    done = [
        s
        for s in wf.steps
        if _status(s) == StepStatus.SUCCESS.value
        and not s.is_gate
        and not (is_catalog_read(s, catalog) and not s.rollback_tool)
    ]
    undo = [s for s in undo_candidates(wf, include_unknown=acknowledge_unknown_effects) if s.rollback_tool]
    _capped(
        out,
        "would_roll_back",
        [
            {**_undo_entry(s), "effect_unknown": True} if _status(s) in _UNKNOWN_EFFECT else _undo_entry(s)
            for s in undo
        ],
    )
    left = [s.ref() for s in done if not s.rollback_tool]
    _capped(out, "left_in_place", left)
    out["left_in_place_note"] = LEFT_IN_PLACE_NOTE if left else ""
    outside = [s for s in wf.steps if _status(s) in _OUTSIDE and not s.is_gate]
    _capped(out, "not_reversed_by_pilot", [_undo_entry(s) for s in reversed(outside) if s.rollback_tool])
    irreversible = _refs(outside, lambda s: not s.rollback_tool and not is_catalog_read(s, catalog))
    _capped(out, "not_reversible_outside_pilot", irreversible)
    _capped(
        out,
        "left_behind_by_earlier_rollback",
        [
            {**s.ref(), "leaves_behind": leaves_behind(s)}
            for s in wf.steps
            if _status(s) == StepStatus.PARTIALLY_ROLLED_BACK.value
        ],
    )
    out["not_reversible_outside_pilot_note"] = NOT_REVERSIBLE_OUTSIDE_PILOT_NOTE if irreversible else ""
    reason = ROLLBACK_BLOCKED_STATES.get(wf.state)
    out["blockers"] = [f"the workflow is '{wf.state.value}': {reason}"] if reason else []
    out["unmeasured"] = _unmeasured(wf, acknowledge_unknown_effects)
    return out


def cancel_blast_radius(
    wf: Workflow, catalog: Catalog, *, acknowledge_unknown_effects: bool
) -> dict[str, Any]:
    """What ``cancel_workflow(confirm=True)`` would stop and leave in place.

    Keys in the order of docs/contract.md#cancel-preview.
    """
    out = _head(wf, WorkflowState.CANCELLED.value, acknowledge_unknown_effects)
    _capped(
        out,
        "left_in_place",
        _refs(
            wf.steps,
            lambda s: (
                _status(s) == StepStatus.SUCCESS.value and not s.is_gate and not is_catalog_read(s, catalog)
            ),
        ),
    )
    _capped(
        out,
        "performed_outside_pilot",
        _refs(wf.steps, lambda s: _status(s) == StepStatus.REPORTED_DONE.value),
    )
    _capped(out, "would_skip", _refs(wf.steps, lambda s: _status(s) == StepStatus.PENDING.value))
    handed = _refs(wf.steps, lambda s: _status(s) == StepStatus.NOT_EXECUTED.value)
    _capped(out, "handed_out_to_caller", handed)
    out["handed_out_to_caller_note"] = HANDED_OUT_NOTE if handed else ""
    out["blockers"] = (
        [f"the workflow is '{wf.state.value}', a final state: there is nothing left to cancel"]
        if wf.state in CANCEL_BLOCKED_STATES
        else []
    )
    out["unmeasured"] = _unmeasured(wf, acknowledge_unknown_effects)
    return out
