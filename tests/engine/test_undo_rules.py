"""What engine/execution/undo.py decides and records, as tables, without a runner: what rollback does per
step, how each undo outcome is recorded, how a rollback ends, and cancel over every state.
(The rollback and cancel tools end to end are in tests/server.)"""

from __future__ import annotations

from typing import Any

import pytest

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import GATE_ACTION, StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine.execution import undo
from vmware_pilot.errors import InvalidTransition

S = StepStatus
W = WorkflowState
CURATED = Catalog.curated()
ACTOR = Actor("ops")
READ = ("monitor", "list_virtual_machines")  # low risk in the curated catalog
WRITE = ("aiops", "power_on_vm")


def step(tool: tuple[str, str], status: StepStatus, rollback: str = "", action: str = "act") -> Step:
    return Step(index=0, action=action, skill=tool[0], tool=tool[1], status=status, rollback_tool=rollback)


UNDO_OF = [
    (step(WRITE, S.SUCCESS, rollback="power_off_vm"), undo.CALL),
    (step(WRITE, S.INTERRUPTED, rollback="power_off_vm"), undo.CALL),
    (step(READ, S.SUCCESS), undo.SKIP),
    (step(("approval", "approve"), S.SUCCESS, action=GATE_ACTION), undo.SKIP),
    (step(WRITE, S.SUCCESS), "not_reversible"),
    (step(READ, S.INTERRUPTED), "not_reversible"),
]


@pytest.mark.parametrize(("subject", "expected"), UNDO_OF)
def test_what_rollback_does_with_each_kind_of_step(subject: Step, expected: str) -> None:
    what = undo.undo_of(subject, CURATED)
    if expected == "not_reversible":
        assert isinstance(what, dict)
        assert (what["status"], what["tool"], what["step"]) == ("not_reversible", subject.tool, 0)
    else:
        assert what == expected


RECORDED = [
    (OutcomeKind.SUCCEEDED, S.ROLLED_BACK, "success", "rollback_step"),
    (OutcomeKind.EFFECT_UNKNOWN, S.INTERRUPTED, "unknown", "rollback_unknown"),
    (OutcomeKind.FAILED, S.SUCCESS, "failed", "rollback_failed"),
    (OutcomeKind.PREVIEW_ONLY, S.SUCCESS, "failed", "rollback_failed"),
]


@pytest.mark.parametrize(("kind", "status", "entry", "audit"), RECORDED)
def test_each_undo_outcome_is_recorded(kind: OutcomeKind, status: StepStatus, entry: str, audit: str) -> None:
    wf = Workflow.new("custom", W.ROLLING_BACK, [step(WRITE, S.SUCCESS, rollback="power_off_vm")])
    undo.record_undo(wf, 0, StepOutcome(kind, {"ok": 1}, "why"), ACTOR)
    assert wf.steps[0].status is status
    [result] = wf.rollback_results
    assert (result["step"], result["tool"], result["status"]) == (0, "power_off_vm", entry)
    assert [e.action for e in wf.new_events] == [audit]
    assert undo.incomplete(wf) == ([result] if entry in ("failed", "unknown") else [])


@pytest.mark.parametrize(
    ("entries", "blocked"),
    [
        ([], ""),
        ([{"status": "success"}], ""),
        ([{"status": "failed"}], "rollback_failed"),
        ([{"status": "unknown"}], "rollback_failed"),
    ],
)
def test_a_rollback_with_an_incomplete_undo_ends_blocked(entries: list[dict[str, Any]], blocked: str) -> None:
    wf = Workflow.new("custom", W.ROLLING_BACK, [])
    wf.rollback_results = [{"step": 0, "tool": "t", **e} for e in entries]
    undo.finish_rollback(wf, ACTOR)
    assert (wf.state, wf.blocked_reason) == (W.FAILED, blocked)


@pytest.mark.parametrize("state", list(W))
def test_cancel_from_every_state(state: WorkflowState) -> None:
    wf = Workflow.new("custom", state, [step(WRITE, S.SUCCESS), step(WRITE, S.PENDING)])
    if state not in (W.DRAFT, W.PENDING, W.RUNNING, W.AWAITING_APPROVAL, W.ROLLING_BACK):
        with pytest.raises(InvalidTransition):
            undo.cancel(wf, ACTOR, "no longer needed")
        return
    undo.cancel(wf, ACTOR, "  no longer needed ")
    assert (wf.state, wf.blocked_reason) == (W.CANCELLED, "no longer needed")
    assert [s.status for s in wf.steps] == [S.SUCCESS, S.SKIPPED]
    assert [e.action for e in wf.new_events] == ["cancelled"]
