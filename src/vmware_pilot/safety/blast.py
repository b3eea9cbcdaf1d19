"""Blast radius: what a rollback or a cancel would do, and what it would leave.

See docs/contract.md#rollback-and-cancel.

Both previews are pure functions of the workflow. Lists are capped at ``CAP`` entries, each
with a ``<key>_count`` holding the true length. ``blockers`` (the state forbids the action) and
``unmeasured`` (steps whose effect nobody knows, or whose status is not recognised) must both
be empty before the action may proceed; ``acknowledge_unknown_effects`` clears only the
unknown-effect messages. An interrupted step Pilot settled by reading (``result.settled``,
``engine.execution.settling``) is no longer unknown: ``applied`` counts as done (undone by a
rollback, left in place by a cancel), ``not_applied`` as never run (nothing to undo). Rollback params in previews are redacted (``safety.redaction``).

Each preview is a list of small named rules (``ROLLBACK_RULES``, ``CANCEL_RULES``), each giving
one part of the answer; ``preview`` puts the parts together in list order, which is the key
order of the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.catalog.renames import skill_key
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.safety.classify import is_catalog_read
from vmware_pilot.safety.redaction import redact
from vmware_pilot.safety.rules import Rule, rule

__all__ = [
    "CANCEL_BLOCKED_STATES",
    "CANCEL_RULES",
    "CAP",
    "CREATE_REMOVERS",
    "HANDED_OUT_NOTE",
    "KNOWN_STATUSES",
    "LEFT_IN_PLACE_NOTE",
    "NOT_REVERSIBLE_OUTSIDE_PILOT_NOTE",
    "ROLLBACK_BLOCKED_STATES",
    "ROLLBACK_RULES",
    "BlastInput",
    "cancel_blast_radius",
    "leaves_behind",
    "rollback_blast_radius",
    "settled_effect",
    "undo_candidates",
]

CAP: Final = 16
KNOWN_STATUSES: Final = frozenset(s.value for s in StepStatus)
_UNKNOWN_EFFECT = frozenset({StepStatus.RUNNING.value, StepStatus.INTERRUPTED.value})
_SETTLED = frozenset({"applied", "not_applied"})
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


def _capped(key: str, items: Sequence[Any]) -> dict[str, Any]:
    return {f"{key}_count": len(items), key: list(items[:CAP])}


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


def settled_effect(step: Step) -> str:
    """An interrupted step's settlement (``applied``, ``not_applied``, ``unknown``), or ``""``."""
    if _status(step) != StepStatus.INTERRUPTED.value or not isinstance(step.result, Mapping):
        return ""
    found = step.result.get("settled")
    return str(found.get("effect") or "") if isinstance(found, Mapping) else ""


def _effect_unknown(step: Step) -> bool:
    """Running, or interrupted and not settled as applied or not applied."""
    return _status(step) in _UNKNOWN_EFFECT and settled_effect(step) not in _SETTLED


def _done(step: Step) -> bool:
    """A success, or an interrupted step settled as applied."""
    return _status(step) == StepStatus.SUCCESS.value or settled_effect(step) == "applied"


def _settle_reason(step: Step) -> str:
    found = step.result.get("settled") if isinstance(step.result, Mapping) else None
    reason = found.get("reason") if isinstance(found, Mapping) else None
    return f" (Pilot read the target system: {reason})" if reason else ""


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
        elif _effect_unknown(step) and not acknowledged:
            which = (
                f"its rollback tool {step.rollback_tool}"
                if step.index in unknown_undo and step.rollback_tool
                else f"the tool {step.tool}"
            )
            out.append(
                f"step {step.index} ({step.skill}.{step.tool}) is '{status}': whether {which} took effect "
                f"is unknown{_settle_reason(step)}. Check the target system, then call again with "
                "acknowledge_unknown_effects=True"
            )
    return out


def undo_candidates(wf: Workflow, *, include_unknown: bool) -> list[Step]:
    """Steps a rollback visits, last first: Pilot's successes, interrupted steps settled as
    applied and, once the caller acknowledged unknown effects, the steps whose effect is unknown
    (their undo is attempted best-effort). A step settled as not applied needs no undo."""
    return [s for s in reversed(wf.steps) if _done(s) or (include_unknown and _effect_unknown(s))]


