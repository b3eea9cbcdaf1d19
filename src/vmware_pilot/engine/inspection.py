"""Inspecting a gate before a person is shown it: the targets' state now and the skills' previews.

When Pilot can dispatch, ``inspect_gate`` reads the current state of every object the released
steps name, through the companion read tools ``engine.targets`` lists kind by kind (a VM through
vmware-monitor's ``get_vm_info`` and ``list_vm_snapshots``; hosts, datastores, clusters, networks,
NSX segments… through theirs), and calls each released write step once as a preview: only a
tool whose input schema declares ``confirm`` is called, always with ``confirm: false``; any
other tool would act, so it is not called and the view says there is no preview. A read that
fails is recorded as failed. Each object's state when the gate was first shown for the current
plan digest is kept as its reference, and ``engine.drift`` says plainly what differs from it.
The result is stored in ``wf.inspections`` (``domain.records.Inspection``, outside the plan
digest) and an audit event ``gate_inspected`` records what was read, as evidence of what the
approver saw: once per distinct reading (the SHA-256 of what it says, kept as the record's ``reading``), not per look.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.protocol import Dispatcher, OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.records import Inspection, Reference
from vmware_pilot.domain.refs import resolve_refs
from vmware_pilot.engine.acknowledge import with_echo
from vmware_pilot.engine.drift import changes
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.gateview import summarize_result
from vmware_pilot.engine.secrets import find_masked_secrets, resolve_secret_refs
from vmware_pilot.engine.targets import (
    Named,
    TargetKind,
    find_item,
    kind_of,
    named_objects,
    state_line,
    summary_of,
)
from vmware_pilot.errors import PilotError
from vmware_pilot.results import Prediction
from vmware_pilot.safety.classify import classify_step
from vmware_pilot.safety.predict import predict, verdict_key, with_rehearsal
from vmware_pilot.store.protocol import Store
from vmware_pilot.twin.rehearse import Rehearser

__all__ = ["Inspector", "Reader", "inspect_gate", "state_line"]

T = TypeVar("T")

MONITOR: Final = "monitor"
_PAYLOAD_MAX: Final = 8000
_AUDIT_MAX: Final = 1500
_NOT_FOUND: Final = ("not found", "does not exist", "no such")
# The reference fields kept per object (engine.drift compares them).
_KEPT: Final = ("read", "summary", "snapshots", "stable_id")


class Inspector(Protocol):
    """What an inspection uses (``engine.execution.runner.Runner`` is one): the store (its clock),
    the dispatcher and catalog, a step's call, and a save of a change."""

    store: Store

    @property
    def dispatcher(self) -> Dispatcher | None: ...

    @property
    def catalog(self) -> Catalog: ...

    async def call_step(
        self, wf: Workflow, index: int, *, bound: int, reverse: bool = False, preview: bool = False
    ) -> StepOutcome: ...

    async def save(self, wf: Workflow, change: Callable[[Workflow], T]) -> tuple[Workflow, T]: ...


def _first_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= 300 else line[:299] + "…"


def _snapshot_names(payload: Any) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            if isinstance(value.get("name"), str) and (
                "created" in value or "create_time" in value or "id" in value
            ):
                found.append(value["name"])
            for child in value.values():
                walk(child)
        elif isinstance(value, list):
            for child in value:
                walk(child)

    if isinstance(payload, Mapping):
        payload = next((payload[k] for k in ("snapshots", "items") if k in payload), payload)
    walk(payload)
    return found


def _error_of(outcome: StepOutcome) -> str:
    error = outcome.payload.get("error") if isinstance(outcome.payload, Mapping) else None
    return _first_line(str(error or outcome.message or "the read failed"))


