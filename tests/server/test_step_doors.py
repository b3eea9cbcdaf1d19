"""One step model at every door: the same bad step is refused with the same words, field and hint
by create_workflow, update_draft and a YAML template (listed as broken), over a real session,
and those are the words of 2.4.x's hand-written step builder (``tests/equivalence/frozen_steps``)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.equivalence import frozen_steps
from tests.server.conftest import GATE, Client
from vmware_pilot.config import Settings
from vmware_pilot.errors import StepValidationError

BAD_STEPS: dict[str, dict[str, Any]] = {
    "unknown_key": {
        "action": "look",
        "skill": "monitor",
        "tool": "get_alarms",
        "params": {},
        "colour": "red",
    },
    "name_not_text": {"action": "look", "skill": 3, "tool": "get_alarms"},
    "no_skill": {"action": "look", "tool": "get_alarms"},
    "params_null": {"action": "look", "skill": "monitor", "tool": "get_alarms", "params": None},
    "gate_with_undo": {**GATE, "rollback_tool": "power_on_vm"},
    "undo_params_without_tool": {
        "action": "on",
        "skill": "aiops",
        "tool": "power_on_vm",
        "params": {"vm_name": "a"},
        "rollback_params": {"vm_name": "a"},
    },
    "bad_gate_option": {**GATE, "params": {"message": "Go?", "approvals_required": 0}},
    "not_a_name": {"action": "look", "skill": "monitor", "tool": "get alarms"},
}


def refusal_of_2_4(raw: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(StepValidationError) as caught:
        frozen_steps.steps_from_dicts([GATE, raw])
    return caught.value.payload()


def shown(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: payload.get(k) for k in ("error", "field_name", "step_index", "hint")}


@pytest.mark.parametrize("case", list(BAD_STEPS))
async def test_the_same_bad_step_is_refused_alike_at_every_door(
    client: Client, settings: Settings, case: str
) -> None:
    raw = BAD_STEPS[case]
    expected = shown(refusal_of_2_4(raw))

    created = await client.refused("create_workflow", name="n", description="d", steps=[GATE, raw])
    assert shown(created) == expected

    draft = (await client.ok("design_workflow", goal="g"))["workflow_id"]
    updated = await client.refused("update_draft", workflow_id=draft, steps=[GATE, raw])
    assert shown(updated) == expected

    folder = settings.home / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{case}.yaml").write_text(yaml.safe_dump({"name": case, "steps": [GATE, raw]}))
    listing = (await client.ok("list_workflows"))["templates"]
    (entry,) = [t for t in listing if t["name"] == case]
    assert entry["error"] == f"{case}.yaml: {expected['error']}"
