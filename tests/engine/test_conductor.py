"""The conductor (engine/execution/conductor.py) as tables: the next action over plans, step kinds and step
statuses, with and without a dispatcher; each record change over every workflow state; each
outcome kind; and that it does no I/O (its imports, and no clock read).

Plans are written as one word per step: ``r`` a read, ``w`` a write, ``G`` an approval gate;
``:a`` puts the step in parallel group ``a``; ``=status`` gives it a status other than pending.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import GATE_ACTION, Outcome, StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine.execution import conductor, gate_records
from vmware_pilot.engine.execution.conductor import (
    Fail,
    Finish,
    HandBack,
    RunGroup,
    RunStep,
    StopAtGate,
    Walk,
)
from vmware_pilot.errors import InvalidTransition, StateRefused

S = StepStatus
W = WorkflowState
NOW = datetime(2026, 12, 2, 1, 2, 3, tzinfo=UTC)
ACTOR = Actor("agent-a")
OTHER = Actor("agent-b")
NOT_TODO = [s for s in S if s not in (S.PENDING, S.NOT_EXECUTED)]


def plan(words: str, state: WorkflowState = W.RUNNING, **params: dict[str, Any]) -> Workflow:
    """A workflow from one word per step (see the module docstring); ``params`` by step as ``p<index>``."""
    steps = []
    for index, written in enumerate(words.split()):
        word, _, status = written.partition("=")
        kind, _, group = word.partition(":")
        action = {"r": "read", "w": "write", "G": GATE_ACTION}[kind]
        steps.append(
            Step(
                index=index,
                action=action,
                skill="approval" if kind == "G" else f"skill{index % 2}",
                tool=f"{action}_{index}",
                params=dict(params.get(f"p{index}", {})),
                status=S(status) if status else S.PENDING,
                group_id=group,
            )
        )
    return Workflow.new("custom", state, steps, created_by=ACTOR.label, now=NOW)


def is_read(step: Step) -> bool:
    return step.action == "read"


def decide(wf: Workflow, at: int = 0, *, dispatching: bool = True, failed: bool = False) -> conductor.Action:
    return conductor.next_action(wf, Walk(at, failed), dispatching=dispatching, is_read=is_read)


# --- the next action ---------------------------------------------------------------------------
NEXT_WITH_DISPATCH = [
    # what is there, where the walk is, what happens next
    ("", 0, Finish(Outcome.COMPLETED)),
    ("w", 0, RunStep(0)),
    ("r", 0, RunStep(0)),
    ("w w", 1, RunStep(1)),
    ("w=success w", 0, RunStep(1)),
    ("w=not_executed w", 0, RunStep(0)),
    ("w=success w=success", 0, Finish(Outcome.COMPLETED)),
    ("w=success", 1, Finish(Outcome.COMPLETED)),
    ("w=not_executed w=success", 1, Finish(Outcome.DISPATCH_REQUIRED)),
    # parallel groups: only the pending reads of one group go out together
    ("r:a r:a r:a w", 0, RunGroup("a", (0, 1, 2))),
    ("r:a r:a w:a r:a", 0, RunGroup("a", (0, 1))),
    ("w:a r:a r:a", 0, RunStep(0)),
    ("w:a r:a r:a", 1, RunGroup("a", (1, 2))),
    ("r:a r:b", 0, RunStep(0)),
    ("r:a r", 0, RunStep(0)),
    ("r r", 0, RunStep(0)),
    ("r:a r:a=success r:a", 0, RunStep(0)),
    ("r:a r:a=not_executed", 0, RunStep(0)),
    ("r:a G:a r:a", 0, RunStep(0)),
    ("r:a=success r:a r:a", 0, RunGroup("a", (1, 2))),
    # gates
    ("G w", 0, StopAtGate(0)),
    ("w=success G w", 0, StopAtGate(1)),
    ("w G w", 0, RunStep(0)),
    ("w G w", 1, StopAtGate(1)),
    ("G=success w", 0, RunStep(1)),
    ("w=success G=success G", 0, StopAtGate(2)),
    ("r:a G", 0, RunStep(0)),
]


@pytest.mark.parametrize(("words", "at", "expected"), NEXT_WITH_DISPATCH)
def test_with_a_dispatcher_the_next_step_or_group_runs(
    words: str, at: int, expected: conductor.Action
) -> None:
    assert decide(plan(words), at) == expected


NEXT_WITHOUT_DISPATCH = [
    ("", 0, Finish(Outcome.COMPLETED)),
    ("w", 0, HandBack((0,), resume=1)),
    ("w r r:a r:a", 0, HandBack((0, 1, 2, 3), resume=4)),
    ("w w=success r", 0, HandBack((0, 2), resume=3)),
    ("w=not_executed w", 0, HandBack((0, 1), resume=2)),
    ("w w", 1, HandBack((1,), resume=2)),
    ("w G w", 0, HandBack((0,), resume=1)),
    ("w=not_executed G w", 1, StopAtGate(1)),
    ("G w", 0, StopAtGate(0)),
    ("w=not_executed w=not_executed", 2, Finish(Outcome.DISPATCH_REQUIRED)),
    ("w=success w=not_executed", 2, Finish(Outcome.DISPATCH_REQUIRED)),
    ("w=success G=success w=success", 0, Finish(Outcome.COMPLETED)),
    ("w=reported_done", 0, Finish(Outcome.COMPLETED)),
]


@pytest.mark.parametrize(("words", "at", "expected"), NEXT_WITHOUT_DISPATCH)
def test_without_a_dispatcher_the_steps_up_to_the_gate_are_handed_back(
    words: str, at: int, expected: conductor.Action
) -> None:
    assert decide(plan(words), at, dispatching=False) == expected


@pytest.mark.parametrize("status", NOT_TODO)
@pytest.mark.parametrize("kind", ["r", "w", "r:a", "G"])
@pytest.mark.parametrize("dispatching", [True, False])
def test_a_step_no_longer_pending_is_passed_over_whatever_its_kind(
    status: StepStatus, kind: str, dispatching: bool
) -> None:
    wf = plan(f"{kind}={status.value} w")
    expected = RunStep(1) if dispatching else HandBack((1,), resume=2)
    assert decide(wf, dispatching=dispatching) == expected


@pytest.mark.parametrize("dispatching", [True, False])
@pytest.mark.parametrize("words", ["w", "G", "w=success", ""])
def test_after_a_failed_step_the_run_fails(dispatching: bool, words: str) -> None:
    assert decide(plan(words), failed=True, dispatching=dispatching) == Fail()


UNUSABLE = [
    ("w w", {"p0": {"vm": "__from_step_1__"}}, 0, "a later one (step 1)"),
    ("w w", {"p1": {"vm": "__from_step_7__"}}, 1, "a reference to step 7"),
    ("w G", {"p1": {"expires_in_minutes": -5}}, 1, "Approval gate at step 1"),
    ("w G", {"p1": {"approvals_required": 0}}, 1, "Approval gate at step 1"),
]


@pytest.mark.parametrize("dispatching", [True, False])
@pytest.mark.parametrize(("words", "params", "index", "why"), UNUSABLE)
def test_a_plan_step_that_can_never_run_fails_the_run_before_anything_runs(
    words: str, params: dict[str, dict[str, Any]], index: int, why: str, dispatching: bool
) -> None:
    action = decide(plan(words, **params), dispatching=dispatching)
    assert isinstance(action, Fail) and action.index == index
    assert why in action.reason and action.reason.endswith("Create a corrected workflow.")


def test_the_plan_is_checked_when_the_walk_starts_only() -> None:
    wf = plan("w w", p1={"vm": "__from_step_3__"})
    assert isinstance(decide(wf), Fail)
    assert decide(wf, 1) == RunStep(1)  # the runner stops at the first Fail; it never gets here


def test_a_step_already_done_is_not_judged_unusable() -> None:
    wf = plan("w=success w", p0={"vm": "__from_step_1__"})
    assert conductor.unusable(wf) is None
    assert decide(wf) == RunStep(1)


AFTER = [
    (RunStep(2), True, Walk(3)),
    (RunStep(2), False, Walk(3, failed=True)),
    (RunGroup("a", (1, 2, 3)), True, Walk(4)),
    (RunGroup("a", (1, 2, 3)), False, Walk(4, failed=True)),
    (HandBack((0, 1), resume=5), True, Walk(5)),
    (StopAtGate(1), True, Walk(1)),
    (Finish(Outcome.COMPLETED), True, Walk(1)),
    (Fail(), True, Walk(1)),
]


@pytest.mark.parametrize(("action", "ok", "expected"), AFTER)
def test_the_walk_moves_past_what_was_carried_out(action: conductor.Action, ok: bool, expected: Walk) -> None:
    assert conductor.after(Walk(1), action, ok) == expected


def test_a_failed_walk_stays_failed() -> None:
    assert conductor.after(Walk(0, failed=True), RunStep(0), ok=True) == Walk(1, failed=True)


def test_group_demand_counts_each_skills_calls_per_group_up_to_the_next_gate() -> None:
    # steps 0-3 are group a (skills 0,1,0,1), 4 is a lone read, 5-6 group b (skills 1,0); the gate
    # at 7 ends the look-ahead, so group c after it is not counted.
    wf = plan("r:a r:a r:a r:a r r:b r:b G r:c r:c r:c")
    assert conductor.group_demand(wf, is_read) == {"skill0": 2, "skill1": 2}
    assert conductor.group_demand(plan("w:a w:a r"), is_read) == {}


# --- whole walks, driven by the conductor alone --------------------------------------------------
def drive(wf: Workflow, kinds: dict[int, OutcomeKind], *, dispatching: bool = True) -> list[conductor.Action]:
    """Carry out the conductor's actions in memory (what the runner does against store and
    dispatcher): every step succeeds unless ``kinds`` says otherwise."""
    conductor.start_run(wf, ACTOR.label, NOW)
    walk, done = Walk(), []
    while True:
        action = conductor.next_action(wf, walk, dispatching=dispatching, is_read=is_read)
        done.append(action)
        ok = True
        if isinstance(action, Fail):
            if action.index is not None:
                refused = StepOutcome(OutcomeKind.FAILED, None, action.reason)
                conductor.record_outcomes(wf, [action.index], [refused], ACTOR.label, NOW)
            conductor.fail(wf)
            return done
        if isinstance(action, StopAtGate):
            conductor.reach_gate(wf, action.index, ACTOR.label, NOW)
            return done
        if isinstance(action, Finish):
            conductor.finish(wf, action, ACTOR.label, NOW)
            return done
        if isinstance(action, HandBack):
            conductor.record_handback(wf, action.indices, ACTOR, NOW)
        else:
            conductor.mark_running(wf, action.indices, NOW)
            outcomes = [
                StepOutcome(kinds.get(i, OutcomeKind.SUCCEEDED), {"i": i}, "boom") for i in action.indices
            ]
            ok = conductor.record_outcomes(wf, action.indices, outcomes, ACTOR.label, NOW)
        walk = conductor.after(walk, action, ok)


WALKS = [
    # plan, outcomes that are not success, dispatching, actions, end state, step statuses
    ("w w", {}, True, [RunStep(0), RunStep(1), Finish(Outcome.COMPLETED)], W.COMPLETED, "success success"),
    (
        "r:a r:a w G w",
        {},
        True,
        [RunGroup("a", (0, 1)), RunStep(2), StopAtGate(3)],
        W.AWAITING_APPROVAL,
        "success success success pending pending",
    ),
    (
        "w w w",
        {1: OutcomeKind.FAILED},
        True,
        [RunStep(0), RunStep(1), Fail()],
        W.FAILED,
        "success failed skipped",
    ),
    ("w w", {0: OutcomeKind.PREVIEW_ONLY}, True, [RunStep(0), Fail()], W.FAILED, "failed skipped"),
    ("w w", {0: OutcomeKind.EFFECT_UNKNOWN}, True, [RunStep(0), Fail()], W.FAILED, "interrupted skipped"),
    (
        "r:a r:a w",
        {0: OutcomeKind.FAILED},
        True,
        [RunGroup("a", (0, 1)), Fail()],
        W.FAILED,
        "failed success skipped",
    ),
    (
        "w r G w",
        {},
        False,
        [HandBack((0, 1), resume=2), StopAtGate(2)],
        W.AWAITING_APPROVAL,
        "not_executed not_executed pending pending",
    ),
    (
        "w w=success w",
        {},
        False,
        [HandBack((0, 2), resume=3), Finish(Outcome.DISPATCH_REQUIRED)],
        W.PENDING,
        "not_executed success not_executed",
    ),
    ("G=success", {}, False, [Finish(Outcome.COMPLETED)], W.COMPLETED, "success"),
]


@pytest.mark.parametrize(("words", "kinds", "dispatching", "actions", "state", "statuses"), WALKS)
def test_a_whole_walk_driven_by_the_conductor_alone(
    words: str,
    kinds: dict[int, OutcomeKind],
    dispatching: bool,
    actions: list[conductor.Action],
    state: WorkflowState,
    statuses: str,
) -> None:
    wf = plan(words, W.PENDING)
    assert drive(wf, kinds, dispatching=dispatching) == actions
    assert wf.state is state
    assert " ".join(s.status.value for s in wf.steps) == statuses


def test_an_unusable_plan_records_the_step_failed_and_runs_nothing() -> None:
    wf = plan("w w", W.PENDING, p1={"vm": "__from_step_3__"})
    [action] = drive(wf, {})
    assert isinstance(action, Fail) and action.index == 1
    assert [s.status for s in wf.steps] == [S.SKIPPED, S.FAILED]
    assert "a reference to step 3" in wf.steps[1].result["error"]
    assert wf.state is W.FAILED


# --- recording outcomes --------------------------------------------------------------------------
RECORDED = [
    # kind, payload, step status, result, audit action, ok
    (OutcomeKind.SUCCEEDED, {"vm": "a"}, S.SUCCESS, {"vm": "a"}, "step_completed", True),
    (OutcomeKind.SUCCEEDED, None, S.SUCCESS, None, "step_completed", True),
    (OutcomeKind.FAILED, None, S.FAILED, {"error": "no such vm"}, "step_failed", False),
    (OutcomeKind.FAILED, {"code": 4}, S.FAILED, {"code": 4, "error": "no such vm"}, "step_failed", False),
    (OutcomeKind.FAILED, {"error": "own"}, S.FAILED, {"error": "own"}, "step_failed", False),
    (OutcomeKind.FAILED, "text", S.FAILED, {"error": "no such vm"}, "step_failed", False),
    (
        OutcomeKind.PREVIEW_ONLY,
        {"preview": 1},
        S.FAILED,
        {"preview": 1, "error": "no such vm"},
        "step_failed",
        False,
    ),
    (OutcomeKind.EFFECT_UNKNOWN, None, S.INTERRUPTED, {"error": "no such vm"}, "step_effect_unknown", False),
]


@pytest.mark.parametrize(("kind", "payload", "status", "result", "audit", "ok"), RECORDED)
def test_each_outcome_kind_is_recorded_in_the_step_and_the_audit(
    kind: OutcomeKind, payload: Any, status: StepStatus, result: Any, audit: str, ok: bool
) -> None:
    wf = plan("w=running")
    assert (
        conductor.record_outcomes(wf, [0], [StepOutcome(kind, payload, "no such vm")], "agent-a", NOW) is ok
    )
    step = wf.steps[0]
    assert (step.status, step.result, step.completed_at) == (status, result, NOW)
    [entry] = wf.new_events
    assert (entry.action, entry.actor, entry.ts) == (audit, "agent-a", NOW)
    assert entry.detail.startswith("Step 0: write_0 → ")
    assert wf.state is W.RUNNING  # the run fails the workflow after: conductor.fail


def test_a_groups_outcomes_are_recorded_in_step_order_and_one_failure_fails_it() -> None:
    wf = plan("r:a=running r:a=running r:a=running")
    outcomes = [
        StepOutcome(OutcomeKind.SUCCEEDED, 1),
        StepOutcome(OutcomeKind.FAILED, None, "x"),
        StepOutcome(OutcomeKind.SUCCEEDED, 3),
    ]
    assert conductor.record_outcomes(wf, [0, 1, 2], outcomes, "a", NOW) is False
    assert [e.action for e in wf.new_events] == ["step_completed", "step_failed", "step_completed"]
    assert [s.status for s in wf.steps] == [S.SUCCESS, S.FAILED, S.SUCCESS]


def test_outcome_kinds_the_conductor_names_are_the_dispatchers() -> None:
    assert OutcomeKind.SUCCEEDED.value == conductor.SUCCEEDED
    assert OutcomeKind.EFFECT_UNKNOWN.value == conductor.EFFECT_UNKNOWN


def test_handed_back_steps_are_not_executed_and_held_by_the_caller() -> None:
    wf = plan("w r G")
    conductor.record_handback(wf, [0, 1], ACTOR, NOW)
    assert [s.status for s in wf.steps] == [S.NOT_EXECUTED, S.NOT_EXECUTED, S.PENDING]
    assert wf.steps[0].result == {"reason": conductor.NOT_EXECUTED_REASON}
    assert wf.handed_to == {0: "agent-a", 1: "agent-a"}
    assert [(e.action, e.ts) for e in wf.new_events] == [("step_not_executed", NOW)] * 2
    with pytest.raises(StateRefused, match="step 0"):
        conductor.record_handback(wf, [0], OTHER, NOW)


# --- every workflow state ------------------------------------------------------------------------
@pytest.mark.parametrize("state", list(W))
def test_a_run_starts_only_from_pending_or_running(state: WorkflowState) -> None:
    wf = plan("w", state)
    if state in (W.PENDING, W.RUNNING):
        conductor.start_run(wf, "a", NOW)
        assert wf.state is W.RUNNING
        assert [(e.action, e.ts) for e in wf.new_events] == [("run_started", NOW)]
    else:
        with pytest.raises(InvalidTransition):
            conductor.start_run(wf, "a", NOW)


@pytest.mark.parametrize("state", list(W))
def test_steps_start_only_in_a_running_workflow(state: WorkflowState) -> None:
    wf = plan("r:a r:a=not_executed", state)
    if state is W.RUNNING:
        conductor.mark_running(wf, [0, 1], NOW)
        assert [(s.status, s.started_at) for s in wf.steps] == [(S.RUNNING, NOW)] * 2
    else:
        with pytest.raises(StateRefused, match=f"it is now '{state.value}'"):
            conductor.mark_running(wf, [0, 1], NOW)
        assert [s.status for s in wf.steps] == [S.PENDING, S.NOT_EXECUTED]


@pytest.mark.parametrize("status", NOT_TODO)
def test_a_step_another_run_took_is_not_started_again(status: StepStatus) -> None:
    wf = plan(f"r:a r:a={status.value}")
    with pytest.raises(StateRefused, match=f"step 1 is already {status.value}"):
        conductor.mark_running(wf, [0, 1], NOW)
    assert wf.steps[0].status is S.PENDING


ENDINGS = [
    # what is recorded, the state it needs, the state it leaves, the audit action
    (lambda wf: conductor.reach_gate(wf, 1, "a", NOW), W.AWAITING_APPROVAL, "awaiting_approval"),
    (lambda wf: conductor.finish(wf, Finish(Outcome.COMPLETED), "a", NOW), W.COMPLETED, "workflow_completed"),
    (
        lambda wf: conductor.finish(wf, Finish(Outcome.DISPATCH_REQUIRED), "a", NOW),
        W.PENDING,
        "dispatch_required",
    ),
    (conductor.fail, W.FAILED, None),
]


@pytest.mark.parametrize("state", list(W))
@pytest.mark.parametrize(("change", "after", "audit"), ENDINGS)
def test_a_run_ends_only_from_running(
    state: WorkflowState, change: Any, after: WorkflowState, audit: str | None
) -> None:
    wf = plan("w=not_executed G w", state)
    if state is not W.RUNNING:
        with pytest.raises(InvalidTransition):
            change(wf)
        assert wf.new_events == []
        return
    change(wf)
    assert wf.state is after
    assert [e.action for e in wf.new_events] == ([audit] if audit else [])


def test_reaching_a_gate_records_it_at_the_time_given() -> None:
    wf = plan("w=success G w")
    conductor.reach_gate(wf, 1, "a", NOW)
    record = gate_records.gate_record(wf, 1)
    assert record is not None and record.reached_at == NOW and record.approvals == []
    assert wf.new_events[0].detail == f"Step 1: require_approval (plan {record.digest})"


def test_failing_skips_the_pending_steps_only() -> None:
    wf = plan("w=success w=failed w w=not_executed")
    conductor.fail(wf)
    assert [s.status for s in wf.steps] == [S.SUCCESS, S.FAILED, S.SKIPPED, S.NOT_EXECUTED]


def test_handing_back_counts_the_steps_not_executed() -> None:
    wf = plan("w=not_executed w=success w=not_executed")
    conductor.finish(wf, Finish(Outcome.DISPATCH_REQUIRED), "a", NOW)
    assert wf.new_events[0].detail == "2 step(s) recorded but not executed (no dispatch configured)"


@pytest.mark.parametrize("state", list(W))
def test_a_step_a_dead_run_left_running_fails_the_workflow(state: WorkflowState) -> None:
    wf = plan("w=success w=running w", state)
    if state in (W.PENDING, W.RUNNING, W.AWAITING_APPROVAL):
        assert conductor.mark_interrupted(wf, 1, "a", NOW) is True
        assert (wf.state, wf.steps[1].status, wf.steps[1].completed_at) == (W.FAILED, S.INTERRUPTED, NOW)
        assert [e.action for e in wf.new_events] == ["interrupted_step_detected"]
    else:
        with pytest.raises(InvalidTransition):
            conductor.mark_interrupted(wf, 1, "a", NOW)


@pytest.mark.parametrize("status", [s for s in S if s is not S.RUNNING])
def test_a_step_its_run_already_recorded_is_not_marked_interrupted(status: StepStatus) -> None:
    wf = plan(f"w={status.value}")
    assert conductor.mark_interrupted(wf, 0, "a", NOW) is False
    assert (wf.state, wf.steps[0].status, wf.new_events) == (W.RUNNING, status, [])


# --- no I/O ------------------------------------------------------------------------------------------
SOURCE = REPO / "src" / "vmware_pilot"
# Packages and engine modules that hold I/O: the store, dispatchers, transports and the rest.
NOT_PURE = (
    "vmware_pilot.store",
    "vmware_pilot.dispatch",
    "vmware_pilot.transports",
    "vmware_pilot.server",
    "vmware_pilot.cli",
    "vmware_pilot.app",
    "vmware_pilot.ondemand",
    "vmware_pilot.config",
    "vmware_pilot.engine.execution.runner",
    "vmware_pilot.engine.service",
    "vmware_pilot.engine.context",
    "vmware_pilot.engine.lifecycle",
    "vmware_pilot.engine.authoring",
    "vmware_pilot.ownership",
    "vmware_pilot.adapters.webhook",
    "vmware_pilot.engine.inspection",
    "vmware_pilot.engine.progress",
)
STDLIB_ALLOWED = {"__future__", "collections.abc", "dataclasses", "datetime", "typing"}


def _imports(module: str) -> set[str]:
    """Every module ``module``'s source imports (type-only imports included), resolved to names."""
    path = SOURCE.joinpath(*module.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if _exists(f"{node.module}.{a.name}")}
    return found


