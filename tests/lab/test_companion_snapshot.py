"""The companion tools snapshot (tests/data/companion-tools.json) is what the pinned companions serve.

Many tests judge templates, reviews and the catalog against that snapshot; this test keeps it
honest. When it fails after a companion pin changed, regenerate the snapshot with
``.venv/bin/python scripts/lab/snapshot_companions.py`` and review the diff.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.lab_harness import COMPANIONS, Lab, list_companion_tools

pytestmark = pytest.mark.lab

REGENERATE = "regenerate it with `.venv/bin/python scripts/lab/snapshot_companions.py`"


@pytest.mark.parametrize("skill", COMPANIONS)
async def test_snapshot_matches_the_pinned_companion(
    skill: str, lab: Lab, companion_tools: dict[str, Any]
) -> None:
    live = await list_companion_tools(lab, skill)
    kept = companion_tools[skill]

    assert kept["version"] == live["version"], f"{skill}: pinned version changed; {REGENERATE}"
    assert [t["name"] for t in kept["tools"]] == [t["name"] for t in live["tools"]], (
        f"{skill}: tool list differs; {REGENERATE}"
    )
    for ours, theirs in zip(kept["tools"], live["tools"], strict=True):
        assert ours == theirs, f"{skill}.{ours['name']}: schema, annotations or text differ; {REGENERATE}"
    assert kept == live
