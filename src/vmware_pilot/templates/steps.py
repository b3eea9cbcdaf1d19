"""Building Step objects from dicts: the one door every step goes through (renames applied).

``StepInput`` is the one step model: ``create_workflow``, ``update_draft``, custom YAML
templates and the built-ins all validate a step through it (``step_from_dict``). Only a stored
workflow's steps are rebuilt without it (``make_step`` in ``store/codec.py``): a record stored
earlier may hold what the doors now refuse, and the review reports it.

``check_plan`` holds the rules for a whole plan that every door applies before a plan is stored:
not empty, and every step reference resolvable in principle (``domain.refs``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError, ValidationInfo, model_validator

from vmware_pilot.catalog.renames import rename_tool
from vmware_pilot.domain.enums import GATE_ACTION
from vmware_pilot.domain.gate_options import gate_option_problem
from vmware_pilot.domain.model import Step
from vmware_pilot.domain.refs import reference_problems
from vmware_pilot.errors import InvalidInput, StepValidationError

__all__ = [
    "IDENTIFIER_KEYS",
    "STEP_KEYS",
    "StepInput",
    "check_plan",
    "gate_step",
    "identifier_problem",
    "make_step",
    "step_from_dict",
    "steps_from_dicts",
]

STEP_KEYS = ("action", "skill", "tool", "params", "rollback_tool", "rollback_params", "group_id")
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


def _names_of(model: StepInput, index: int) -> tuple[str, dict[str, str]]:
    """The step's action and names with 2.4.0's defaults: an unnamed step is ``step_<index>``, a
    gate's skill and tool are ``pilot`` and ``approve``; names are stripped (not ``group_id``)."""
    action = model.action or f"step_{index}"
    is_gate = action == GATE_ACTION
    return action, {
        "skill": str(model.skill or ("pilot" if is_gate else "")).strip(),
        "tool": str(model.tool or ("approve" if is_gate else "")).strip(),
        "rollback_tool": str(model.rollback_tool or "").strip(),
        "group_id": str(model.group_id or ""),
    }


class StepInput(BaseModel):
    """One step as every door takes it: ``create_workflow``, ``update_draft``, custom YAML
    templates and the built-ins (``StepList``) all build steps through this model.

    Pydantic checks the shape (an object, no key but these, names are strings or null); the rules
    across fields (skill and tool given, params are objects, gate options usable, a gate has no
    rollback, rollback_params need a rollback_tool, names are identifiers) run after it, in that
    order. ``StepInput.of`` turns every failure into the StepValidationError of 2.4.0, naming the
    step, the field and the fix. Validation context: ``index`` (the step's position) and
    ``template`` (a YAML template's unfilled step, whose gate options may still be ``{{name}}``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: StrictStr | None = None
    skill: StrictStr | None = None
    tool: StrictStr | None = None
    # Objects, checked after skill and tool so a step missing both hears about the name first.
    params: Any = None
    rollback_tool: StrictStr | None = None
    rollback_params: Any = None
    group_id: StrictStr | None = None

    @classmethod
    def of(cls, raw: Any, index: int, *, template: bool = False) -> StepInput:
        """Validate one caller-supplied step; raise StepValidationError naming step and field."""
        try:
            return cls.model_validate(raw, context={"index": index, "template": template})
        except ValidationError as exc:
            raise _refusal(exc, raw, index) from None

    @model_validator(mode="after")
    def _across_fields(self, info: ValidationInfo) -> StepInput:
        context = info.context or {}
        index = int(context.get("index", 0))
        action, names = _names_of(self, index)
        is_gate = action == GATE_ACTION
        for key in ("skill", "tool"):
            if not names[key]:
                raise StepValidationError(
                    f"Step {index} has no '{key}'",
                    step_index=index,
                    field=key,
                    hint=_FIX + "get_skill_catalog lists the skills and their tools.",
                )
        for key in ("params", "rollback_params"):
            given = getattr(self, key)
            if key in self.model_fields_set and not isinstance(given, Mapping):
                raise StepValidationError(
                    f"Step {index}: '{key}' must be an object, got {'null' if given is None else type(given).__name__}",
                    step_index=index,
                    field=key,
                    hint=_FIX + f"pass {key} as a JSON object ({{}} for none).",
                )
        problem = (
            gate_option_problem(self.params or {}, placeholders=bool(context.get("template")))
            if is_gate
            else None
        )
        if problem is not None:
            raise StepValidationError(
                f"Step {index} (approval gate): {problem[1]}",
                step_index=index,
                field=f"params.{problem[0]}",
                hint="Gate options: expires_in_minutes (approve is refused after that long) and "
                "approvals_required (that many distinct people approve); leave them out for one approval "
                "with no expiry.",
            )
        if is_gate and (self.rollback_tool or self.rollback_params):
            raise StepValidationError(
                f"Step {index} is an approval gate and cannot have a rollback",
                step_index=index,
                field="rollback_tool",
                hint="A gate only asks a person; drop rollback_tool and rollback_params from it and put "
                "the undo on the step that changes something.",
            )
        if self.rollback_params and not self.rollback_tool:
            raise StepValidationError(
                f"Step {index} has rollback_params but no rollback_tool",
                step_index=index,
                field="rollback_tool",
                hint="Name the undo tool in rollback_tool, or drop rollback_params.",
            )
        _check_identifiers(index, names)
        return self

    def to_step(self, index: int) -> Step:
        """The pending ``Step`` at ``index`` (tool names renamed, ``make_step``)."""
        action, names = _names_of(self, index)
        return make_step(
            index,
            action,
            names["skill"],
            names["tool"],
            self.params or {},
            names["rollback_tool"],
            self.rollback_params or {},
            names["group_id"],
        )


def _refusal(exc: ValidationError, raw: Any, index: int) -> StepValidationError:
    """The StepValidationError for a shape error of ``StepInput``, as 2.4.0 worded it: not an
    object, then unknown keys (all of them, sorted), then the first name that is not a string."""
    errors = exc.errors(include_url=False)
    if any(e["type"] == "model_type" for e in errors):
        return StepValidationError(
            f"Step {index} must be an object, got {type(raw).__name__}",
            step_index=index,
            field="",
            hint=_FIX + "check get_skill_catalog for skill and tool names.",
        )
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] in ("extra_forbidden", "invalid_key"))
    if unknown:
        return StepValidationError(
            f"Step {index} has unknown key(s) {', '.join(repr(k) for k in unknown)}",
            step_index=index,
            field=unknown[0],
            hint=_FIX + f"allowed keys: {', '.join(STEP_KEYS)}.",
        )
    first = errors[0]
    key = str(first["loc"][0]) if first["loc"] else ""
    return StepValidationError(
        f"Step {index}: '{key}' must be a string, got {type(first['input']).__name__}",
        step_index=index,
        field=key,
        hint=_FIX + "names are strings.",
    )


def step_from_dict(raw: Any, index: int, *, template: bool = False) -> Step:
    """Validate one caller-supplied step dict (``StepInput``); raise StepValidationError naming
    step and field.

    ``template``: a YAML template's unfilled step, whose gate options may still be ``{{name}}``."""
    return StepInput.of(raw, index, template=template).to_step(index)


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
