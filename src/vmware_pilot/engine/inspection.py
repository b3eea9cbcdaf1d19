"""Inspecting a gate before a person is shown it: the targets' state now and the skills' previews.

When Pilot can dispatch, ``inspect_gate`` reads the current state of every VM the released steps
name (vmware-monitor's ``get_vm_info`` and ``list_vm_snapshots``: power state, CPU and memory,
host, snapshots) and calls each released write step once as a preview: only a tool whose input
schema declares ``confirm`` is called, always with ``confirm: false``; any other tool would act,
so it is not called and the view says there is no preview. A read that fails is recorded as
failed. The result is stored in ``wf.extra["gate_inspections"]`` (outside the plan digest) and
an audit event ``gate_inspected`` records what was read, as evidence of what the approver saw.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import iso, utcnow
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.refs import resolve_refs
from vmware_pilot.engine import gates
from vmware_pilot.engine.gateview import summarize_result
from vmware_pilot.errors import PilotError
from vmware_pilot.safety.classify import classify_step

if TYPE_CHECKING:
    from vmware_pilot.engine.runner import Runner

__all__ = ["VM_KEYS", "inspect_gate", "state_line"]

VM_KEYS: Final = ("vm_name",)
MONITOR: Final = "monitor"
_PAYLOAD_MAX: Final = 8000
_AUDIT_MAX: Final = 1500
# What a tool does to a VM's power state, to say plainly when it would have nothing to do.
_BRINGS_ABOUT: Final = {
    "power_off_vm": ("poweredOff", "already powered off"),
    "shutdown_vm": ("poweredOff", "already powered off"),
    "power_on_vm": ("poweredOn", "already powered on"),
    "suspend_vm": ("suspended", "already suspended"),
}
_COMPARED: Final = ("power_state", "host", "cpu", "memory_mb", "snapshots")


def _first_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= 300 else line[:299] + "…"


def _named_vms(params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(vm name, target) pairs a step's resolved params name."""
    target = params.get("target")
    where = target if isinstance(target, str) else ""
    return [(str(params[k]), where) for k in VM_KEYS if isinstance(params.get(k), str) and params[k]]


def state_line(t: Mapping[str, Any]) -> str:
    """``DC0_H0_VM0: poweredOn, 1 vCPU, 32 MB, host DC0_H0, snapshot baseline`` (or why unknown)."""
    name = t.get("name", "")
    if t.get("read") == "failed":
        return f"{name}: read FAILED ({t.get('error', '')})"
    if t.get("read") != "ok":
        return f"{name}: state not known"
    parts = [str(t.get("power_state") or "power state unknown")]
    if t.get("cpu") is not None:
        parts.append(f"{t['cpu']} vCPU")
    if t.get("memory_mb") is not None:
        parts.append(f"{t['memory_mb']} MB")
    if t.get("host"):
        parts.append(f"host {t['host']}")
    snaps = list(t.get("snapshots") or [])
    parts.append(f"snapshot{'s' if len(snaps) != 1 else ''} {', '.join(snaps)}" if snaps else "no snapshots")
    return f"{name}: {', '.join(parts)}"


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


async def _read_vm(runner: Runner, name: str, target: str) -> dict[str, Any]:
    assert runner.dispatcher is not None
    args = {"vm_name": name, **({"target": target} if target else {})}
    entry: dict[str, Any] = {"kind": "vm", "name": name, "target": target}
    try:
        info = await runner.dispatcher.call(MONITOR, "get_vm_info", args)
    except PilotError as exc:
        return {**entry, "read": "failed", "error": _first_line(exc.message)}
    if not info.ok or not isinstance(info.payload, Mapping):
        error = info.payload.get("error") if isinstance(info.payload, Mapping) else None
        return {**entry, "read": "failed", "error": _first_line(str(error or info.message))}
    data = info.payload
    entry.update(
        read="ok",
        power_state=str(data.get("power_state") or ""),
        cpu=data.get("cpu") if isinstance(data.get("cpu"), int) else None,
        memory_mb=data.get("memory_mb") if isinstance(data.get("memory_mb"), int) else None,
        host=str(data.get("host") or ""),
    )
    try:
        snaps = await runner.dispatcher.call(MONITOR, "list_vm_snapshots", args)
        entry["snapshots"] = _snapshot_names(snaps.payload) if snaps.ok else []
        if not snaps.ok:
            entry["error"] = f"snapshots not read: {_first_line(snaps.message)}"
    except PilotError as exc:
        entry["error"] = f"snapshots not read: {_first_line(exc.message)}"
    return entry


