"""Settling an interrupted write step: was its declared effect applied, not applied, or unknown?

``judge`` is pure (no I/O): it compares the state Pilot read after the interruption (the gate's
reads, ``engine.inspection``) with what the step's declared effect leaves (``catalog.effects``),
and looks at vCenter's recent tasks on the step's objects. ``applied``: every field the effect
sets reads as the step leaves it (and was not so already before the step). ``not_applied``: none
does, no task on the objects is still running, and the call can no longer land. ``unknown``
otherwise, with the reason: no declared effect, a read that failed, a task still in progress, a
state that matches only in part, or a call that may still land.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from vmware_pilot.catalog.effects import Setting, ValueSpec, When, effect_of
from vmware_pilot.domain.model import Step

__all__ = ["ACTIVE_TASK_STATES", "Expected", "Settlement", "expected_fields", "judge", "world_of"]

Effect = Literal["applied", "not_applied", "unknown"]
ACTIVE_TASK_STATES: Final = frozenset({"queued", "running"})
# Fields that follow another one (VMware Tools stop with the power-off): never judged alone.
_FOLLOWERS: Final = frozenset({"tools_status"})
_MISSING: Final = object()


@dataclass(frozen=True)
class Expected:
    """One field the step's effect sets: on which object (``key``: kind|target|name), what the
    step leaves there (``test``: ``is`` a value, ``contains`` or ``lacks`` an item)."""

    key: str
    label: str
    field: str
    test: Literal["is", "contains", "lacks"]
    value: Any


@dataclass(frozen=True)
class Settlement:
    effect: Effect
    reason: str
    compared: list[dict[str, Any]] = field(default_factory=list)


def _param(params: Mapping[str, Any], name: str, default: Any = None) -> Any:
    value = params.get(name)
    return default if value is None else value


def _applies(when: When | None, params: Mapping[str, Any]) -> bool:
    return when is None or _param(params, when.param, when.default) == when.is_


def _value(spec: Any, params: Mapping[str, Any]) -> Any:
    if not isinstance(spec, ValueSpec):
        return spec
    value = _param(params, spec.param, spec.default)
    return _MISSING if value is None else spec.mapped(value)


def _label(kind: str, name: str) -> str:
    return name if kind == "vm" else f"{kind} {name}"


def expected_fields(step: Step, params: Mapping[str, Any]) -> list[Expected] | None:
    """What the step's declared effect leaves, field by field (its resolved ``params``); None when
    ``step.tool`` has no declared effect."""
    effect = effect_of(step.skill, step.tool)
    if effect is None:
        return None
    target = params.get("target")
    where = target if isinstance(target, str) else ""
    out: list[Expected] = []
    for setting in effect.sets:
        alias, _, name = setting.field.partition(".")
        if setting.how == "unknown" or name in _FOLLOWERS or not _applies(setting.when, params):
            continue
        ref = effect.objects[alias]
        raw = params.get(ref.param)
        for obj in raw if isinstance(raw, list) else [raw]:
            if not isinstance(obj, str) or not obj.strip():
                continue
            value, test = _wanted(setting, params)
            if value is _MISSING:
                continue
            key = f"{ref.kind}|{where}|{obj.strip()}"
            out.append(Expected(key, _label(ref.kind, obj.strip()), name, test, value))
    return out


def _wanted(setting: Setting, params: Mapping[str, Any]) -> tuple[Any, Literal["is", "contains", "lacks"]]:
    if setting.how == "to":
        return _value(setting.to, params), "is"
    if setting.how == "add":
        return _value(setting.add, params), "contains"
    return _value(setting.remove, params), "lacks"


def world_of(reads: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any] | str]:
    """The objects as read (the gate's read entries): per key, its fields (``exists`` included),
    or why the read failed."""
    out: dict[str, dict[str, Any] | str] = {}
    for t in reads:
        key = f"{t.get('kind') or 'vm'}|{t.get('target') or ''}|{t.get('name') or ''}"
        if t.get("read") == "ok":
            fields: dict[str, Any] = {"exists": True, **dict(t.get("summary") or {})}
            if "snapshots" in t and not str(t.get("error", "")).startswith("snapshots not read"):
                fields["snapshots"] = list(t.get("snapshots") or [])
            out[key] = fields
        elif t.get("read") == "not_found":
            out[key] = {"exists": False}
        else:
            out[key] = str(t.get("error") or "no answer")
    return out


def _holds(test: str, actual: Any, value: Any) -> bool | None:
    if actual is _MISSING:
        return None
    if test == "is":
        return bool(actual == value)
    if not isinstance(actual, list):
        return None
    return (value in actual) if test == "contains" else (value not in actual)


def _text(value: Any) -> str:
    if value is _MISSING:
        return "not read"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return "none" if value is None or value == "" else str(value)


def _task_line(task: Mapping[str, Any]) -> str:
    error = f" ({task['error']})" if task.get("error") else ""
    return f"task {task.get('name') or '?'} on {task.get('entity') or '?'} {task.get('state') or '?'}{error}"


def judge(
    step: Step,
    params: Mapping[str, Any],
    reads: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]] | None,
    *,
    before: Mapping[tuple[str, str], Any] | None = None,
    may_still_land: bool = False,
) -> Settlement:
    """Whether interrupted ``step`` (its resolved ``params``) took effect, from ``reads`` (the
    objects as read now), ``tasks`` (vCenter's recent tasks on them; None: not read), ``before``
    (``(object label, field)`` → its value before the step, from the gate's prediction, where
    known) and ``may_still_land`` (the call was sent so recently that it may still arrive)."""
    wanted = expected_fields(step, params)
    if wanted is None:
        return Settlement(
            "unknown", f"Pilot has no declared effect for {step.skill}.{step.tool} to compare the state with"
        )
    if not wanted:
        return Settlement("unknown", f"{step.tool} declares no field Pilot reads that it would change")
    world = world_of(reads)
    compared: list[dict[str, Any]] = []
    results: list[bool | None] = []
    for e in wanted:
        fields = world.get(e.key)
        if fields is None or isinstance(fields, str):
            why = fields if isinstance(fields, str) else "it was not read"
            return Settlement("unknown", f"{e.label} could not be read: {why}", compared)
        actual = fields.get(e.field, _MISSING) if e.field == "exists" or fields.get("exists") else None
        ok = _holds(e.test, actual, e.value)
        compared.append(
            {
                "object": e.label,
                "field": e.field,
                "expected": e.value,
                "found": None if actual is _MISSING else actual,
            }
        )
        results.append(ok)
    if any(ok is None for ok in results):
        missing = [
            c["object"] + " " + c["field"] for c, ok in zip(compared, results, strict=True) if ok is None
        ]
        return Settlement("unknown", f"the read does not say {', '.join(missing)}", compared)
    busy = [t for t in tasks or [] if str(t.get("state")) in ACTIVE_TASK_STATES or t.get("active") is True]
    if busy:
        return Settlement("unknown", f"{_task_line(busy[0])}: the step may still take effect", compared)
    now = "; ".join(f"{c['object']} {c['field']} is {_text(c['found'])}" for c in compared)
    if all(results):
        if before and all(
            (c["object"], c["field"]) in before and before[(c["object"], c["field"])] == c["found"]
            for c in compared
        ):
            return Settlement(
                "not_applied",
                f"{now}, as it already was before the step (as read at the gate): nothing changed, "
                "nothing to undo",
                compared,
            )
        done = next((t for t in tasks or [] if t.get("state") == "success"), None)
        seen = f"; {_task_line(done)}" if done is not None else ""
        return Settlement("applied", f"{now}, as {step.tool} leaves it{seen}", compared)
    if any(results):
        return Settlement("unknown", f"only part of the effect is in place: {now}", compared)
    if may_still_land:
        return Settlement(
            "unknown",
            f"{now}: not applied yet, but the call was sent moments ago and may still land; "
            "Pilot reads again before a rollback or cancel",
            compared,
        )
    if tasks is None:
        return Settlement(
            "unknown",
            f"{now}, but vCenter's tasks could not be read to rule out one still in progress",
            compared,
        )
    failed = next((t for t in tasks if t.get("state") == "error"), None)
    why = _task_line(failed) if failed is not None else "no task on it in progress"
    return Settlement("not_applied", f"{now}, not as {step.tool} would leave it; {why}", compared)
