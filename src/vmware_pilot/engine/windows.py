"""The window gate: a write step outside its change window, or inside a blackout, is not sent.

The policy's ``windows`` (policy/model.py) say when write and destructive steps on some targets
may run. Right before Pilot sends a write step, ``window_check`` (a pre-write check,
engine/execution/holds.py) judges the step on the database's clock (``Store.now``): closed, the
step is held and the run waits at the gate that released it, which says why and when it may go
on (the next opening, ``resumes_at``). The sweeper (engine/sweeper.py) continues the
run on its own once the window opens. Before that, a person holding one of the roles or
identity-provider groups the closed windows name (``approvers``) may approve the gate as an
exception (``exception_refusal`` refuses anyone else); the steps that gate releases then run
although the window is closed. Reads are never held. Without dispatch Pilot sends nothing: the
handed-out step tells the agent the window is its own to keep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.execution.holds import Hold, PreWriteCheck, WriteContext, hold_of, releasing_gate
from vmware_pilot.engine.guard import subject_of
from vmware_pilot.errors import StateRefused
from vmware_pilot.policy.model import Policy, Window, applicable_windows, is_open, next_opening
from vmware_pilot.safety.classify import classify_step

__all__ = [
    "EVENT",
    "KIND",
    "closed_windows",
    "exception_refusal",
    "ungated_refusal",
    "window_check",
]

KIND: Final = "window"
EVENT: Final = "outside_change_window"


def closed_windows(policy: Policy, step: Step, catalog: Catalog, now: datetime) -> list[Window] | None:
    """The windows that keep ``step`` from running at ``now`` (the blackouts in force, or the
    change windows it falls under, none of them open); None when it may run."""
    subject = subject_of(step, catalog)
    governing = applicable_windows(policy.windows, subject)
    if is_open(governing, subject, now):
        return None
    blackouts = [w for w in governing if w.blackout and w.active(now)]
    return blackouts or [w for w in governing if not w.blackout]


def _approvers(windows: list[Window]) -> list[str]:
    return sorted({a for w in windows for a in w.approvers})


def _excepted(wf: Workflow, index: int) -> bool:
    """Step ``index`` runs by an exception: the gate that released it was held by a window and
    then approved (by the roles the window names, ``exception_refusal``)."""
    gate = releasing_gate(wf, index)
    if gate is None or gate.status is not StepStatus.SUCCESS:
        return False
    record = gate_records.gate_record(wf, gate.index)
    held = hold_of(record)
    return held is not None and held.kind == KIND and record is not None and bool(record.approvals)


def _closed_now(
    policy: Policy, step: Step, catalog: Catalog, now: datetime
) -> tuple[str, datetime | None, list[Window]] | None:
    """(why the step may not run: "is outside the change window 'x'", its next opening, the
    windows keeping it) when the policy's windows keep it from running at ``now``."""
    closed = closed_windows(policy, step, catalog, now)
    if closed is None:
        return None
    names = ", ".join(f"'{w.name}'" for w in closed)
    why = "inside the blackout" if closed[0].blackout else "outside the change window"
    opening = next_opening(policy.windows, subject_of(step, catalog), now)
    return f"Step {step.index} ({step.skill}.{step.tool}) is {why} {names} of the policy", opening, closed


def _hold(policy: Policy, wf: Workflow, index: int, catalog: Catalog, now: datetime) -> Hold | None:
    found = _closed_now(policy, wf.steps[index], catalog, now)
    if found is None or _excepted(wf, index):
        return None
    why, opening, closed = found
    when = (
        f"It may run from {iso(opening)}; the run goes on by itself then"
        if opening is not None
        else "No opening of the window is known: it does not run by itself"
    )
    approvers = _approvers(closed)
    exception = (
        f" An exception may be approved by {', '.join(approvers)}."
        if approvers
        else " The window names nobody who may approve an exception."
    )
    return Hold(
        kind=KIND,
        event=EVENT,
        message=f"{why}. {when}.{exception}",
        details={
            "windows": [w.name for w in closed],
            "blackout": closed[0].blackout,
            "next_opening": iso(opening) if opening is not None else None,
            "approvers": approvers,
            "judged_at": iso(now),
        },
        resumes_at=opening,
    )