def _exists(module: str) -> bool:
    parts = module.split(".")
    if parts[0] != "vmware_pilot":
        return False
    path = SOURCE.joinpath(*parts[1:])
    return path.is_dir() or path.with_suffix(".py").exists()


def _closure(root: str) -> set[str]:
    seen, todo = set(), [root]
    while todo:
        module = todo.pop()
        if module in seen or not _exists(module):
            continue
        seen.add(module)
        todo += [m for m in _imports(module) if m.startswith("vmware_pilot.")]
    return seen


def test_the_conductor_reaches_no_module_that_does_io() -> None:
    reached = _closure("vmware_pilot.engine.execution.conductor")
    assert "vmware_pilot.engine.execution.gate_records" in reached  # the graph is followed
    assert sorted(m for m in reached if m.startswith(NOT_PURE)) == []


def test_the_conductor_imports_no_io_from_the_standard_library() -> None:
    own = {m for m in _imports("vmware_pilot.engine.execution.conductor") if not m.startswith("vmware_pilot")}
    assert own <= STDLIB_ALLOWED


def test_importing_the_conductor_loads_no_database_sdk_or_event_loop(tmp_path: Path) -> None:
    probe = (
        "import sys, vmware_pilot.engine.execution.conductor\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'psycopg', 'mcp', 'httpx', 'asyncio', 'anyio', 'starlette', 'uvicorn') "
        f"or m.startswith({NOT_PURE!r}))\n"
        "print(bad)\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert shown.stdout.strip() == "[]"


def test_the_conductor_reads_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_clock() -> datetime:
        raise AssertionError("the conductor read the clock")

    monkeypatch.setattr("vmware_pilot.domain.model.utcnow", no_clock)
    monkeypatch.setattr("vmware_pilot.domain.clock.utcnow", no_clock)
    for words, kinds, dispatching, *_ in WALKS:
        wf = plan(words, W.PENDING)
        drive(wf, kinds, dispatching=dispatching)
        assert {e.ts for e in wf.audit_log} == {NOW}
    wf = plan("w=running")
    conductor.mark_interrupted(wf, 0, "a", NOW)
    assert wf.audit_log[-1].ts == NOW


def test_nothing_the_runner_carries_out_imports_the_runner() -> None:
    """approval, undo and inspection decide and record; the runner and its parts (saving, sending,
    answers, approving, closing) call them, never the reverse (no import cycle, not even a
    type-only one)."""
    runner = "vmware_pilot.engine.execution.runner"
    parts = ["saving", "sending", "answers", "approving", "closing", "parts"]
    used = {
        m
        for module in [runner, *(f"vmware_pilot.engine.execution.{p}" for p in parts)]
        for m in _imports(module)
        if m.startswith("vmware_pilot.engine.")
    }
    assert {
        "vmware_pilot.engine.execution.approval",
        "vmware_pilot.engine.execution.undo",
        "vmware_pilot.engine.execution.conductor",
    } <= used
    assert sorted(m for m in used if runner in _imports(m)) == []
    importers = sorted(
        ".".join(p.relative_to(SOURCE.parent).with_suffix("").parts)
        for p in SOURCE.rglob("*.py")
        if runner
        in _imports(".".join(p.relative_to(SOURCE.parent).with_suffix("").parts).removesuffix(".__init__"))
    )
    assert importers == ["vmware_pilot.app", "vmware_pilot.engine.context"]