@dataclass(frozen=True)
class BlastInput:
    """What a preview rule looks at: the workflow, the catalog and whether the caller
    acknowledged unknown effects; the step lists two rules share are computed once."""

    wf: Workflow
    catalog: Catalog
    acknowledged: bool

    def steps_where(self, keep: Callable[[Step], bool]) -> list[Step]:
        return [s for s in self.wf.steps if keep(s)]

    @cached_property
    def left_in_place(self) -> list[Step]:
        """Pilot's successes (and applied interrupted steps) with no rollback tool (gates and
        catalog reads excepted)."""
        return self.steps_where(
            lambda s: (
                _done(s) and not s.is_gate and not s.rollback_tool and not is_catalog_read(s, self.catalog)
            )
        )

    @cached_property
    def outside(self) -> list[Step]:
        """Steps handed to the caller (not executed) or reported done by them, gates excepted."""
        return self.steps_where(lambda s: _status(s) in _OUTSIDE and not s.is_gate)

    @cached_property
    def irreversible(self) -> list[Step]:
        """Steps outside Pilot with no rollback tool that are not catalog reads."""
        return [s for s in self.outside if not s.rollback_tool and not is_catalog_read(s, self.catalog)]


Fragment = dict[str, Any]
PreviewRule = Rule[BlastInput, Fragment]


def _refs(steps: Sequence[Step]) -> list[dict[str, Any]]:
    return [s.ref() for s in steps]


def preview(rules: Sequence[PreviewRule], p: BlastInput) -> dict[str, Any]:
    """The preview: each rule's keys, rule by rule in list order."""
    out: dict[str, Any] = {}
    for r in rules:
        out.update(r(p))
    return out


# --- shared by both previews --------------------------------------------------------------------
@rule("workflow")
def _workflow(p: BlastInput) -> Fragment:
    """The workflow's id, type and state."""
    return {"workflow": {"id": p.wf.id, "type": p.wf.workflow_type, "state": str(p.wf.state.value)}}


@rule("unknown_effects")
def _unknown_effects(p: BlastInput) -> Fragment:
    """Steps running, or interrupted and not settled by reading: whether they took effect is
    unknown (with the caller's acknowledgement of that)."""
    unknown = p.steps_where(_effect_unknown)
    return {**_capped("unknown_effects", _refs(unknown)), "unknown_effects_acknowledged": p.acknowledged}


@rule("unmeasured")
def _unmeasured_rule(p: BlastInput) -> Fragment:
    """Steps whose status Pilot does not recognise, and unacknowledged unknown effects; the
    action may proceed only when this is empty."""
    return {"unmeasured": _unmeasured(p.wf, p.acknowledged)}


# --- rollback -------------------------------------------------------------------------------------
@rule("state_after_rollback")
def _state_after_rollback(p: BlastInput) -> Fragment:
    """A rollback ends in 'failed'."""
    return {"state_after": WorkflowState.FAILED.value}


@rule("would_roll_back")
def _would_roll_back(p: BlastInput) -> Fragment:
    """The undo calls, last step first: successes with a rollback tool, interrupted steps settled
    as applied (marked ``settled: applied``) and, once acknowledged, steps of unknown effect
    (marked ``effect_unknown``), rollback params redacted."""
    undo = [s for s in undo_candidates(p.wf, include_unknown=p.acknowledged) if s.rollback_tool]
    return _capped(
        "would_roll_back",
        [
            {**_undo_entry(s), "effect_unknown": True}
            if _effect_unknown(s)
            else {**_undo_entry(s), "settled": "applied"}
            if settled_effect(s) == "applied"
            else _undo_entry(s)
            for s in undo
        ],
    )


@rule("left_in_place")
def _rollback_left_in_place(p: BlastInput) -> Fragment:
    """Pilot's successes that no rollback tool undoes (catalog reads and gates excepted), with a
    note to reverse them by hand."""
    left = _refs(p.left_in_place)
    return {**_capped("left_in_place", left), "left_in_place_note": LEFT_IN_PLACE_NOTE if left else ""}


@rule("not_reversed_by_pilot")
def _not_reversed_by_pilot(p: BlastInput) -> Fragment:
    """Steps outside Pilot (handed out, reported done) that have a rollback tool Pilot will not call."""
    return _capped("not_reversed_by_pilot", [_undo_entry(s) for s in reversed(p.outside) if s.rollback_tool])


@rule("not_reversible_outside_pilot")
def _not_reversible_outside_pilot(p: BlastInput) -> Fragment:
    """Steps outside Pilot with no rollback tool that are not catalog reads: nothing undoes them."""
    return _capped("not_reversible_outside_pilot", _refs(p.irreversible))


@rule("left_behind_by_earlier_rollback")
def _left_behind_by_earlier_rollback(p: BlastInput) -> Fragment:
    """Steps an earlier rollback undid only partly, with what each left behind."""
    return _capped(
        "left_behind_by_earlier_rollback",
        [
            {**s.ref(), "leaves_behind": leaves_behind(s)}
            for s in p.wf.steps
            if _status(s) == StepStatus.PARTIALLY_ROLLED_BACK.value
        ],
    )


