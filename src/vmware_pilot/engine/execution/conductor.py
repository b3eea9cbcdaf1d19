"""The conductor: what a run does next, and how each outcome changes the workflow. No I/O.

``next_action`` looks at a workflow in ``running`` and where the walk stands (``Walk``) and
decides one action: run a step (``RunStep``), run a parallel group of reads (``RunGroup``),
hand steps back to the calling agent (``HandBack``), stop at an approval gate (``StopAtGate``),
finish (``Finish``) or fail (``Fail``). ``after`` moves the walk past an action that was carried
out. The ``start_run``, ``mark_running``, ``record_outcomes``, ``record_handback``,
``reach_gate``, ``finish``, ``fail`` and ``mark_interrupted`` functions write a decision or an
outcome into the workflow; the runner (``engine/execution/runner.py``) passes them to its save, which may
apply them again to a reloaded record after a concurrent write.

Nothing here touches the store, a dispatcher, the clock, the environment or a logger: times
come in as ``now``, the caller's name as ``actor``, and whether a step is a read as ``is_read``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Event, Outcome, StepStatus, WorkflowState
from vmware_pilot.domain.gate_options import gate_option_problem
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.records import GatePolicy
from vmware_pilot.domain.refs import reference_problems
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine import handout
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.errors import StateRefused

__all__ = [
    "NOT_EXECUTED_REASON",
    "Action",
    "Fail",
    "Finish",
    "HandBack",
    "RunGroup",
    "RunStep",
    "StepReport",
    "StopAtGate",
    "Walk",
    "after",
    "batch",
    "fail",
    "finish",
    "group_demand",
    "mark_interrupted",
    "mark_running",
    "next_action",
    "reach_gate",
    "record_handback",
    "record_outcomes",
    "start_run",
    "unusable",
]

S = StepStatus
IsRead = Callable[[Step], bool]

NOT_EXECUTED_REASON: Final = (
    "Pilot runs without --dispatch: it did not run this step. The calling agent must perform it "
    "(see pending_dispatch)."
)
# The outcome kinds of dispatch/protocol.OutcomeKind the conductor tells apart; any other kind
# (failed, preview only) is a failure. tests/engine/test_conductor.py holds them equal.
SUCCEEDED: Final = "succeeded"
EFFECT_UNKNOWN: Final = "effect_unknown"
_TODO: Final = (S.PENDING, S.NOT_EXECUTED)


class StepReport(Protocol):
    """What a step's call came back with (``dispatch.protocol.StepOutcome`` is one)."""

    @property
    def kind(self) -> str: ...

    @property
    def payload(self) -> Any: ...

    @property
    def message(self) -> str: ...


# --- decisions ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Walk:
    """Where a run's walk stands between two actions: the first step it has not passed yet, and
    whether a step this run started failed (or its effect is unknown)."""

    at: int = 0
    failed: bool = False


@dataclass(frozen=True, slots=True)
class RunStep:
    """Run step ``index`` on its own."""

    index: int

    @property
    def indices(self) -> tuple[int, ...]:
        return (self.index,)


@dataclass(frozen=True, slots=True)
class RunGroup:
    """Run the read steps ``indices`` of parallel group ``group_id`` at the same time."""

    group_id: str
    indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class HandBack:
    """Without a dispatcher: record ``indices`` as not executed and hand them to the caller; the
    walk goes on at ``resume`` (the next pending gate, or the end)."""

    indices: tuple[int, ...]
    resume: int


@dataclass(frozen=True, slots=True)
class StopAtGate:
    """Stop at the approval gate ``index``: record it as reached and wait for approval."""

    index: int


@dataclass(frozen=True, slots=True)
class Finish:
    """No step left to walk: ``completed``, or ``dispatch_required`` while steps are handed out."""

    outcome: Outcome

    @property
    def event(self) -> Event:
        return Event.COMPLETE if self.outcome is Outcome.COMPLETED else Event.HAND_BACK


@dataclass(frozen=True, slots=True)
class Fail:
    """Fail the workflow. ``index`` and ``reason``: a step that can never run, to record as failed
    first (nothing was run or handed out); None after a step of this run failed."""

    index: int | None = None
    reason: str = ""


Action = RunStep | RunGroup | HandBack | StopAtGate | Finish | Fail


def unusable(wf: Workflow) -> tuple[int, str] | None:
    """The first step still to run that a checked plan could not hold (a reference that can never
    resolve, a gate option that is no usable value), and why; records stored earlier may."""
    todo = [s for s in wf.steps if s.status in _TODO]
    indices = {s.index for s in todo}
    found = [
        (p.step_index, f"{p.message}; it can never resolve")
        for p in reference_problems(wf.steps)
        if p.field.startswith("params") and p.step_index in indices
    ]
    for step in todo:
        problem = gate_option_problem(step.params) if step.is_gate else None
        if problem is not None:
            found.append((step.index, f"Approval gate at step {step.index}: {problem[1]}"))
    if not found:
        return None
    index, why = min(found)
    return index, f"{why}, so nothing was run or handed out. Create a corrected workflow."


