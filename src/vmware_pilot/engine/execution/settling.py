"""Settling interrupted write steps by reading: applied, not applied, or still unknown.

A write step ends ``interrupted`` when its call timed out, its connection was lost or the Pilot
running it died: whether it took effect is unknown. ``settle`` reads the step's targets the way a
gate reads them (``engine.inspection.Reader``), vCenter's recent tasks on them
(vmware-monitor's ``list_active_tasks``, and vmware-aiops' ``get_vm_task_status`` when the step's
answer named a task id) and recent events (``get_events``) as evidence, and lets
``safety.settle.judge`` compare the state with the step's declared effect. The judgment is
stored on the step (``result.settled``: ``effect``, ``reason``, ``at``, ``evidence``) and audited
(``step_settled``); the rollback and cancel previews (``safety.blast``) read it. Without a
dispatcher (hand-back mode) Pilot cannot read: the step stays ``unknown`` with that reason.

The runner settles right after a step ends interrupted, after it marks a crashed run's step
interrupted, and lazily before a rollback or cancel preview while a step is not settled yet
(or still ``unknown``); every settlement is bounded by ``SETTLE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from vmware_pilot.dispatch.protocol import Dispatcher
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.refs import resolve_refs
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.inspection import Inspector, Reader
from vmware_pilot.engine.targets import named_objects, state_line
from vmware_pilot.errors import DispatchRefused, PilotError
from vmware_pilot.safety.settle import Settlement, expected_fields, judge
from vmware_pilot.store.protocol import Store

__all__ = [
    "SETTLED_KEY",
    "SETTLE_SECONDS",
    "crash_error",
    "needs_settling",
    "record",
    "said",
    "settle",
    "settled",
]

_log = logging.getLogger(__name__)
SETTLED_KEY: Final = "settled"
SETTLE_SECONDS: Final = 30.0
HANDBACK_REASON: Final = (
    "Pilot runs without dispatch (hand-back mode), so it cannot read the targets: check the target "
    "system, then acknowledge the unknown effect"
)
_EVIDENCE_ROWS: Final = 5
_MONITOR: Final = "monitor"
_EVENTS_MARGIN: Final = timedelta(seconds=60)  # clocks of Pilot's database and vCenter differ


def settled(step: Step) -> dict[str, Any] | None:
    """The step's stored settlement, or None."""
    found = step.result.get(SETTLED_KEY) if isinstance(step.result, Mapping) else None
    return found if isinstance(found, dict) else None


def needs_settling(step: Step) -> bool:
    """An interrupted step not settled yet, or settled ``unknown``."""
    found = settled(step)
    return step.status is StepStatus.INTERRUPTED and (found is None or found.get("effect") == "unknown")


def record(w: Workflow, index: int, entry: dict[str, Any], actor: str, now: datetime) -> None:
    """Store ``entry`` (a settlement) on step ``index`` and audit it (``step_settled``); nothing
    when the step is no longer interrupted or already says the same."""
    step = w.steps[index]
    old = settled(step)
    if step.status is not StepStatus.INTERRUPTED or (
        old is not None and (old.get("effect"), old.get("reason")) == (entry["effect"], entry["reason"])
    ):
        return
    base = dict(step.result) if isinstance(step.result, Mapping) else {}
    step.result = {**base, SETTLED_KEY: {**entry, "at": iso(now)}}
    w.log("step_settled", f"Step {index}: {step.tool} → {entry['effect']}: {entry['reason']}", actor, at=now)


def _record_now(store: Store, w: Workflow, *, index: int, entry: dict[str, Any], actor: str) -> None:
    record(w, index, entry, actor, store.now())