@rule("not_reversible_outside_pilot_note")
def _not_reversible_outside_pilot_note(p: BlastInput) -> Fragment:
    """The note that goes with a non-empty ``not_reversible_outside_pilot``."""
    return {"not_reversible_outside_pilot_note": NOT_REVERSIBLE_OUTSIDE_PILOT_NOTE if p.irreversible else ""}


@rule("rollback_blocked")
def _rollback_blocked(p: BlastInput) -> Fragment:
    """A state in which rollback is refused (draft, completed, rolling back, cancelled)."""
    reason = ROLLBACK_BLOCKED_STATES.get(p.wf.state)
    return {"blockers": [f"the workflow is '{p.wf.state.value}': {reason}"] if reason else []}


# --- cancel ---------------------------------------------------------------------------------------
@rule("state_after_cancel")
def _state_after_cancel(p: BlastInput) -> Fragment:
    """A cancel ends in 'cancelled'."""
    return {"state_after": WorkflowState.CANCELLED.value}


@rule("left_in_place_by_cancel")
def _cancel_left_in_place(p: BlastInput) -> Fragment:
    """Pilot's successes and applied interrupted steps (gates and catalog reads excepted): a
    cancel leaves their change applied."""
    return _capped(
        "left_in_place",
        _refs(p.steps_where(lambda s: _done(s) and not s.is_gate and not is_catalog_read(s, p.catalog))),
    )


@rule("performed_outside_pilot")
def _performed_outside_pilot(p: BlastInput) -> Fragment:
    """Steps the caller reported done."""
    return _capped(
        "performed_outside_pilot",
        _refs(p.steps_where(lambda s: _status(s) == StepStatus.REPORTED_DONE.value)),
    )


@rule("would_skip")
def _would_skip(p: BlastInput) -> Fragment:
    """Pending steps, which a cancel never runs."""
    return _capped("would_skip", _refs(p.steps_where(lambda s: _status(s) == StepStatus.PENDING.value)))


@rule("handed_out_to_caller")
def _handed_out_to_caller(p: BlastInput) -> Fragment:
    """Steps handed to the caller, which a cancel neither stops nor undoes (with a note)."""
    handed = _refs(p.steps_where(lambda s: _status(s) == StepStatus.NOT_EXECUTED.value))
    return {
        **_capped("handed_out_to_caller", handed),
        "handed_out_to_caller_note": HANDED_OUT_NOTE if handed else "",
    }


@rule("cancel_blocked")
def _cancel_blocked(p: BlastInput) -> Fragment:
    """A final state (completed, failed, cancelled): nothing is left to cancel."""
    return {
        "blockers": (
            [f"the workflow is '{p.wf.state.value}', a final state: there is nothing left to cancel"]
            if p.wf.state in CANCEL_BLOCKED_STATES
            else []
        )
    }


# The previews' rules in the order of their keys (docs/contract.md#rollback-preview and
# #cancel-preview): the order is the contract's key order.
ROLLBACK_RULES: Final[tuple[PreviewRule, ...]] = (
    _workflow,
    _state_after_rollback,
    _unknown_effects,
    _would_roll_back,
    _rollback_left_in_place,
    _not_reversed_by_pilot,
    _not_reversible_outside_pilot,
    _left_behind_by_earlier_rollback,
    _not_reversible_outside_pilot_note,
    _rollback_blocked,
    _unmeasured_rule,
)
CANCEL_RULES: Final[tuple[PreviewRule, ...]] = (
    _workflow,
    _state_after_cancel,
    _unknown_effects,
    _cancel_left_in_place,
    _performed_outside_pilot,
    _would_skip,
    _handed_out_to_caller,
    _cancel_blocked,
    _unmeasured_rule,
)


def rollback_blast_radius(
    wf: Workflow, catalog: Catalog, *, acknowledge_unknown_effects: bool
) -> dict[str, Any]:
    """What ``rollback(confirm=True)`` would undo and leave behind (``ROLLBACK_RULES``).

    Keys in the order of docs/contract.md#rollback-preview.
    """
    return preview(ROLLBACK_RULES, BlastInput(wf, catalog, acknowledge_unknown_effects))


def cancel_blast_radius(
    wf: Workflow, catalog: Catalog, *, acknowledge_unknown_effects: bool
) -> dict[str, Any]:
    """What ``cancel_workflow(confirm=True)`` would stop and leave in place (``CANCEL_RULES``).

    Keys in the order of docs/contract.md#cancel-preview.
    """
    return preview(CANCEL_RULES, BlastInput(wf, catalog, acknowledge_unknown_effects))
