"""diff_report: what a workflow changed so far, recomputed before every save."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.refs import is_ref, resolve_refs
from vmware_pilot.errors import StepReferenceError
from vmware_pilot.safety.classify import classify_step

__all__ = ["OBJECT_KEYS", "build_diff_report", "object_named"]

# Param keys that name the object a step acts on, most specific first.
OBJECT_KEYS = (
    "new_name",
    "vm_name",
    "name",
    "segment_id",
    "tier1_id",
    "policy_id",
    "rule_id",
    "group_id",
    "host_name",
    "entity_name",
    "cluster_name",
    "cluster_id",
    "namespace",
    "datastore_name",
    "resource_id",
    "plan_id",
    "vm_names",
)

S = StepStatus


def _resolved(value: Any, steps: Sequence[Step], index: int) -> Any:
    """A ``__from_step_N__`` value as the earlier step's result gives it, once that step ran."""
    if not steps or not is_ref(value):
        return value
    try:
        return resolve_refs(value, steps, index)
    except StepReferenceError:
        return value


def object_named(params: dict[str, Any], steps: Sequence[Step] = (), index: int = 0) -> str:
    """The object a step's params name (``""`` when none does).

    With ``steps`` (the workflow's) a reference is shown as the value it resolves to. An aiops
    plan names its objects inside ``operations``."""
    for key in OBJECT_KEYS:
        value = _resolved(params.get(key), steps, index)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return ", ".join(value)
    operations = params.get("operations")
    if isinstance(operations, list):
        names = [object_named(op) for op in operations if isinstance(op, dict)]
        return ", ".join(dict.fromkeys(n for n in names if n))
    return ""


def _entry(step: Step, steps: Sequence[Step]) -> dict[str, Any]:
    return {**step.ref(), "object": object_named(step.params, steps, step.index), "status": step.status.value}


def build_diff_report(wf: Workflow, catalog: Catalog) -> dict[str, Any]:
    """Executed non-read steps, rollbacks, hand-outs, reported-done, unknown and pending steps."""
    changed: list[dict[str, Any]] = []
    rolled_back: list[dict[str, Any]] = []
    handed_out: list[dict[str, Any]] = []
    reported_done: list[dict[str, Any]] = []
    unknown: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for step in wf.steps:
        if step.is_gate:
            if step.status is S.PENDING:
                pending.append(_entry(step, wf.steps))
            continue
        status = step.status
        if status is S.SUCCESS and classify_step(step, catalog)[0] != "read":
            changed.append(_entry(step, wf.steps))
        elif status in (S.ROLLED_BACK, S.PARTIALLY_ROLLED_BACK):
            rolled_back.append({**_entry(step, wf.steps), "rollback_tool": step.rollback_tool})
        elif status is S.NOT_EXECUTED:
            handed_out.append(_entry(step, wf.steps))
        elif status is S.REPORTED_DONE:
            reported_done.append(_entry(step, wf.steps))
        elif status in (S.RUNNING, S.INTERRUPTED):
            unknown.append(_entry(step, wf.steps))
        elif status is S.PENDING:
            pending.append(_entry(step, wf.steps))
    parts = [
        f"{len(changed)} change(s) applied by Pilot",
        f"{len(rolled_back)} rolled back",
        f"{len(handed_out)} handed to the caller",
        f"{len(reported_done)} reported done by the caller",
        f"{len(unknown)} with unknown effect",
        f"{len(pending)} pending",
    ]
    return {
        "summary": "; ".join(parts),
        "changed": changed,
        "rolled_back": rolled_back,
        "handed_out": handed_out,
        "reported_done": reported_done,
        "unknown_effects": unknown,
        "pending": pending,
    }
