"""The console's inbox: workflows as a person deciding sees them, waiting gates first.

Each row says who asked, which objects the workflow touches, its highest risk, the verdict of
the waiting gate's prediction, its age and the time left to decide, and its state as words, an
icon and a colour (``words.state_look``). A search matches the id, the requester, a target and
the workflow's text (name, description, gate messages), case-insensitively. Reads only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.decision import time_left
from vmware_pilot.engine.gates import waiting_gate
from vmware_pilot.engine.targets import named_objects
from vmware_pilot.safety.classify import classify_step
from vmware_pilot.transports.console.words import StateLook, state_look

__all__ = ["SCANNED", "Row", "age_text", "display_state", "row_of", "search", "sort_waiting_first"]

# How many of the newest workflows the inbox reads to search and sort.
SCANNED: Final = 200
_TARGETS_SHOWN: Final = 4
_RISK_ORDER: Final = {"read": 0, "unknown": 1, "write": 2, "destructive": 3}


@dataclass(frozen=True)
class Row:
    id: str
    name: str
    look: StateLook
    display: str  # the state as the inbox tells it (expired, rolled_back, … beyond the stored state)
    requester: str
    targets: list[str]
    risk: str
    verdict: str
    age: str
    left: str
    waiting: bool
    created_at: str
    text: str  # what a search by text matches

    @property
    def more_targets(self) -> int:
        return max(0, len(self.targets) - _TARGETS_SHOWN)

    @property
    def shown_targets(self) -> list[str]:
        return self.targets[:_TARGETS_SHOWN]


def age_text(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return "just now"
    if minutes < 60:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 48 else f"{hours // 24} d"


def display_state(wf: Workflow, now: datetime) -> str:
    """The stored state, told apart further: an expired waiting gate, a rolled-back workflow
    (failed, with every undo done) and an incomplete rollback."""
    if wf.state is WorkflowState.AWAITING_APPROVAL:
        gate = waiting_gate(wf, now)
        return "expired" if gate is not None and gate.expired else wf.state.value
    if wf.state is WorkflowState.FAILED and wf.rollback_results:
        bad = [r for r in wf.rollback_results if r.get("status") in ("failed", "unknown", "partial")]
        return "rollback_incomplete" if bad else "rolled_back"
    return wf.state.value


def _targets(wf: Workflow) -> list[str]:
    seen: dict[str, None] = {}
    for step in wf.steps:
        if step.is_gate or not isinstance(step.params, Mapping):
            continue
        for obj in named_objects(step.skill, step.tool, step.params):
            if isinstance(obj.name, str) and not obj.name.startswith("__from_step_"):
                seen.setdefault(obj.name, None)
    return list(seen)


def row_of(wf: Workflow, catalog: Catalog, now: datetime) -> Row:
    display = display_state(wf, now)
    look = state_look(display) if display != "rollback_incomplete" else state_look("failed")
    if display == "rollback_incomplete":
        look = StateLook("Rollback incomplete", look.icon, look.css)
    tiers = [classify_step(s, catalog)[0].value for s in wf.steps if not s.is_gate]
    risk = max(tiers, key=lambda t: _RISK_ORDER.get(t, 1)) if tiers else "none"
    verdict, left = "", ""
    gate = waiting_gate(wf, now)
    if gate is not None:
        verdict = gate.prediction.verdict if gate.prediction is not None else "not predicted"
        expires = gate.expires_at
        left = time_left(None if expires is None else (expires - now).total_seconds())
    messages = [str(s.params.get("message", "")) for s in wf.steps if s.is_gate]
    description = str(wf.params.get("description", "") or "")
    targets = _targets(wf)
    text = " ".join([wf.id, wf.workflow_type, description, wf.created_by, *targets, *messages]).lower()
    return Row(
        id=wf.id,
        name=wf.workflow_type,
        look=look,
        display=display,
        requester=wf.created_by or "not recorded",
        targets=targets,
        risk=risk,
        verdict=verdict,
        age=age_text((now - wf.created_at).total_seconds()),
        left=left,
        waiting=display == "awaiting_approval",
        created_at=wf.created_at.isoformat(),
        text=text,
    )


def search(rows: Sequence[Row], query: str) -> list[Row]:
    """The rows whose id, requester, targets or text contain every word of ``query``."""
    words = query.lower().split()
    return [r for r in rows if all(w in r.text for w in words)]


def sort_waiting_first(rows: Sequence[Row]) -> list[Row]:
    """Waiting gates first, then the rest, each part keeping its order (newest first)."""
    return [r for r in rows if r.waiting] + [r for r in rows if not r.waiting]
