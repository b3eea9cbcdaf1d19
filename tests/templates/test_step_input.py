"""``templates.steps.StepInput``, the one step model every door uses, refuses and builds exactly
as the hand-written ``step_from_dict`` of 2.4.x did (``frozen_steps``): the same Step, or the
same StepValidationError (message, ``field``, ``hint``, ``step_index``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.equivalence import EXAMPLES, frozen_steps
from vmware_pilot.domain.enums import GATE_ACTION
from vmware_pilot.errors import PilotError, StepValidationError
from vmware_pilot.templates.builtin import BUILTINS
from vmware_pilot.templates.builtin.base import StepList
from vmware_pilot.templates.steps import STEP_KEYS, StepInput, make_step, step_from_dict, steps_from_dicts
from vmware_pilot.templates.toolfacts import ToolFacts


def _outcome(build: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        built = build(*args, **kwargs)
    except PilotError as exc:
        return ("refused", type(exc).__name__, json.dumps(exc.payload()))
    steps = built if isinstance(built, list) else [built]
    return ("built", [(s.to_dict(), s.group_id) for s in steps])


def test_the_model_takes_exactly_the_step_keys() -> None:
    assert tuple(StepInput.model_fields) == STEP_KEYS


_NAMES = st.sampled_from(
    ["aiops", "power_on_vm", " aiops ", "", "  ", "1abc", "gather-1", "1", "a b", "x" * 65, "é", "{{skill}}"]
)
_GOOD_NAMES = st.sampled_from(["aiops", "monitor", "power_on_vm", "get_alarms", "delete_vm", "g1"])
_BAD_NAMES = st.one_of(_NAMES, st.none(), st.sampled_from([0, 1, True, [], {}]))
# mostly good names, so that the later checks are reached too
_NAME_VALUES = st.integers(0, 9).flatmap(lambda n: _BAD_NAMES if n < 2 else _GOOD_NAMES)
_GATE_PARAMS = st.dictionaries(
    st.sampled_from(["expires_in_minutes", "approvals_required", "message"]),
    st.sampled_from([0, 1, 30, -1, "x", "{{minutes}}", None, True, 2.5, 10_000_000]),
    max_size=3,
)
_OBJECTS = st.one_of(
    st.dictionaries(st.sampled_from(["vm_name", "x"]), st.sampled_from(["a", "", None, 1]), max_size=2),
    _GATE_PARAMS,
)
_PARAMS = st.integers(0, 9).flatmap(lambda n: st.sampled_from([None, [], "text", 3]) if n < 2 else _OBJECTS)


@st.composite
def raw_steps(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 15)) == 0:
        return draw(st.sampled_from([None, [], "step", 3, ["skill", "tool"]]))
    raw: dict[Any, Any] = {}
    keys = draw(st.lists(st.sampled_from(STEP_KEYS), unique=True, max_size=7))
    if draw(st.integers(0, 3)):  # most steps name a skill and a tool
        keys = list(dict.fromkeys(["skill", "tool", *keys]))
    for key in keys:
        if key == "action":
            raw[key] = draw(
                st.one_of(st.sampled_from([GATE_ACTION, GATE_ACTION, "stop", "", None]), _NAME_VALUES)
            )
        elif key in ("params", "rollback_params"):
            raw[key] = draw(_PARAMS)
        else:
            raw[key] = draw(_NAME_VALUES)
    if draw(st.integers(0, 4)) == 0:
        for extra in draw(st.lists(st.sampled_from(["zeta", "alpha", "Skill", 1]), unique=True, max_size=2)):
            raw[extra] = "x"
    return raw


@EXAMPLES
@given(raw_steps(), st.integers(0, 3), st.booleans())
# one of each refusal, in case the random steps miss it
@example({"action": GATE_ACTION, "rollback_params": {"vm_name": "a"}}, 1, False)
@example({"action": GATE_ACTION, "params": {"expires_in_minutes": "{{m}}"}}, 1, True)
@example({"action": GATE_ACTION, "params": {"expires_in_minutes": "{{m}}"}}, 1, False)
@example({"skill": "a", "tool": "b", "rollback_params": {"x": 1}}, 2, False)
@example({"skill": "a", "tool": "b", "rollback_tool": " c ", "rollback_params": {}}, 2, False)
@example({"skill": None, "tool": 3, "params": [], "zz": 1, 0: 1}, 0, False)
@example({"skill": " ", "tool": "t", "params": []}, 0, False)
@example({"skill": "s", "tool": "t", "group_id": "1"}, 0, False)
@example({"skill": "s", "tool": "t", "group_id": "-1"}, 0, False)
def test_one_step_is_built_or_refused_as_before(raw: Any, index: int, template: bool) -> None:
    assert _outcome(step_from_dict, raw, index, template=template) == _outcome(
        frozen_steps.step_from_dict, raw, index, template=template
    )


@EXAMPLES
@given(st.lists(raw_steps(), max_size=4), st.booleans(), st.booleans())
def test_a_plan_is_built_or_refused_as_before(raws: list[Any], allow_empty: bool, template: bool) -> None:
    assert _outcome(steps_from_dicts, raws, allow_empty=allow_empty, template=template) == _outcome(
        frozen_steps.steps_from_dicts, raws, allow_empty=allow_empty, template=template
    )


# --- built-ins go through the same model ---------------------------------------------------------
def test_a_builtin_cannot_build_a_step_no_door_would_take() -> None:
    steps = StepList()
    with pytest.raises(StepValidationError) as caught:
        steps.add("stop", "aiops", "power off vm", {"vm_name": "a"})
    assert caught.value.payload()["field_name"] == "tool"
    with pytest.raises(StepValidationError, match="rollback_params but no rollback_tool"):
        steps.add("stop", "aiops", "power_off_vm", {"vm_name": "a"}, rollback_params={"vm_name": "a"})
    assert steps.steps == []


@pytest.mark.parametrize("builtin", BUILTINS, ids=lambda b: b.name)
def test_builtin_steps_are_what_they_were_built_from(builtin: Any) -> None:
    """Validation changes nothing in a built-in's steps (the same as ``make_step`` of them)."""
    facts = ToolFacts(lambda skill, tool: None)
    for params in builtin.examples:
        for s in builtin.plan(dict(params), facts).steps:
            same = make_step(
                s.index, s.action, s.skill, s.tool, s.params, s.rollback_tool, s.rollback_params, s.group_id
            )
            assert (s.to_dict(), s.group_id) == (same.to_dict(), same.group_id)