def batch(wf: Workflow, start: int, is_read: IsRead) -> tuple[int, ...]:
    """``start`` plus the following pending members of its parallel group, when all are reads.

    Only reads run at the same time: a write that shares a group (a forced run, or a catalog
    that changed since review) runs on its own, in order."""
    first = wf.steps[start]
    found = [start]
    if not first.group_id or not is_read(first):
        return tuple(found)
    for step in wf.steps[start + 1 :]:
        if step.group_id != first.group_id or step.is_gate or step.status is not S.PENDING:
            break
        if not is_read(step):
            break
        found.append(step.index)
    return tuple(found)


def group_demand(wf: Workflow, is_read: IsRead) -> dict[str, int]:
    """For each skill, the most calls one parallel group before the next gate makes to it at once:
    the sessions to open while the earlier steps run."""
    demand: dict[str, int] = {}
    i = 0
    while i < len(wf.steps):
        step = wf.steps[i]
        if step.is_gate and step.status is S.PENDING:
            break
        if step.status is not S.PENDING or not step.group_id:
            i += 1
            continue
        members = batch(wf, i, is_read)
        if len(members) > 1:
            per_skill: dict[str, int] = {}
            for index in members:
                skill = wf.steps[index].skill
                per_skill[skill] = per_skill.get(skill, 0) + 1
            for skill, count in per_skill.items():
                demand[skill] = max(demand.get(skill, 0), count)
        i = members[-1] + 1
    return demand


def next_action(wf: Workflow, walk: Walk, *, dispatching: bool, is_read: IsRead) -> Action:
    """The next thing a run of ``wf`` does, from ``walk``. The state is not looked at here: the
    record changes (``mark_running``, ``reach_gate``, ``finish``) refuse a workflow another caller
    moved out of ``running`` meanwhile.

    Steps already done (or skipped, failed, rolled back) are passed over. A pending gate stops the
    walk. With a dispatcher the next step runs, with the pending reads of its parallel group;
    without one every step up to the gate (or the end) is handed back in one action. A walk that
    starts on a plan with a step that can never run (``unusable``) fails at once."""
    if walk.failed:
        return Fail()
    broken = unusable(wf) if walk == Walk() else None  # checked once, when the walk starts
    if broken is not None:
        return Fail(*broken)
    handed: list[int] = []
    i = walk.at
    while i < len(wf.steps):
        step = wf.steps[i]
        if step.status not in _TODO:
            i += 1
            continue
        if step.is_gate:
            return HandBack(tuple(handed), resume=i) if handed else StopAtGate(i)
        if not dispatching:
            handed.append(i)
            i += 1
            continue
        members = batch(wf, i, is_read)
        return RunGroup(step.group_id, members) if len(members) > 1 else RunStep(i)
    if handed:
        return HandBack(tuple(handed), resume=len(wf.steps))
    if any(s.status is S.NOT_EXECUTED for s in wf.steps):
        return Finish(Outcome.DISPATCH_REQUIRED)
    return Finish(Outcome.COMPLETED)


def after(walk: Walk, action: Action, ok: bool = True) -> Walk:
    """The walk once ``action`` was carried out (``ok``: every step it ran succeeded)."""
    if isinstance(action, RunStep | RunGroup):
        return Walk(at=action.indices[-1] + 1, failed=walk.failed or not ok)
    if isinstance(action, HandBack):
        return Walk(at=action.resume, failed=walk.failed)
    return walk  # the others end the run


# --- recording ---------------------------------------------------------------------------------
def start_run(w: Workflow, actor: str, now: datetime) -> None:
    """A run starts (or resumes) walking: ``pending`` or ``running`` → ``running``."""
    fire(w, Event.START_RUN)
    w.log("run_started", "", actor, at=now)


def mark_running(w: Workflow, indices: Sequence[int], now: datetime) -> None:
    """Mark the steps of a ``RunStep``/``RunGroup`` running, re-checked on the stored record:
    another Pilot process may have run, cancelled or failed the workflow since it was loaded.
    Exactly one run may start a step."""
    taken = [i for i in indices if w.steps[i].status not in _TODO]
    if w.state is not WorkflowState.RUNNING or taken:
        what = (
            f"step {taken[0]} is already {w.steps[taken[0]].status.value}"
            if taken
            else f"it is now '{w.state.value}'"
        )
        raise StateRefused(
            f"Workflow '{w.id}' was changed by another caller while this run went on ({what}); "
            "this run stopped without starting another step",
            hint=f"get_workflow_status('{w.id}') shows where it stands.",
            workflow_id=w.id,
            state=w.state.value,
        )
    for index in indices:
        w.steps[index].status = S.RUNNING
        w.steps[index].started_at = now


