"""The one door for caller-supplied step dicts: defaults, renames, and refusals naming step and field."""

from __future__ import annotations

from typing import Any

import pytest

from vmware_pilot.errors import StepValidationError
from vmware_pilot.templates.steps import step_from_dict, steps_from_dicts


def test_defaults_and_a_gate_with_only_an_action() -> None:
    step = step_from_dict({"skill": " aiops ", "tool": "vm_power_on", "params": {"vm_name": "a"}}, 4)
    assert (step.index, step.action, step.skill, step.tool, step.params) == (
        4,
        "step_4",
        "aiops",
        "power_on_vm",
        {"vm_name": "a"},
    )
    gate = step_from_dict({"action": "require_approval", "params": {"message": "Go?"}}, 0)
    assert (gate.is_gate, gate.skill, gate.tool) == (True, "pilot", "approve")


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ("power_on_vm", "", "must be an object"),
        ({"skill": "aiops", "tool": "t", "tol": "x"}, "tol", "unknown key"),
        ({"skill": "aiops", "tool": 5}, "tool", "must be a string"),
        ({"skill": "aiops"}, "tool", "has no 'tool'"),
        ({"tool": "power_on_vm"}, "skill", "has no 'skill'"),
        ({"skill": "aiops", "tool": "t", "params": None}, "params", "must be an object, got null"),
        ({"skill": "aiops", "tool": "t", "rollback_params": ["x"]}, "rollback_params", "must be an object"),
        ({"skill": "aiops", "tool": "t", "rollback_params": {"a": 1}}, "rollback_tool", "no rollback_tool"),
        (
            {"action": "require_approval", "params": {"message": "Go?"}, "rollback_tool": "delete_vm"},
            "rollback_tool",
            "approval gate and cannot have a rollback",
        ),
    ],
)
def test_a_malformed_step_is_refused_naming_the_step_and_field(raw: Any, field: str, words: str) -> None:
    with pytest.raises(StepValidationError) as info:
        step_from_dict(raw, 2)
    err = info.value
    assert err.message.startswith("Step 2") and words in err.message
    assert err.fields["step_index"] == 2 and err.fields["field_name"] == field
    assert err.hint


def test_nothing_is_built_when_a_later_step_is_bad() -> None:
    with pytest.raises(StepValidationError) as info:
        steps_from_dicts([{"skill": "aiops", "tool": "power_on_vm"}, {"skill": "aiops"}])
    assert info.value.fields["step_index"] == 1
