"""One step model at every door: the same bad step is refused with the same words, field and hint
by create_workflow, update_draft and a YAML template (listed as broken), over a real session,
and those are the words of 2.4.x's hand-written step builder (tests/data/rules/bad-steps.yaml)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.support.mcp_client import GATE, Client
from tests.support.tables import RULES
from vmware_pilot.config import Settings

# name -> a bad step (sent after a gate) and the refusal 2.4.x's hand-written step builder gave it
BAD_STEPS: dict[str, dict[str, Any]] = yaml.safe_load((RULES / "bad-steps.yaml").read_text())


def shown(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: payload.get(k) for k in ("error", "field_name", "step_index", "hint")}


@pytest.mark.parametrize("case", list(BAD_STEPS))
async def test_the_same_bad_step_is_refused_alike_at_every_door(
    client: Client, settings: Settings, case: str
) -> None:
    raw, expected = BAD_STEPS[case]["step"], BAD_STEPS[case]["refused"]

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