class Reader:
    """The reads of one inspection (or of one drift check, engine/execution/drift_check.py); a list
    read serves every object of its kind and target."""

    def __init__(self, runner: Inspector) -> None:
        assert runner.dispatcher is not None
        self.dispatcher = runner.dispatcher
        self._lists: dict[tuple[str, str, str], StepOutcome | str] = {}

    async def call(self, skill: str, tool: str, args: dict[str, Any]) -> StepOutcome | str:
        """The outcome, or the refusal's message when the call could not be made."""
        try:
            return await self.dispatcher.call(skill, tool, args)
        except PilotError as exc:
            return _first_line(exc.message)

    async def listing(self, row: TargetKind, target: str) -> StepOutcome | str:
        key = (row.read_skill, row.read_tool, target)
        if key not in self._lists:
            args = {"target": target} if target and row.takes_target else {}
            self._lists[key] = await self.call(row.read_skill, row.read_tool, args)
        return self._lists[key]

    async def read(self, named: Named) -> dict[str, Any]:
        row = kind_of(named.kind)
        entry: dict[str, Any] = {"kind": named.kind, "name": named.name, "target": named.target}
        where = {"target": named.target} if named.target and row.takes_target else {}
        if row.locate == "list":
            answer = await self.listing(row, named.target)
            if isinstance(answer, str) or not answer.ok:
                error = answer if isinstance(answer, str) else _error_of(answer)
                return {**entry, "read": "failed", "error": error}
            found = find_item(answer.payload, row.key, named.name)
            if found is None:
                return {**entry, "read": "failed", "error": f"{row.read_tool} answered without a list"}
            item, truncated = found
            if item is None:
                if truncated:
                    return {**entry, "read": "failed", "error": f"{row.read_tool} cut its list short"}
                return {**entry, "read": "not_found"}
            data: Mapping[str, Any] = item
        else:
            answer = await self.call(row.read_skill, row.read_tool, {row.key: named.name, **where})
            if isinstance(answer, str):
                return {**entry, "read": "failed", "error": answer}
            if not answer.ok or not isinstance(answer.payload, Mapping):
                error = _error_of(answer)
                # Not found only when the answer names the object: "target 'x' not found" is a failure.
                gone = named.name in error and any(word in error.lower() for word in _NOT_FOUND)
                return {**entry, "read": "not_found"} if gone else {**entry, "read": "failed", "error": error}
            data = answer.payload
        entry.update(read="ok", summary=summary_of(row, data))
        if named.kind == "vm" and isinstance(data.get("tools_status"), str):
            entry["tools_status"] = data["tools_status"]
        if row.stable and data.get(row.stable):
            entry["stable_id"] = str(data[row.stable])
        if named.kind == "vm":
            await self._vm_extras(entry, where)
        return entry

    async def _vm_extras(self, entry: dict[str, Any], where: dict[str, str]) -> None:
        summary = entry["summary"]
        entry.update(
            power_state=str(summary.get("power_state") or ""),
            cpu=summary.get("cpu") if isinstance(summary.get("cpu"), int) else None,
            memory_mb=summary.get("memory_mb") if isinstance(summary.get("memory_mb"), int) else None,
            host=str(summary.get("host") or ""),
        )
        snaps = await self.call(MONITOR, "list_vm_snapshots", {"vm_name": entry["name"], **where})
        if isinstance(snaps, str) or not snaps.ok:
            entry["snapshots"] = []
            entry["error"] = f"snapshots not read: {snaps if isinstance(snaps, str) else _error_of(snaps)}"
        else:
            entry["snapshots"] = _snapshot_names(snaps.payload)

    async def renamed_to(self, named: Named, stable_id: str) -> str:
        """The name the object now has, found by a field that survives a rename ("" if not)."""
        row = kind_of(named.kind)
        if not stable_id or not row.stable:
            return ""
        where = {"target": named.target} if named.target else {}
        if named.kind == "vm":
            answer = await self.call(MONITOR, "list_virtual_machines", {"fields": ["name", "uuid"], **where})
        elif row.locate == "list":
            answer = await self.listing(row, named.target)
        else:
            return ""
        if isinstance(answer, str) or not answer.ok:
            return ""
        item, _ = find_item(answer.payload, row.stable, stable_id) or (None, False)
        name = str(item.get(row.key if row.locate == "list" else "name", "")) if item else ""
        return name if name and name != named.name else ""


def _preview_summary(outcome: StepOutcome) -> tuple[str, str, list[str]]:
    payload = outcome.payload
    radius = payload.get("blast_radius") if isinstance(payload, Mapping) else None
    source = radius if isinstance(radius, Mapping) else payload if isinstance(payload, Mapping) else {}
    blockers = [str(b) for b in source.get("blockers") or [] if b] if isinstance(source, Mapping) else []
    if outcome.kind in (OutcomeKind.FAILED, OutcomeKind.EFFECT_UNKNOWN):
        return "failed", _first_line(outcome.message or summarize_result(payload)), blockers
    if isinstance(source, Mapping) and source.get("effect"):
        text = str(source["effect"])
        if source.get("mode"):
            text = f"{source['mode']}: {text}"
    else:
        text = summarize_result(payload)
    if blockers:
        return "refused", _first_line(f"The skill would refuse: {blockers[0]}"), blockers
    return "previewed", _first_line(text), blockers