def _before(wf: Workflow, step: Step, params: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    """What each field held before the step, as the prediction of the gate that released it says."""
    gate = next((s for s in reversed(wf.steps[: step.index]) if s.is_gate), None)
    prediction = gate_records.stored_prediction(wf, gate.index) if gate is not None else None
    predicted = next((p for p in (prediction.steps if prediction else []) if p.step == step.index), None)
    if predicted is None:
        return {}
    if predicted.outcome == "no_change":  # already as the step leaves it, as read at the gate
        return {(e.label, e.field): e.value for e in expected_fields(step, params) or [] if e.test == "is"}
    return {(c.object, c.field): c.before for c in predicted.changes}


async def _ask(dispatcher: Dispatcher, skill: str, tool: str, args: dict[str, Any]) -> Any:
    """The answer's payload, or a string saying why there is none."""
    try:
        outcome = await dispatcher.call(skill, tool, args)
    except (PilotError, DispatchRefused) as exc:
        return f"{skill}.{tool} not read: {exc.message}"
    if not outcome.ok:
        return f"{skill}.{tool} not read: {outcome.message}"
    return outcome.payload


def _rows(payload: Any) -> list[Mapping[str, Any]]:
    items = payload.get("items") if isinstance(payload, Mapping) else payload
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []


def _trim(row: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: (str(row[k])[:300] if isinstance(row[k], str) else row[k]) for k in keys if k in row}


async def _tasks(
    dispatcher: Dispatcher, step: Step, names: set[str], target: str
) -> tuple[list[dict[str, Any]] | None, str]:
    """vCenter's recent tasks on ``names`` (None: not read, with why)."""
    where = {"target": target} if target else {}
    answer = await _ask(dispatcher, _MONITOR, "list_active_tasks", {"include_recent": True, **where})
    if isinstance(answer, str):
        return None, answer
    keys = ("name", "entity", "state", "start_time", "error")
    found = [_trim(t, keys) for t in _rows(answer) if t.get("entity") in names]
    task_id = step.result.get("task_id") if isinstance(step.result, Mapping) else None
    if isinstance(task_id, str) and task_id:
        polled = await _ask(dispatcher, "aiops", "get_vm_task_status", {"task_id": task_id, **where})
        if isinstance(polled, Mapping):
            found.insert(
                0, {"name": polled.get("operation"), **_trim(polled, ("entity", "state", "task_error"))}
            )
    return found, ""


async def _events(
    dispatcher: Dispatcher, names: set[str], target: str, since: datetime | None
) -> list[dict[str, Any]] | str:
    """vCenter's events on ``names`` since a minute before the step started (the last hour when
    that is not known): evidence, newest first."""
    where: dict[str, Any] = {"target": target} if target else {}
    window = {"start": iso(since - _EVENTS_MARGIN)} if since is not None else {"hours": 1}
    answer = await _ask(dispatcher, _MONITOR, "get_events", {"severity": "info", **window, **where})
    if isinstance(answer, str):
        return answer
    keys = ("time", "event_type", "entity_name", "message")
    return [_trim(e, keys) for e in _rows(answer) if e.get("entity_name") in names][:_EVIDENCE_ROWS]


async def _read(runner: Inspector, wf: Workflow, step: Step, may_still_land: bool) -> dict[str, Any]:
    """Read the step's targets, tasks and events, and judge: the settlement entry."""
    assert runner.dispatcher is not None
    try:
        params = resolve_refs(step.params, wf.steps, step.index)
    except PilotError as exc:
        return {"effect": "unknown", "reason": f"its parameters could not be resolved: {exc.message}"}
    params = params if isinstance(params, dict) else {}
    if not expected_fields(step, params):  # nothing declared to compare with: nothing worth reading
        said = judge(step, params, [], None)
        return {"effect": said.effect, "reason": said.reason}
    objects = named_objects(step.skill, step.tool, params)
    names = {o.name for o in objects}
    target = params.get("target") if isinstance(params.get("target"), str) else ""
    reader = Reader(runner)
    reads = [await reader.read(o) for o in objects]
    for entry in reads:
        entry["line"] = state_line(entry)
    tasks, why_no_tasks = await _tasks(runner.dispatcher, step, names, str(target or ""))
    events = await _events(runner.dispatcher, names, str(target or ""), step.started_at)
    verdict: Settlement = judge(
        step, params, reads, tasks, before=_before(wf, step, params), may_still_land=may_still_land
    )
    evidence: dict[str, Any] = {
        "read": [{k: r[k] for k in ("kind", "name", "read", "line", "error") if k in r} for r in reads],
        "compared": verdict.compared,
        "tasks": tasks[:_EVIDENCE_ROWS] if tasks is not None else why_no_tasks,
        "events": events,
    }
    return {"effect": verdict.effect, "reason": verdict.reason, "evidence": evidence}


async def settle(
    runner: Inspector, wf: Workflow, actor: Actor, indices: Sequence[int] | None, grace_seconds: float
) -> Workflow:
    """Settle the interrupted steps among ``indices`` (None: every step) that are not settled
    yet; each one's reads bounded by ``SETTLE_SECONDS``. A call sent less than ``grace_seconds``
    ago may still land: its effect not showing yet is not ``not_applied``."""
    for step in list(wf.steps):
        if (indices is not None and step.index not in indices) or not needs_settling(step):
            continue
        now = await asyncio.to_thread(runner.store.now)
        if runner.dispatcher is None:
            entry: dict[str, Any] = {"effect": "unknown", "reason": HANDBACK_REASON}
        else:
            started = step.started_at
            may_still_land = started is None or (now - started).total_seconds() < grace_seconds
            try:
                entry = await asyncio.wait_for(_read(runner, wf, step, may_still_land), SETTLE_SECONDS)
            except TimeoutError:
                entry = {
                    "effect": "unknown",
                    "reason": f"the reads did not answer within {SETTLE_SECONDS:g} s",
                }
        change = functools.partial(
            _record_now, runner.store, index=step.index, entry=entry, actor=actor.label
        )
        wf, _ = await runner.save(wf, change)
        _log.info("step %s of %s settled: %s (%s)", step.index, wf.id, entry["effect"], entry["reason"])
    return wf


def said(step: Step) -> str:
    """`` (read back: applied — …)`` for a settled step, to follow its error; ``""`` otherwise."""
    found = settled(step)
    return f" (read back: {found.get('effect')}: {found.get('reason')})" if found else ""


def crash_error(step: Step) -> str:
    """What a run that found ``step`` left running by a dead Pilot (now interrupted) says."""
    found = settled(step) or {}
    head = f"Step {step.index} ({step.skill}.{step.tool}) was interrupted by a previous crash"
    effect = found.get("effect")
    if effect in ("applied", "not_applied"):
        undo = "rollback undoes it" if effect == "applied" else "it needs no undo"
        return f"{head}; Pilot read the target system: {str(effect).replace('_', ' ')} ({found.get('reason')}); {undo}."
    why = f" ({found['reason']})" if found.get("reason") else ""
    return (
        f"{head}; whether it took effect is unknown{why}. Check the target system, then rollback with "
        "acknowledge_unknown_effects=True, or create a new workflow."
    )
