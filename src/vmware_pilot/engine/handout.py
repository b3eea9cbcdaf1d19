"""Hand-back bookkeeping: which caller a step was handed to, and what each caller may be handed.

Without a dispatcher a run records each executable step ``not_executed`` and hands it to its
caller in ``pending_dispatch``. That caller is remembered per step (``Workflow.handed_to``), so:

- the same caller running again is handed the same steps again (the 2.4.0 re-listing);
- any other caller is refused before anything changes, and told who holds them;
- a result shown to another caller (a cancel, a recorded approval) lists them under
  ``with_another_caller`` instead of ``pending_dispatch``.

A step whose params hold a literal secret (a secret-named key with a value instead of a
``{"$env": …}`` reference) is handed only to the caller who created the workflow: the secret was
that caller's to give. Anyone else who would be handed it is refused and told to use a reference.
"""

from __future__ import annotations

from typing import Any

from vmware_pilot.domain.actor import Actor, identity_key
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine.secrets import SecretVault, find_masked_secrets
from vmware_pilot.errors import SecretUnavailable, StateRefused
from vmware_pilot.safety.redaction import redact

__all__ = [
    "agent_label",
    "holder",
    "is_creator",
    "pending_dispatch",
    "record",
    "refuse_if_held_elsewhere",
    "refuse_literal_secrets",
    "refuse_walk",
    "walk_segment",
]

S = StepStatus


def _same_caller(label: str, actor: Actor) -> bool:
    # An OAuth caller's label carries a display name that may change between its tokens.
    return identity_key(label) == identity_key(actor.label)


def is_creator(wf: Workflow, actor: Actor) -> bool:
    return bool(wf.created_by) and _same_caller(wf.created_by, actor)


def holder(wf: Workflow, step: Step) -> str:
    """The caller ``step`` was handed to; ``""`` when unknown (a record from before this
    bookkeeping), which any caller may be handed again."""
    return wf.handed_to.get(step.index, "")


def agent_label(wf: Workflow) -> str:
    """The caller that runs ``wf`` without dispatch: the one its latest hand-out went to, else its
    creator; ``""`` when neither is known."""
    latest = [(index, label) for index, label in wf.handed_to.items() if label]
    return max(latest)[1] if latest else wf.created_by or ""


def _held_by_another(wf: Workflow, step: Step, actor: Actor) -> bool:
    who = holder(wf, step)
    return step.status is S.NOT_EXECUTED and bool(who) and not _same_caller(who, actor)


def record(wf: Workflow, indices: list[int], actor: Actor) -> None:
    """Remember that the steps at ``indices`` were handed to ``actor`` (refusing another's)."""
    refuse_if_held_elsewhere(wf, [wf.steps[i] for i in indices], actor)
    for index in indices:
        wf.handed_to[index] = actor.label


def walk_segment(wf: Workflow, start: int = 0) -> list[Step]:
    """The executable steps a run walking from ``start`` reaches before the next gate."""
    reached: list[Step] = []
    for step in wf.steps[start:]:
        if step.status not in (S.PENDING, S.NOT_EXECUTED):
            continue
        if step.is_gate:
            break
        reached.append(step)
    return reached


def refuse_walk(wf: Workflow, actor: Actor, start: int = 0) -> None:
    """Refuse, before anything changes, a walk from ``start`` without dispatch that would hand
    ``actor`` steps already with another caller, or a literal secret not theirs."""
    reached = walk_segment(wf, start)
    refuse_if_held_elsewhere(wf, reached, actor)
    refuse_literal_secrets(wf, reached, actor)


def _labels(steps: list[Step]) -> str:
    return ", ".join(f"step {s.index} ({s.skill}.{s.tool})" for s in steps)


def refuse_if_held_elsewhere(wf: Workflow, steps: list[Step], actor: Actor) -> None:
    """Refuse when any of ``steps`` was already handed out to a caller other than ``actor``."""
    elsewhere = [s for s in steps if _held_by_another(wf, s, actor)]
    if not elsewhere:
        return
    who = holder(wf, elsewhere[0])
    raise StateRefused(
        f"Refusing to hand out {_labels(elsewhere)} of workflow '{wf.id}' again: they are with another "
        f"caller ({who}), who was handed them to perform",
        hint="Leave them to that caller; get_workflow_status shows the workflow's progress. If they "
        "will not be performed, cancel_workflow (after checking the target system) and create a new "
        "workflow.",
        workflow_id=wf.id,
        state=wf.state.value,
        handed_to=who,
        with_another_caller=[s.ref() for s in elsewhere],
    )


def _literal_secrets(step: Step) -> list[str]:
    return [f"params.{path}" for path in find_masked_secrets(redact(step.params))]


def refuse_literal_secrets(wf: Workflow, steps: list[Step], actor: Actor) -> None:
    """Refuse to hand ``steps`` to anyone but the creator when one holds a literal secret."""
    if is_creator(wf, actor):
        return
    found = [(s, _literal_secrets(s)) for s in steps]
    found = [(s, paths) for s, paths in found if paths]
    if not found:
        return
    listed = "; ".join(f"step {s.index} ({s.skill}.{s.tool}): {', '.join(p)}" for s, p in found)
    raise SecretUnavailable(
        f"Refusing to hand out steps of workflow '{wf.id}' to {actor.label}: they hold literal secrets "
        f"({listed}), which are handed out only to the caller who created the workflow "
        f"({wf.created_by or 'unknown'}). Nothing was changed",
        hint='Pass secrets as references, e.g. {"password": {"$env": "VC_PASSWORD"}}, which each caller '
        "resolves in its own environment: cancel_workflow this one and create it again that way, or "
        "let its creator run it.",
        workflow_id=wf.id,
        state=wf.state.value,
        creator_only=[{**s.ref(), "params": paths} for s, paths in found],
    )


def _entry(vault: SecretVault, wf: Workflow, step: Step, actor: Actor) -> dict[str, Any]:
    # Only the creator gets literal secrets back from memory; anyone else sees them masked.
    params = vault.restore(wf.id, step.index, "params", step.params) if is_creator(wf, actor) else step.params
    entry: dict[str, Any] = {"index": step.index, "skill": step.skill, "tool": step.tool, "params": params}
    if step.group_id:
        entry["group_id"] = step.group_id
    if step.rollback_tool:
        entry["rollback_tool"] = step.rollback_tool
    return entry


def pending_dispatch(
    vault: SecretVault, wf: Workflow, actor: Actor
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``not_executed`` steps handed to ``actor`` (as handed out), and refs of the others."""
    mine: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for step in wf.steps:
        if step.status is not S.NOT_EXECUTED:
            continue
        if _held_by_another(wf, step, actor):
            others.append({**step.ref(), "handed_to": holder(wf, step)})
        else:
            mine.append(_entry(vault, wf, step, actor))
    return mine, others