def _changes(
    entry: dict[str, Any], tools: list[str], earlier: Mapping[str, Any] | None, since: str
) -> list[str]:
    out: list[str] = []
    if entry.get("read") == "failed" and "not found" in str(entry.get("error", "")).lower():
        out.append("NOT FOUND: the VM is gone or was renamed since the plan was made")
    for tool in tools:
        wanted = _BRINGS_ABOUT.get(tool)
        if wanted and entry.get("power_state") == wanted[0]:
            out.append(f"{wanted[1]}: {tool} would have nothing to do")
    if earlier and earlier.get("read") == "ok" and entry.get("read") == "ok":
        moved = [
            f"{key} {earlier.get(key)} → {entry.get(key)}"
            for key in _COMPARED
            if earlier.get(key) != entry.get(key)
        ]
        if moved:
            out.append(f"changed since it was first shown at {since}: {'; '.join(moved)}")
    return out


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


async def _schema(runner: Runner, catalog: Catalog, skill: str, tool: str) -> dict[str, Any] | None:
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


async def _preview(runner: Runner, wf: Workflow, step: Step, catalog: Catalog) -> dict[str, Any]:
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


async def inspect_gate(runner: Runner, wf: Workflow, actor: Actor) -> Workflow:
    """Read the targets of the pending gate's released steps and preview its write steps; store
    the result on the workflow and audit it. Does nothing without a dispatcher or a pending gate."""
    gate = gates.pending_gate(wf)
    if runner.dispatcher is None or gate is None:
        return wf
    catalog = runner.catalog
    earlier = gates.inspection_of(wf, gate.index) or {}
    first = earlier.get("first") if isinstance(earlier.get("first"), dict) else None
    baseline = first or ({"at": earlier.get("at"), "targets": earlier.get("targets")} if earlier else None)
    named: dict[str, list[str]] = {}
    wanted: dict[tuple[str, str], list[str]] = {}
    previews: dict[str, dict[str, Any]] = {}
    for step in gates.released_steps(wf, gate.index):
        try:
            params = resolve_refs(step.params, wf.steps, step.index)
        except PilotError as exc:
            previews[str(step.index)] = {
                "status": "not_run",
                "summary": f"No preview: its parameters use results not known yet ({_first_line(exc.message)}).",
            }
            continue
        vms = _named_vms(params) if isinstance(params, Mapping) else []
        named[str(step.index)] = [name for name, _ in vms]
        for key in vms:
            wanted.setdefault(key, []).append(step.tool)
        previews[str(step.index)] = await _preview(runner, wf, step, catalog)
    old = {
        (str(t.get("name")), str(t.get("target", ""))): t
        for t in (baseline or {}).get("targets") or []
        if isinstance(t, dict)
    }
    since = str((baseline or {}).get("at", ""))
    targets = []
    for (name, target), tools in wanted.items():
        entry = await _read_vm(runner, name, target)
        entry["changes"] = _changes(entry, tools, old.get((name, target)), since)
        entry["line"] = state_line(entry)
        targets.append(entry)
    now = iso(utcnow())
    record: dict[str, Any] = {"at": now, "targets": targets, "previews": previews, "named": named}
    record["first"] = baseline or {"at": now, "targets": targets}
    lines = [t["line"] + ("" if not t["changes"] else f" [{'; '.join(t['changes'])}]") for t in targets]
    lines += [f"step {i} preview {p['status']}: {p['summary']}" for i, p in previews.items()]
    detail = f"Gate at step {gate.index}: " + (" | ".join(lines) or "no targets named, nothing to preview")
    detail = detail if len(detail) <= _AUDIT_MAX else detail[: _AUDIT_MAX - 1] + "…"
    index = gate.index

    def store(w: Workflow) -> None:
        records = w.extra.get(gates.INSPECTIONS_KEY)
        records = records if isinstance(records, dict) else {}
        records[str(index)] = record
        w.extra[gates.INSPECTIONS_KEY] = records
        w.log("gate_inspected", detail, actor.label)

    wf, _ = await runner.save(wf, store)
    return wf
