"""Steps as comparable rows for template tests."""

from __future__ import annotations

from typing import Any

from vmware_pilot.domain.model import Step


def rows(steps: list[Step]) -> list[tuple[Any, ...]]:
    """``(index, action, skill, tool, params, rollback_tool, rollback_params, group_id)``;
    a gate is ``(index, "GATE")`` (its message is checked separately)."""
    out: list[tuple[Any, ...]] = []
    for s in steps:
        if s.is_gate:
            assert (s.skill, s.tool, list(s.params)) == ("pilot", "approve", ["message"])
            out.append((s.index, "GATE"))
        else:
            out.append(
                (s.index, s.action, s.skill, s.tool, s.params, s.rollback_tool, s.rollback_params, s.group_id)
            )
    return out