def _payload_with_error(outcome: StepReport) -> Any:
    payload = outcome.payload
    if isinstance(payload, dict):
        return {**payload, "error": payload.get("error") or outcome.message}
    return {"error": outcome.message}


def _record(w: Workflow, index: int, outcome: StepReport, actor: str, now: datetime) -> bool:
    step = w.steps[index]
    step.completed_at = now
    if outcome.kind == SUCCEEDED:
        step.status = S.SUCCESS
        step.result = outcome.payload
        w.log("step_completed", f"Step {index}: {step.tool} → success", actor, at=now)
        return True
    step.result = _payload_with_error(outcome)
    if outcome.kind == EFFECT_UNKNOWN:
        step.status = S.INTERRUPTED
        w.log("step_effect_unknown", f"Step {index}: {step.tool} → {outcome.message}", actor, at=now)
    else:
        step.status = S.FAILED
        w.log("step_failed", f"Step {index}: {step.tool} → {outcome.message}", actor, at=now)
    return False


def record_outcomes(
    w: Workflow, indices: Sequence[int], outcomes: Sequence[StepReport], actor: str, now: datetime
) -> bool:
    """Each step's outcome and audit event, in step order; True when every one succeeded.

    Succeeded → ``success``; effect unknown → ``interrupted``; anything else (failed, preview
    only) → ``failed``, with the message as the result's ``error``."""
    oks = [_record(w, i, o, actor, now) for i, o in zip(indices, outcomes, strict=True)]
    return all(oks)


def record_handback(w: Workflow, indices: Sequence[int], actor: Actor, now: datetime) -> None:
    """The steps of a ``HandBack``: ``not_executed``, handed to ``actor`` (refusing another's)."""
    handout.record(w, list(indices), actor)
    for index in indices:
        step = w.steps[index]
        step.status = S.NOT_EXECUTED
        step.result = {"reason": NOT_EXECUTED_REASON}
        w.log("step_not_executed", f"Step {index}: {step.tool} — no dispatch configured", actor.label, at=now)


def reach_gate(
    w: Workflow,
    index: int,
    actor: str,
    now: datetime,
    policy: GatePolicy | None = None,
    default_expiry: float | None = None,
) -> None:
    """A ``StopAtGate``: ``running`` → ``awaiting_approval``, with a fresh gate record (``policy``:
    the policy rule the gate follows, ``engine.guard.GateRule.record``; ``default_expiry``: the
    most minutes the gate waits, ``gate_records.default_expiry``)."""
    fire(w, Event.REACH_GATE)
    record = gate_records.reach(w, index, now, policy, default_expiry)
    rule = f"; policy rule '{policy.rule}'" if policy else ""
    w.log("awaiting_approval", f"Step {index}: require_approval (plan {record.digest}{rule})", actor, at=now)


def finish(w: Workflow, action: Finish, actor: str, now: datetime) -> None:
    """A ``Finish``: ``completed``, or back to ``pending`` with steps handed out."""
    fire(w, action.event)
    if action.outcome is Outcome.COMPLETED:
        w.log("workflow_completed", "", actor, at=now)
        return
    count = sum(1 for s in w.steps if s.status is S.NOT_EXECUTED)
    w.log(
        "dispatch_required",
        f"{count} step(s) recorded but not executed (no dispatch configured)",
        actor,
        at=now,
    )


def fail(w: Workflow) -> None:
    """A ``Fail``: the steps still pending are skipped and the workflow is ``failed``."""
    for step in w.steps:
        if step.status is S.PENDING:
            step.status = S.SKIPPED
    fire(w, Event.FAIL)


def mark_interrupted(w: Workflow, index: int, actor: str, now: datetime) -> bool:
    """Step ``index``, left ``running`` by a run that died: ``interrupted``, the steps still
    pending ``skipped`` (as ``fail`` does), and the workflow ``failed``. False (nothing changed)
    when its run recorded the outcome just before."""
    step = w.steps[index]
    if step.status is not S.RUNNING:
        return False
    step.status = S.INTERRUPTED
    step.completed_at = now
    for other in w.steps:
        if other.status is S.PENDING:
            other.status = S.SKIPPED
    fire(w, Event.DETECT_CRASH)
    w.log(
        "interrupted_step_detected",
        f"Step {index}: {step.tool} was 'running' when a previous run died",
        actor,
        at=now,
    )
    return True
