"""``templates.steps.StepInput``, the one step model every door uses, refuses and builds every
step and plan of tests/data/rules/step-input.yaml as the hand-written ``step_from_dict`` of 2.4.x
did: the same Step, or the same StepValidationError (message, ``field``, ``hint``, ``step_index``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.tables import mismatches, rows
from vmware_pilot.errors import PilotError, StepValidationError
from vmware_pilot.templates.builtin import BUILTINS
from vmware_pilot.templates.builtin.base import StepList
from vmware_pilot.templates.steps import STEP_KEYS, StepInput, make_step, step_from_dict, steps_from_dicts
from vmware_pilot.templates.toolfacts import ToolFacts


def outcome(build: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """What a door makes of caller-supplied steps: the steps built, or the refusal (type and payload)."""
    try:
        built = build(*args, **kwargs)
    except PilotError as exc:
        return {"refused": type(exc).__name__, "payload": exc.payload()}
    steps = built if isinstance(built, list) else [built]
    return {"built": [{"step": s.to_dict(), "group_id": s.group_id} for s in steps]}


def test_the_model_takes_exactly_the_step_keys() -> None:
    assert tuple(StepInput.model_fields) == STEP_KEYS


# --- the table: steps and plans, and what the hand-written code of 2.4.x made of them --------------
def test_one_step_is_built_or_refused_as_the_table_says() -> None:
    def made(row: dict[str, Any]) -> dict[str, Any]:
        return outcome(step_from_dict, row["raw"], row["index"], template=row["template"])

    assert not mismatches(rows("step-input.yaml", "step"), made, lambda row: row["outcome"])


def test_a_plan_is_built_or_refused_as_the_table_says() -> None:
    def made(row: dict[str, Any]) -> dict[str, Any]:
        return outcome(
            steps_from_dicts, row["raws"], allow_empty=row["allow_empty"], template=row["template"]
        )

    assert not mismatches(rows("step-input.yaml", "plan"), made, lambda row: row["outcome"])


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