async def _schema(runner: Inspector, catalog: Catalog, skill: str, tool: str) -> dict[str, Any] | None:
    """The tool's input schema: asked of the skill's running server, else the catalog's copy."""
    ask = getattr(runner.dispatcher, "tool_schema", None)
    if ask is not None:
        try:
            schema = await ask(skill, tool)
        except PilotError:
            schema = None
        if isinstance(schema, dict):
            return schema
    info = catalog.tool(skill, tool)
    return info.input_schema if info is not None else None


async def _preview(runner: Inspector, wf: Workflow, step: Step, catalog: Catalog) -> dict[str, Any]:
    if classify_step(step, catalog)[0] == "read":
        return {
            "status": "no_preview",
            "summary": "A read: it changes nothing, so there is nothing to preview.",
        }
    schema = await _schema(runner, catalog, step.skill, step.tool)
    if schema is None:
        return {
            "status": "no_preview",
            "summary": f"No preview: Pilot could not learn the input schema of {step.skill}.{step.tool}, "
            "so it did not call it.",
        }
    if "confirm" not in (schema.get("properties") or {}):
        return {
            "status": "no_preview",
            "summary": f"No preview: {step.skill}.{step.tool} has no confirm parameter, so any call "
            "would act; Pilot did not call it.",
        }
    outcome = await runner.call_step(wf, step.index, bound=step.index, preview=True)
    status, summary, blockers = _preview_summary(outcome)
    payload = outcome.payload
    if len(json.dumps(payload, default=str)) > _PAYLOAD_MAX:
        payload = None
    return {"status": status, "summary": summary, "blockers": blockers, "payload": payload}


def _params_for(step: Step, steps: Sequence[Step], preview: Any = None) -> dict[str, Any] | str:
    """A released step's params for its rehearsal on a twin, or why it cannot be rehearsed; a
    confirmed step gets what its skill asks echoed from ``preview`` (the gate's, ``acknowledge``)."""
    try:
        params = resolve_refs(step.params, steps, step.index)
    except PilotError as exc:
        return f"its parameters use results not known ({_first_line(exc.message)})"
    if find_masked_secrets(params):
        return "it needs a secret Pilot keeps masked"
    resolved = resolve_secret_refs(params, os.environ)
    if not isinstance(resolved, dict):
        return "its parameters are not an object"
    return with_echo(step.skill, step.tool, resolved, preview)


async def _rehearsed(
    twin: Rehearser | None, wf: Workflow, gate: int, reads: Mapping[str, Any], prediction: Prediction
) -> Prediction:
    """The prediction with the released steps rehearsed on a twin (``twin.rehearse``) when one is
    wanted, on a twin given what the gate just read (``reads``: its targets and previews)."""
    if twin is None:
        return prediction
    previews = reads.get("previews")
    previews = previews if isinstance(previews, Mapping) else {}
    record = await twin.rehearse(
        gate_records.steps_to_run(wf, gate),
        wf.steps,
        reads,
        lambda step, steps: _params_for(step, steps, previews.get(str(step.index))),
    )
    return with_rehearsal(prediction, record, required=twin.settings.mode == "required")


def _rehearsal_detail(gate: int, prediction: Prediction) -> str:
    r = prediction.rehearsal
    assert r is not None
    capture = r.capture
    steps = "; ".join(f"step {s.get('step')} {s.get('outcome')}: {s.get('answer', '')}" for s in r.steps)
    text = (
        f"Gate at step {gate} rehearsed on a twin: {r.verdict}"
        + (f" ({r.reason})" if r.reason else "")
        + (
            f"; capture {capture.get('id')} of {capture.get('vcenter')} taken {capture.get('at')}"
            f" ({capture.get('age_hours')} h old{', stale' if capture.get('stale') else ''})"
            if capture
            else ""
        )
        + (f" | {steps}" if steps else "")
        + (f" | {len(r.diff)} change(s) on the twin" if r.status == "rehearsed" else "")
        + f" | digest {r.digest}"
    )
    return text if len(text) <= _AUDIT_MAX else text[: _AUDIT_MAX - 1] + "…"


def _reference(earlier: Inspection | None, digest: str) -> Reference:
    """The objects' reference states kept for the plan as it stands (reset when its digest changed)."""
    kept = earlier.reference if earlier else None
    if kept is not None and kept.digest == digest:
        return Reference(digest=digest, targets=dict(kept.targets))
    return Reference(digest=digest, targets={})


