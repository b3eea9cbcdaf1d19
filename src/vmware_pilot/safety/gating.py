"""The approval-gate rule for custom workflows (docs/contract.md#the-approval-gate-rule).

A custom workflow may not run, be saved, confirmed or planned while a step that could change
the estate has no ``require_approval`` gate before it: every destructive or unclassifiable step,
and every step whose params claim a human already approved (``confirm``/``confirmed`` truthy,
or ``dry_run`` given and falsy). Built-in templates are vetted and not subject to the rule.
``rollback_params`` are never inspected: an undo only runs after an explicit rollback call.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import GATE_ACTION
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.errors import ApprovalGateRefused
from vmware_pilot.safety.review import ungated_steps

__all__ = [
    "acts",
    "enforce",
    "fix_for",
    "gate_step_dict",
    "gate_violations",
    "is_custom_workflow",
    "refusal",
    "truthy",
]

_FALSE_WORDS = frozenset({"", "0", "false", "no", "off", "none", "null"})
_KIND = {"destructive": "ungated_destructive", "unknown": "ungated_unclassified"}


def truthy(value: object) -> bool:
    """Truthiness as a caller means it: strings like ``"false"``, ``"off"``, ``"0"`` are false."""
    if isinstance(value, str):
        return value.strip().lower() not in _FALSE_WORDS
    return bool(value)


def acts(params: object) -> bool:
    """True when params tell the tool to act without its own preview.

    See docs/contract.md#what-counts-as-acting.
    """
    if not isinstance(params, Mapping):
        return False
    if truthy(params.get("confirm")) or truthy(params.get("confirmed")):
        return True
    return "dry_run" in params and params["dry_run"] is not None and not truthy(params["dry_run"])


def is_custom_workflow(wf: Workflow, builtin_names: Collection[str]) -> bool:
    """Custom unless it is a built-in type with no ``custom`` marker and no ``_source`` (YAML)."""
    return wf.workflow_type not in builtin_names or bool(wf.params.get("custom")) or "_source" in wf.params


def _first_gate(steps: Sequence[Step]) -> int:
    return next((s.index for s in steps if s.is_gate), len(steps) + 1)


def gate_violations(wf: Workflow, catalog: Catalog) -> list[dict[str, Any]]:
    """``[{step_index, skill, tool, kind, reason}]`` sorted by step index (empty: the plan passes)."""
    out: list[dict[str, Any]] = [
        {
            "step_index": step.index,
            "skill": step.skill,
            "tool": step.tool,
            "kind": _KIND[tier.value],
            "reason": reason,
        }
        for step, tier, reason in ungated_steps(wf, catalog)
    ]
    flagged = {v["step_index"] for v in out}
    first_gate = _first_gate(wf.steps)
    for step in wf.steps:
        if step.is_gate or step.index in flagged or step.index >= first_gate:
            continue
        if acts(step.params):
            out.append(
                {
                    "step_index": step.index,
                    "skill": step.skill,
                    "tool": step.tool,
                    "kind": "confirm_without_approval",
                    "reason": "it passes confirm=True (telling the tool a human already approved) "
                    "with no require_approval step before it",
                }
            )
    out.sort(key=lambda v: int(v["step_index"]))
    return out


def gate_step_dict(skill: str, tool: str) -> dict[str, Any]:
    """The gate step that fixes a violation at (skill, tool)."""
    return {
        "action": GATE_ACTION,
        "skill": "pilot",
        "tool": "approve",
        "params": {"message": f"About to run {skill}.{tool}. Has a human reviewed the plan? Proceed?"},
    }


def fix_for(violations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"insert_before_step": i, "step": <gate dict>}`` for the first violation (must exist)."""
    if not violations:
        raise ValueError("fix_for needs at least one violation")
    first = violations[0]
    return {
        "insert_before_step": first["step_index"],
        "step": gate_step_dict(str(first["skill"]), str(first["tool"])),
    }


def _display(source: str) -> str:
    """A file path as ``~/…`` when it lies under the home folder."""
    if not source or source.startswith("~"):
        return source
    try:
        return "~/" + Path(source).relative_to(Path.home()).as_posix()
    except (ValueError, RuntimeError):
        return source


def _yaml_snippet(gate: Mapping[str, Any]) -> str:
    message = json.dumps(gate["params"]["message"], ensure_ascii=False)
    return (
        f"  - action: {gate['action']}\n"
        f"    skill: {gate['skill']}\n"
        f"    tool: {gate['tool']}\n"
        "    params:\n"
        f"      message: {message}"
    )


def refusal(
    wf: Workflow,
    violations: Sequence[Mapping[str, Any]],
    *,
    verb: str,
    retry: str = "",
    extra: str = "",
    source: str = "",
) -> ApprovalGateRefused:
    """The refusal for ``violations`` (non-empty); its payload is ``{error, approval_gate_violations, fix}``."""
    fix = fix_for(violations)
    where = _display(source)
    labels = "; ".join(
        f"step {v['step_index']} ({v['skill']}.{v['tool']}: {v['reason']})" for v in violations
    )
    n = fix["insert_before_step"]
    parts = [
        f"Refusing to {verb} custom workflow '{wf.workflow_type}'"
        + (f" (defined in {where})" if where else "")
        + f": {len(violations)} step(s) could change the estate and have no require_approval gate "
        f"before them — {labels}.",
        "A custom workflow needs a require_approval step ahead of every destructive or "
        "unclassifiable step and every step that passes confirm=True.",
    ]
    if where:
        parts.append(
            f"Edit {where} and insert this step before step {n} (one gate there covers every later "
            f"step):\n{_yaml_snippet(fix['step'])}\n"
        )
    else:
        parts.append(
            f"Insert {json.dumps(fix['step'], ensure_ascii=False)} before step {n} — one gate there "
            "covers every later step."
        )
    if retry:
        parts.append(f"Then {retry}.")
    if extra:
        parts.append(extra)
    return ApprovalGateRefused(
        " ".join(parts),
        approval_gate_violations=[dict(v) for v in violations],
        fix=fix,
    )


def enforce(
    wf: Workflow,
    catalog: Catalog,
    *,
    verb: str,
    retry: str = "",
    extra: str = "",
    source: str = "",
) -> None:
    """Raise ApprovalGateRefused when ``wf`` breaks the rule (the caller decides it is custom)."""
    violations = gate_violations(wf, catalog)
    if violations:
        raise refusal(wf, violations, verb=verb, retry=retry, extra=extra, source=source)
