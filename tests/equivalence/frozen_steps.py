"""Building Step objects from dicts: the one door every step goes through (renames applied).

``check_plan`` holds the rules for a whole plan that every door applies before a plan is stored:
not empty, and every step reference resolvable in principle (``domain.refs``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from vmware_pilot.catalog.renames import rename_tool
from vmware_pilot.domain.enums import GATE_ACTION
from vmware_pilot.domain.gate_options import gate_option_problem
from vmware_pilot.domain.model import Step
from vmware_pilot.domain.refs import reference_problems
from vmware_pilot.errors import InvalidInput, StepValidationError

__all__ = [
    "IDENTIFIER_KEYS",
    "STEP_KEYS",
    "check_plan",
    "gate_step",
    "identifier_problem",
    "make_step",
    "step_from_dict",
    "steps_from_dicts",
]

STEP_KEYS = ("action", "skill", "tool", "params", "rollback_tool", "rollback_params", "group_id")
_STRING_KEYS = ("action", "skill", "tool", "rollback_tool", "group_id")
# Names a step is dispatched by, shown to approvers and grouped by: identifiers, so no name can
# carry a control character, an escape sequence or a look-alike of another name's layout.
IDENTIFIER_KEYS = ("skill", "tool", "rollback_tool", "group_id")
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
_GROUP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a group may be numbered: "1", "2"
_FIX = "Each step is {action, skill, tool, params, rollback_tool?, rollback_params?, group_id?}; "


def make_step(
    index: int,
    action: str,
    skill: str,
    tool: str,
    params: Mapping[str, Any] | None = None,
    rollback_tool: str = "",
    rollback_params: Mapping[str, Any] | None = None,
    group_id: str = "",
) -> Step:
    """A new pending step, tool names renamed to their current ones (docs/contract.md#tool-renames)."""
    return Step(
        index=index,
        action=action,
        skill=skill,
        tool=rename_tool(skill, tool),
        params=dict(params or {}),
        rollback_tool=rename_tool(skill, rollback_tool) if rollback_tool else "",
        rollback_params=dict(rollback_params or {}),
        group_id=group_id,
    )


def gate_step(index: int, message: str, **extra: Any) -> Step:
    """A require_approval gate (skill ``pilot``, tool ``approve``)."""
    return make_step(index, GATE_ACTION, "pilot", "approve", {"message": message, **extra})


def identifier_problem(value: str, key: str = "tool") -> str | None:
    """Why ``value`` cannot be the step's ``key``: a letter (or for ``group_id`` a digit too),
    then up to 63 letters, digits, ``_``, ``.`` or ``-``. None when it can."""
    group = key == "group_id"
    if (_GROUP_ID if group else _IDENTIFIER).fullmatch(value):
        return None
    shown = repr(value[:40]) + (f"… ({len(value)} characters)" if len(value) > 40 else "")
    first = "a letter or digit" if group else "a letter"
    return (
        f"{shown} is not a name: it must be {first} followed by at most 63 letters, digits, '_', '.' or '-'"
    )


def _check_identifiers(index: int, names: Mapping[str, str]) -> None:
    for key, value in names.items():
        problem = identifier_problem(value, key) if value else None
        if problem is not None:
            raise StepValidationError(
                f"Step {index}: '{key}' {problem}",
                step_index=index,
                field=key,
                hint=_FIX + "skill, tool, rollback_tool and group_id are plain names such as "
                "'aiops', 'power_on_vm' or 'gather-1'; get_skill_catalog lists the real ones.",
            )


def step_from_dict(raw: Any, index: int, *, template: bool = False) -> Step:
    """Validate one caller-supplied step dict; raise StepValidationError naming step and field.

    ``template``: a YAML template's unfilled step, whose gate options may still be ``{{name}}``."""
    if not isinstance(raw, Mapping):
        raise StepValidationError(
            f"Step {index} must be an object, got {type(raw).__name__}",
            step_index=index,
            field="",
            hint=_FIX + "check get_skill_catalog for skill and tool names.",
        )
    unknown = sorted(str(k) for k in raw if k not in STEP_KEYS)
    if unknown:
        raise StepValidationError(
            f"Step {index} has unknown key(s) {', '.join(repr(k) for k in unknown)}",
            step_index=index,
            field=unknown[0],
            hint=_FIX + f"allowed keys: {', '.join(STEP_KEYS)}.",
        )
    for key in _STRING_KEYS:
        if key in raw and raw[key] is not None and not isinstance(raw[key], str):
            raise StepValidationError(
                f"Step {index}: '{key}' must be a string, got {type(raw[key]).__name__}",
                step_index=index,
                field=key,
                hint=_FIX + "names are strings.",
            )
    action = str(raw.get("action") or f"step_{index}")
    is_gate = action == GATE_ACTION
    skill = str(raw.get("skill") or ("pilot" if is_gate else ""))
    tool = str(raw.get("tool") or ("approve" if is_gate else ""))
    for key, value in (("skill", skill), ("tool", tool)):
        if not value.strip():
            raise StepValidationError(
                f"Step {index} has no '{key}'",
                step_index=index,
                field=key,
                hint=_FIX + "get_skill_catalog lists the skills and their tools.",
            )
    for key in ("params", "rollback_params"):
        given = raw.get(key)
        if key in raw and not isinstance(given, Mapping):
            raise StepValidationError(
                f"Step {index}: '{key}' must be an object, got {'null' if given is None else type(given).__name__}",
                step_index=index,
                field=key,
                hint=_FIX + f"pass {key} as a JSON object ({{}} for none).",
            )
    problem = gate_option_problem(raw.get("params") or {}, placeholders=template) if is_gate else None
    if problem is not None:
        raise StepValidationError(
            f"Step {index} (approval gate): {problem[1]}",
            step_index=index,
            field=f"params.{problem[0]}",
            hint="Gate options: expires_in_minutes (approve is refused after that long) and "
            "approvals_required (that many distinct people approve); leave them out for one approval "
            "with no expiry.",
        )
    if is_gate and (raw.get("rollback_tool") or raw.get("rollback_params")):
        raise StepValidationError(
            f"Step {index} is an approval gate and cannot have a rollback",
            step_index=index,
            field="rollback_tool",
            hint="A gate only asks a person; drop rollback_tool and rollback_params from it and put "
            "the undo on the step that changes something.",
        )
    if raw.get("rollback_params") and not raw.get("rollback_tool"):
        raise StepValidationError(
            f"Step {index} has rollback_params but no rollback_tool",
            step_index=index,
            field="rollback_tool",
            hint="Name the undo tool in rollback_tool, or drop rollback_params.",
        )
    names = {
        "skill": skill.strip(),
        "tool": tool.strip(),
        "rollback_tool": str(raw.get("rollback_tool") or "").strip(),
        "group_id": str(raw.get("group_id") or ""),
    }
    _check_identifiers(index, names)
    return make_step(
        index,
        action,
        names["skill"],
        names["tool"],
        raw.get("params") or {},
        names["rollback_tool"],
        raw.get("rollback_params") or {},
        names["group_id"],
    )


def _unfilled(text: str) -> bool:
    return "{{" in text


def check_plan(steps: Sequence[Step], *, allow_empty: bool = False, template: bool = False) -> None:
    """Refuse an empty plan (unless ``allow_empty``: a draft) and a step reference that can never
    resolve, naming the step and the parameter. ``template``: references with ``{{`` wait for
    their values and are checked once filled."""
    if not steps and not allow_empty:
        raise InvalidInput(
            "The plan has no steps; a workflow needs at least one",
            field="steps",
            hint=_FIX + "give at least one step (get_skill_catalog lists the tools).",
        )
    problems = reference_problems(steps, skip=_unfilled if template else None)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise StepValidationError(
            first.message + more,
            step_index=first.step_index,
            field=first.field,
            hint="Write __from_step_N__ (the whole result) or __from_step_N__:key (one key of it), "
            "with N the index of an earlier step; in rollback_params the step's own index works too.",
        )


def steps_from_dicts(
    raw_steps: Sequence[Any], *, allow_empty: bool = False, template: bool = False
) -> list[Step]:
    """Validate every step dict, then the plan (``check_plan``), before returning any: nothing
    half-built on error."""
    steps = [step_from_dict(raw, i, template=template) for i, raw in enumerate(raw_steps)]
    check_plan(steps, allow_empty=allow_empty, template=template)
    return steps