async def inspect_gate(runner: Inspector, wf: Workflow, actor: Actor) -> Workflow:
    """Read the targets of the pending gate's released steps and preview its write steps; store
    the result on the workflow and audit it. Does nothing without a dispatcher or a pending gate."""
    gate = gate_records.pending_gate(wf)
    if runner.dispatcher is None or gate is None:
        return wf
    catalog = runner.catalog
    reference = _reference(
        gate_records.inspection_of(wf, gate.index), gate_records.plan_digest(wf, gate.index)
    )
    named: dict[str, list[str]] = {}
    wanted: dict[str, tuple[Named, list[str], list[str]]] = {}
    previews: dict[str, dict[str, Any]] = {}
    for step in gate_records.steps_to_run(wf, gate.index):
        try:
            params = resolve_refs(step.params, wf.steps, step.index)
        except PilotError as exc:
            previews[str(step.index)] = {
                "status": "not_run",
                "summary": f"No preview: its parameters use results not known yet ({_first_line(exc.message)}).",
            }
            continue
        objects = named_objects(step.skill, step.tool, params) if isinstance(params, Mapping) else []
        named[str(step.index)] = [o.name for o in objects]
        for obj in objects:
            _, tools, creators = wanted.setdefault(obj.key, (obj, [], []))
            tools.append(step.tool)
            if obj.creates:
                creators.append(step.tool)
        previews[str(step.index)] = await _preview(runner, wf, step, catalog)
    reader = Reader(runner)
    now = await asyncio.to_thread(runner.store.now)
    targets = []
    for obj, tools, creators in wanted.values():
        entry = await reader.read(obj)
        base = reference.targets.get(obj.key)
        renamed = ""
        if entry["read"] == "not_found" and isinstance(base, dict) and base.get("stable_id"):
            renamed = await reader.renamed_to(obj, str(base["stable_id"]))
        entry["changes"] = changes(entry, tools, creators, base, renamed)
        if entry["read"] == "not_found" and creators:
            entry["note"] = f"does not exist yet ({creators[0]} creates it)"
        if not isinstance(base, dict) or base.get("read") not in ("ok", "not_found"):
            if entry["read"] in ("ok", "not_found"):
                kept: dict[str, Any] = {k: entry[k] for k in _KEPT if k in entry}
                reference.targets[obj.key] = {"at": iso(now), **kept}
            base = reference.targets.get(obj.key)
        entry["reference_at"] = str((base or {}).get("at", ""))
        entry["line"] = state_line(entry)
        targets.append(entry)
    record = Inspection(at=now, targets=targets, previews=previews, named=named, reference=reference)
    prediction = predict(gate_records.steps_to_run(wf, gate.index), wf.steps, record, catalog)
    prediction = await _rehearsed(
        getattr(runner, "twin", None), wf, gate.index, {"targets": targets, "previews": previews}, prediction
    )
    record.prediction = {**prediction.model_dump(mode="json"), "at": iso(now)}
    lines = [
        prediction.summary,
        *(t["line"] + ("" if not t["changes"] else f" [{'; '.join(t['changes'])}]") for t in targets),
    ]
    lines += [f"step {i} preview {p['status']}: {p['summary']}" for i, p in previews.items()]
    detail = f"Gate at step {gate.index}: " + (" | ".join(lines) or "no targets named, nothing to preview")
    detail = detail if len(detail) <= _AUDIT_MAX else detail[: _AUDIT_MAX - 1] + "…"
    index = gate.index
    # One audit event (and one rehearsal event) per distinct reading: a page shown again with the
    # same state, previews, prediction and rehearsal adds none (the record's time still moves on).
    rehearsed = _rehearsal_detail(gate.index, prediction) if prediction.rehearsal is not None else ""
    record.reading = hashlib.sha256(f"{detail}\n{rehearsed}".encode()).hexdigest()

    def store(w: Workflow) -> None:
        before = w.inspections.get(index)
        w.inspections[index] = record
        if before is None or before.reading != record.reading:
            w.log("gate_inspected", detail, actor.label)
            if rehearsed:
                w.log("gate_rehearsed", rehearsed, actor.label)
        voided = gate_records.void_approvals(w, index, verdict_key(record.prediction))
        if voided:
            w.log(
                "approvals_voided",
                f"The prediction of the gate at step {index} changed ({prediction.verdict}): the "
                f"approvals by {', '.join(voided)} were given for another prediction and no longer count",
                actor.label,
                names=tuple(voided),
            )

    wf, _ = await runner.save(wf, store)
    return wf