def window_check(policy: Callable[[], Policy]) -> PreWriteCheck:
    """The pre-write check of the windows of ``policy()`` (the policy in force)."""

    async def run(ctx: WriteContext) -> Hold | None:
        current = policy()
        if not current.windows:
            return None
        now = await asyncio.to_thread(ctx.runner.store.now)
        return _hold(current, ctx.wf, ctx.index, ctx.runner.catalog, now)

    def handed_out(wf: Workflow, index: int, catalog: Catalog) -> str:
        current = policy()
        subject = subject_of(wf.steps[index], catalog)
        governing = applicable_windows(current.windows, subject)
        if not governing:
            return ""
        names = ", ".join(f"'{w.name}'" for w in governing)
        return f"The policy's windows {names} govern this step: perform it only while they allow it."

    return PreWriteCheck(KIND, run, handed_out)


def exception_refusal(
    policy: Policy, wf: Workflow, gate: Step, actor: Actor, catalog: Catalog, now: datetime
) -> StateRefused | None:
    """Why ``actor`` may not approve ``gate`` now, held by a window: only the roles or groups the
    closed windows name approve an exception (None: not such a gate, the window is open now,
    or ``actor`` holds one)."""
    held = hold_of(gate_records.gate_record(wf, gate.index))
    if held is None or held.kind != KIND or gate.status is not StepStatus.PENDING:
        return None
    index = held.step
    if not 0 <= index < len(wf.steps):
        return None
    closed = closed_windows(policy, wf.steps[index], catalog, now)
    if closed is None:
        return None
    approvers = _approvers(closed)
    if {actor.role, *actor.groups} & set(approvers):
        return None
    opening = iso(held.resumes_at)
    return StateRefused(
        f"Refusing to approve an exception to the policy's window(s) "
        f"{', '.join(repr(w.name) for w in closed)} for workflow '{wf.id}' (gate at step {gate.index}): "
        + (
            f"only {', '.join(approvers)} may, and {actor.label} holds "
            f"{', '.join(sorted({actor.role, *actor.groups})) or 'no role'}"
            if approvers
            else "the window names nobody who may"
        ),
        hint=(f"The run goes on by itself at {opening}. " if opening else "")
        + "Ask someone holding one of those roles, or wait for the window.",
        workflow_id=wf.id,
        state=wf.state.value,
        refused="window_exception",
        approvers=approvers,
        next_opening=opening or None,
    )


def ungated_refusal(policy: Policy, wf: Workflow, catalog: Catalog, now: datetime) -> StateRefused | None:
    """The refusal of a run whose next write, with no gate before it to wait at, a window holds
    now (nothing changed: better than a run failed for the day of the week); None otherwise."""
    if not policy.windows:
        return None
    for step in wf.steps:
        if step.status not in (StepStatus.PENDING, StepStatus.NOT_EXECUTED):
            continue
        if step.is_gate:
            return None  # the walk stops at this gate first
        if classify_step(step, catalog)[0].value == "read":
            continue
        if releasing_gate(wf, step.index) is not None:
            return None  # it can wait at that gate
        found = _closed_now(policy, step, catalog, now)
        if found is None:
            return None
        why, opening, _ = found
        when = f"it may run from {iso(opening)}" if opening is not None else "no opening is known"
        return StateRefused(
            f"Refusing to run workflow '{wf.id}': {why}, and no approval gate comes before it to wait "
            f"at ({when}). Nothing was changed",
            hint="Run it once the window allows it, or add a require_approval step before the write "
            "so the run waits at it and goes on by itself.",
            workflow_id=wf.id,
            state=wf.state.value,
            refused=EVENT,
            step_index=step.index,
            next_opening=iso(opening) if opening is not None else None,
        )
    return None
