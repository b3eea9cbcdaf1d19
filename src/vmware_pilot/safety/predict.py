"""Predicting what approving a gate does: the released steps walked in order from the state read
at the gate, each with an outcome, a reason and the changes it makes, and one verdict.

``predict`` is pure: it takes the released steps, the workflow's steps (for step references),
the gate's inspection record (``engine.inspection``: the targets as read and the skills'
previews) and the catalog, and keeps the predicted state of every object as it walks. A write
step's effect comes from the declared data (``catalog.effects``); a tool with no declared effect
is ``unknown``. The skill's own preview decides while it still speaks of the state the step will
meet (no earlier released step changed a field the step's precondition reads): a refusal there
is ``refused`` in the skill's words. A step after the first failing one is not reached. Verdict: ``fails`` (the
first failing step, its reason and what the steps before it already changed), else ``unknown``
(which steps cannot be predicted), else ``succeeds``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from vmware_pilot.catalog.effects import Condition, Effect, Setting, ValueSpec, When, effect_of
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.model import Step
from vmware_pilot.domain.records import Inspection
from vmware_pilot.domain.refs import find_refs, is_ref, parse_ref, resolve_refs
from vmware_pilot.errors import PilotError
from vmware_pilot.results import PredictedChange, PredictedStep, Prediction, Rehearsal
from vmware_pilot.safety.classify import classify_step

__all__ = [
    "NOT_REACHED",
    "Drifted",
    "Expected",
    "depends_on",
    "drifted",
    "expected_before",
    "object_label",
    "predict",
    "verdict_key",
    "with_rehearsal",
]

_UNKNOWN: Final = object()  # a field whose value is not known
# How the reason of a step after the first failing one begins.
NOT_REACHED: Final = "Not reached"
_WORDS: Final = {"poweredOn": "powered on", "poweredOff": "powered off", "suspended": "suspended"}
# Fields that follow another one (VMware Tools stop with the power-off), left out of the verdict's
# "approving leaves …" sentence; the steps' changes still list them.
_QUIET: Final = frozenset({"tools_status"})
_REFUSALS: Final = ("refused", "failed")


@dataclass(frozen=True)
class _Pending:
    """A parameter that carries a released step's result, not known before that step runs."""

    text: str


@dataclass
class _World:
    """The predicted state: per object key, its fields (``exists`` included) or None (not read),
    and per field the step that last set it (absent: as read at the gate)."""

    state: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    set_by: dict[tuple[str, str], int] = field(default_factory=dict)
    why_not_read: dict[str, str] = field(default_factory=dict)
    # Why nothing was read at all (hand-back mode, not inspected yet), said with every unknown step.
    note: str = ""

    def get(self, key: str, name: str) -> Any:
        fields = self.state.get(key)
        if fields is None:
            return _UNKNOWN
        if name == "exists":
            return fields.get("exists", _UNKNOWN)
        if fields.get("exists") is False:
            return None  # a missing object has no fields
        return fields.get(name, _UNKNOWN)


def object_label(kind: str, name: str) -> str:
    """``DC0_H0_VM0`` for a VM, ``host DC0_H0`` for the other kinds (as the state lines say)."""
    return name if kind == "vm" else f"{kind} {name}"


def _key(kind: str, target: str, name: str) -> str:
    return f"{kind}|{target}|{name}"


def _shown(value: Any) -> Any:
    if value is _UNKNOWN:
        return None
    if isinstance(value, _Pending):
        return value.text
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


def _text(value: Any) -> str:
    if value is _UNKNOWN:
        return "not known"
    if isinstance(value, _Pending):
        return value.text
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value) or "none"
    if value is None or value == "":
        return "none"
    return str(value)


def _world(targets: Sequence[Mapping[str, Any]], note: str) -> _World:
    """The targets' state as read (the gate's inspection shape)."""
    world = _World(note=note)
    for t in targets:
        key = _key(str(t.get("kind") or "vm"), str(t.get("target") or ""), str(t.get("name") or ""))
        read = t.get("read")
        if read == "ok":
            fields: dict[str, Any] = {"exists": True}
            summary = t.get("summary")
            if isinstance(summary, Mapping):
                fields.update(summary)
            if (t.get("kind") or "vm") == "vm":
                if "snapshots" in t and not str(t.get("error", "")).startswith("snapshots not read"):
                    fields["snapshots"] = list(t.get("snapshots") or [])
                if t.get("tools_status"):
                    fields["tools_status"] = str(t["tools_status"])
            world.state[key] = fields
        elif read == "not_found":
            world.state[key] = {"exists": False}
        else:
            world.state[key] = None
            world.why_not_read[key] = f"its read failed ({t.get('error') or 'no answer'})"
    return world


def _carried(text: str, steps: Sequence[Step]) -> str:
    try:
        ref = parse_ref(text)
    except PilotError:
        return text
    tool = f" ({steps[ref.index].skill}.{steps[ref.index].tool})" if 0 <= ref.index < len(steps) else ""
    what = f"the {ref.key} of" if ref.key else "the whole result of"
    return f"{what} step {ref.index}'s result{tool}"


def _params(step: Step, steps: Sequence[Step]) -> dict[str, Any]:
    """The step's params with references to steps that ran resolved, and the others as ``_Pending``."""
    out: dict[str, Any] = {}
    for name, value in step.params.items():
        refs = list(find_refs(value))
        if not refs:
            out[name] = value
            continue
        try:
            out[name] = resolve_refs(value, steps, step.index)
        except PilotError:
            out[name] = _Pending(_carried(refs[0], steps) if is_ref(value) else f"a value from {refs[0]}")
    return out


def _param(params: Mapping[str, Any], name: str, default: Any = None) -> Any:
    value = params.get(name)
    return default if value is None else value


def _value(spec: Any, params: Mapping[str, Any]) -> Any:
    """A declared value: a literal, or a step parameter (None when the step leaves it out and no
    default is declared)."""
    if not isinstance(spec, ValueSpec):
        return spec
    value = _param(params, spec.param, spec.default)
    if isinstance(value, _Pending) or value is None:
        return value
    return spec.mapped(value)


def _applies(when: When | None, params: Mapping[str, Any]) -> bool | None:
    if when is None:
        return True
    value = _param(params, when.param, when.default)
    return None if isinstance(value, _Pending) else value == when.is_


@dataclass(frozen=True)
class _Obj:
    alias: str
    kind: str
    name: str
    key: str


def _objects(effect: Effect, params: Mapping[str, Any]) -> tuple[list[_Obj], str]:
    """The objects the step names, or why they are not known (a parameter carrying a result)."""
    target = params.get("target")
    where = target if isinstance(target, str) else ""
    found: list[_Obj] = []
    for alias, ref in effect.objects.items():
        value = params.get(ref.param)
        if isinstance(value, _Pending):
            return [], f"it names its {ref.kind} through {value.text}, which is not known before it runs"
        for name in value if isinstance(value, list) else [value]:
            if isinstance(name, _Pending):
                return [], f"it names a {ref.kind} through {name.text}, not known before it runs"
            if isinstance(name, str) and name.strip():
                found.append(_Obj(alias, ref.kind, name.strip(), _key(ref.kind, where, name.strip())))
    return found, ""


def _check(
    cond: Condition, objs: list[_Obj], params: Mapping[str, Any], world: _World
) -> list[tuple[bool | None, str, _Obj | None, Any]]:
    """Each object's result of ``cond``: True, False or None (not known), the field, the object,
    and the value met."""
    applies = _applies(cond.when, params)
    if applies is False:
        return []
    expected = _value(cond.expected(), params)
    if cond.param:
        actual = _param(params, cond.param)
        unknown = applies is None or isinstance(actual, _Pending) or isinstance(expected, _Pending)
        return [(None if unknown else _holds(cond.test, actual, expected), cond.param, None, actual)]
    alias, _, name = cond.field.partition(".")
    out: list[tuple[bool | None, str, _Obj | None, Any]] = []
    for obj in (o for o in objs if o.alias == alias):
        actual = world.get(obj.key, name)
        unknown = applies is None or actual is _UNKNOWN or isinstance(expected, _Pending)
        out.append((None if unknown else _holds(cond.test, actual, expected), name, obj, actual))
    return out


def _holds(test: str, actual: Any, expected: Any) -> bool:
    if test == "is":
        return bool(actual == expected)
    if test == "is_not":
        return bool(actual != expected)
    if test == "one_of":
        return actual in (expected or [])
    items = actual if isinstance(actual, list) else []
    return (expected in items) if test == "contains" else (expected not in items)


def _where(world: _World, obj: _Obj, name: str) -> str:
    index = world.set_by.get((obj.key, name))
    return "as read at the gate" if index is None else f"after step {index}"


def _need(tool: str, cond: Condition, name: str, expected: Any) -> str:
    if cond.says:
        return cond.says
    if name == "exists":
        return f"{tool} needs it to exist" if expected else f"{tool} creates it, so it must not exist yet"
    single = name[:-1] if name.endswith("s") else name
    return {
        "is": f"{tool} needs {name} {_text(expected)}",
        "is_not": f"{tool} needs {name} other than {_text(expected)}",
        "one_of": f"{tool} needs {name} one of {_text(expected)}",
        "contains": f"{tool} needs {single} {_text(expected)}",
        "lacks": f"{tool} needs no {single} {_text(expected)}",
    }[cond.test]


def _failure(
    tool: str, cond: Condition, obj: _Obj | None, name: str, actual: Any, expected: Any, world: _World
) -> str:
    need = _need(tool, cond, name, expected)
    if obj is None:
        return f"{need}."
    label = object_label(obj.kind, obj.name)
    what = label if obj.kind != "vm" else f"VM {label}"
    when = _where(world, obj, name)
    if name == "exists":
        fact = f"{what} does not exist ({when})" if actual is False else f"{what} exists already ({when})"
    elif cond.test in ("contains", "lacks"):
        has = "has" if cond.test == "lacks" else "has no"
        fact = f"{what} {has} {name[:-1] if name.endswith('s') else name} {_text(expected)} ({when})"
    else:
        fact = f"{what} {name} is {_text(actual)} ({when})"
    return f"{fact}: {need}."


def _apply(
    setting: Setting, objs: list[_Obj], params: Mapping[str, Any], world: _World, index: int
) -> list[PredictedChange]:
    applies = _applies(setting.when, params)
    if applies is False:
        return []
    alias, _, name = setting.field.partition(".")
    changes: list[PredictedChange] = []
    for obj in (o for o in objs if o.alias == alias):
        before = world.get(obj.key, name)
        if setting.how == "unknown" or applies is None:
            after: Any = _UNKNOWN
        elif setting.how == "to":
            after = _value(setting.to, params)
            if after is None and isinstance(setting.to, ValueSpec):
                continue  # the step leaves this parameter out: the field is untouched
        else:
            item = _value(setting.add if setting.how == "add" else setting.remove, params)
            if item is None:
                continue
            if before is _UNKNOWN or not isinstance(before, list):
                after = _UNKNOWN
            elif isinstance(item, _Pending) and setting.how == "remove":
                after = _UNKNOWN  # which item goes is known only when the step runs
            elif setting.how == "add":
                after = [*before, item] if item not in before else list(before)
            else:
                after = [x for x in before if x != item]
        fields = world.state.get(obj.key)
        if fields is None:
            fields = world.state[obj.key] = {}
        if name == "exists" and after is False:
            world.state[obj.key] = {"exists": False}
        elif name == "exists" and after is True and fields.get("exists") is not True:
            world.state[obj.key] = {"exists": True}
        else:
            fields[name] = after
        world.set_by[(obj.key, name)] = index
        if (before is _UNKNOWN and after is _UNKNOWN) or (before is not _UNKNOWN and before == after):
            continue
        changes.append(
            PredictedChange(
                object=object_label(obj.kind, obj.name),
                field=name,
                before=_shown(before),
                after=_shown(after),
            )
        )
    return changes


def _preview_of(inspection: Inspection | None, step: Step) -> Mapping[str, Any] | None:
    return inspection.previews.get(str(step.index)) if inspection else None


def _refusal_outcome(preview: Mapping[str, Any]) -> Literal["refused", "fails"]:
    """A preview the skill refused is ``refused``; one whose call failed (not found, an error) ``fails``."""
    return "refused" if preview.get("status") == "refused" else "fails"


def _skill_words(skill: str, preview: Mapping[str, Any]) -> str:
    blockers = [str(b) for b in preview.get("blockers") or [] if b]
    if preview.get("status") == "refused" and blockers:
        return f"{skill} refuses it: {blockers[0]}"
    return f"the preview by {skill} failed: {preview.get('summary') or 'no answer'}"


def _nothing_to_do(
    tool: str, effect: Effect, objs: list[_Obj], params: Mapping[str, Any], world: _World
) -> str:
    if not effect.nothing_to_do:
        return ""
    facts: list[str] = []
    for cond in effect.nothing_to_do:
        results = _check(cond, objs, params, world)
        if not results or any(ok is not True for ok, *_ in results):
            return ""
        for _, name, obj, actual in results:
            if obj is not None:
                what = f"VM {obj.name}" if obj.kind == "vm" else object_label(obj.kind, obj.name)
                index = world.set_by.get((obj.key, name))
                if index is None:
                    facts.append(f"{what} is {_text(actual)} already (as read at the gate)")
                else:
                    facts.append(f"step {index} leaves {what} {_text(actual)}")
    return f"Nothing to do: {'; '.join(facts) or 'already as it would leave it'}, so {tool} would change nothing."


def _made(
    base: Mapping[str, Any], outcome: str, reason: str, changes: Sequence[PredictedChange] = ()
) -> PredictedStep:
    """A predicted step, its keys in the contract's order (step, skill, tool, outcome, reason, changes)."""
    return PredictedStep.model_validate(
        {**base, "outcome": outcome, "reason": reason, "changes": list(changes), "source": "model"}
    )


def _step(
    step: Step, steps: Sequence[Step], inspection: Inspection | None, catalog: Catalog, world: _World
) -> PredictedStep:
    base: dict[str, Any] = {"step": step.index, "skill": step.skill, "tool": step.tool}
    if classify_step(step, catalog)[0].value == "read":
        return _made(base, "succeeds", reason="A read: it changes nothing.")
    params = _params(step, steps)
    effect = effect_of(step.skill, step.tool)
    preview = _preview_of(inspection, step)
    if effect is None:
        if preview is not None and preview.get("status") in _REFUSALS and not world.set_by:
            # Nothing before it changed anything: the preview saw the state it will meet.
            return _made(base, _refusal_outcome(preview), reason=_skill_words(step.skill, preview))
        return _made(
            base,
            "unknown",
            reason=f"Pilot has no declared effect for {step.skill}.{step.tool}, so it does not guess what it does.",
        )
    objs, pending = _objects(effect, params)
    if pending:
        return _made(base, "unknown", reason=f"Not predictable before it runs: {pending}.")
    # The preview speaks of the state the step will meet while no earlier step changed a field
    # its precondition reads.
    reads = {
        (o.key, c.field.partition(".")[2])
        for c in effect.requires
        if c.field
        for o in objs
        if o.alias == c.field.partition(".")[0]
    }
    fresh = preview is not None and not reads & set(world.set_by)
    if fresh and preview is not None and preview.get("status") in _REFUSALS:
        return _made(base, _refusal_outcome(preview), reason=_skill_words(step.skill, preview))
    # Already as the step would leave it: the skills answer a no-op before checking the rest.
    idle = _nothing_to_do(step.tool, effect, objs, params, world)
    if idle:
        return _made(base, "no_change", reason=idle)
    unknown: dict[str, tuple[list[str], str]] = {}
    for cond in effect.requires:
        for ok, name, obj, actual in _check(cond, objs, params, world):
            expected = _value(cond.expected(), params)
            if ok is False:
                return _made(
                    base,
                    "fails",
                    reason=_failure(step.tool, cond, obj, name, actual, expected, world),
                )
            if ok is None:
                label = object_label(obj.kind, obj.name) if obj else f"parameter {name}"
                why = world.why_not_read.get(obj.key, "") if obj else ""
                if not why:
                    why = "it was not read" if obj is None or obj.key not in world.state else "not known"
                    if obj is not None and (obj.key, name) in world.set_by:
                        why = f"step {world.set_by[(obj.key, name)]} leaves it not known"
                fields, _ = unknown.setdefault(label, ([], why))
                if obj is None or world.state.get(obj.key) is not None:
                    fields.append(name)  # a field of an object read; an object not read is said whole
    said = "; ".join(
        f"{label}{' ' + ', '.join(dict.fromkeys(f)) if f else ''} ({why})"
        for label, (f, why) in unknown.items()
    )
    clean = fresh and preview is not None and preview.get("status") == "previewed"
    if unknown and not clean:
        note = world.note
        return _made(
            base,
            "unknown",
            reason=f"Its precondition cannot be checked: {said}" + (f". {note}." if note else "."),
        )
    changes: list[PredictedChange] = []
    for setting in effect.sets:
        changes += _apply(setting, objs, params, world, step.index)
    parts = [f"{c.object} {c.field} {_text(c.before)} → {_text(c.after)}" for c in changes]
    reason = ("Changes " + "; ".join(parts)) if parts else "Changes nothing the gate reads"
    if effect.untracked:
        reason += f"; also changes {effect.untracked}, which Pilot does not read"
    if clean and unknown:
        reason += f" (the skill's preview found no blocker for what Pilot could not read: {said})"
    return _made(base, "succeeds", reason + ".", changes)


def _leaves(steps: Sequence[PredictedStep]) -> str:
    last: dict[tuple[str, str], Any] = {}
    for s in steps:
        for c in s.changes:
            last[(c.object, c.field)] = c.after
    gone = {obj for (obj, name), after in last.items() if name == "exists" and after is False}
    parts = []
    for (obj, name), after in last.items():
        if name in _QUIET or (obj in gone and name != "exists"):
            continue
        if name == "power_state" and isinstance(after, str):
            parts.append(f"{obj} {_WORDS.get(after, after)}")
        elif name == "exists":
            parts.append(f"{obj} {'created' if after else 'deleted'}")
        else:
            parts.append(f"{obj} {name} {_text(after if after is not None else _UNKNOWN)}")
    return ", ".join(parts)


def verdict_key(prediction: Prediction | Mapping[str, Any] | None) -> str:
    """What an approval binds to: the verdict and each step's outcome (not the wording)."""
    if prediction is None:
        return ""
    data = prediction if isinstance(prediction, Mapping) else prediction.model_dump()
    steps = data.get("steps") or []
    outcomes = ",".join(f"{s.get('step')}:{s.get('outcome')}" for s in steps if isinstance(s, Mapping))
    rehearsal = data.get("rehearsal")
    rehearsed = f"|rehearsal:{rehearsal.get('digest', '')}" if isinstance(rehearsal, Mapping) else ""
    return f"{data.get('verdict', '')}|{outcomes}{rehearsed}"


def predict(
    released: Sequence[Step],
    steps: Sequence[Step],
    inspection: Inspection | None,
    catalog: Catalog,
    *,
    note: str = "",
) -> Prediction:
    """The prediction for a gate releasing ``released`` (``steps``: the whole workflow, for step
    references; ``inspection``: the gate's last inspection, None when nothing was read; ``note``:
    why the state is not known, said with every step that needs it)."""
    world = _world(inspection.targets if inspection else [], note)
    out: list[PredictedStep] = []
    stop: PredictedStep | None = None
    for step in released:
        if stop is not None:
            out.append(
                _made(
                    {"step": step.index, "skill": step.skill, "tool": step.tool},
                    "unknown",
                    f"{NOT_REACHED}: the run stops at step {stop.step}.",
                )
            )
            continue
        predicted = _step(step, steps, inspection, catalog, world)
        out.append(predicted)
        if predicted.outcome in ("fails", "refused"):
            stop = predicted
    return _conclude(out)


def _conclude(out: list[PredictedStep]) -> Prediction:
    """The verdict of predicted steps: the first failing one, else the unknown ones, else success."""
    stop = next((s for s in out if s.outcome in ("fails", "refused")), None)
    if stop is not None:
        before = [s for s in out if s.step < stop.step]
        leaves = _leaves(before)
        said = stop.reason if stop.reason.endswith(".") else stop.reason + "."
        summary = f"FAILS at step {stop.step} ({stop.skill}.{stop.tool}): {said}" + (
            f" Approving leaves {leaves}." if leaves else " Nothing is changed before it."
        )
        return Prediction(verdict="fails", summary=summary, failing_step=stop.step, leaves=leaves, steps=out)
    unknown = [s for s in out if s.outcome == "unknown"]
    if unknown:
        which = "; ".join(f"step {s.step} ({s.skill}.{s.tool}): {s.reason}" for s in unknown)
        return Prediction(verdict="unknown", summary=f"UNKNOWN: cannot predict {which}", steps=out)
    leaves = _leaves(out)
    summary = "SUCCEEDS: " + (
        f"approving leaves {leaves}." if leaves else "no step changes what the gate reads."
    )
    return Prediction(verdict="succeeds", summary=summary, leaves=leaves, steps=out)


# --- the drift check: the state a write step was approved against, and what moved since -------
@dataclass(frozen=True)
class Expected:
    """A field a write step depends on, as the prediction leaves it just before that step: as
    read at the gate (``set_by`` None) or as released step ``set_by`` leaves it."""

    kind: str
    name: str
    target: str
    field: str
    value: Any
    set_by: int | None

    @property
    def key(self) -> str:
        return _key(self.kind, self.target, self.name)

    @property
    def label(self) -> str:
        return object_label(self.kind, self.name)


@dataclass(frozen=True)
class Drifted:
    """A field that is not what the prediction expected: ``saw`` (expected, in the state's own
    words) and ``now`` (as read again)."""

    expected: Expected
    now: Any

    def payload(self) -> dict[str, Any]:
        return {
            "object": self.expected.label,
            "field": self.expected.field,
            "approved": _shown(self.expected.value),
            "now": _shown(self.now),
            "set_by": self.expected.set_by,
        }


def _fields(effect: Effect, params: Mapping[str, Any]) -> list[str]:
    """The ``alias.field`` names a step's effect reads or sets, in declaration order: its
    precondition (conditions that apply to these params), its no-op test and its settings (but
    one it leaves unknown: what the step leaves there does not hang on what it found)."""
    named = [
        c.field
        for c in (*effect.requires, *effect.nothing_to_do)
        if c.field and _applies(c.when, params) is not False
    ]
    named += [s.field for s in effect.sets if s.how != "unknown" and _applies(s.when, params) is not False]
    return list(dict.fromkeys(named))


def depends_on(step: Step, steps: Sequence[Step], catalog: Catalog) -> list[tuple[str, list[str]]]:
    """What write ``step`` depends on: per object it names (its label), the fields of its
    declared effect; empty for a read or a tool with no declared effect."""
    if classify_step(step, catalog)[0].value == "read":
        return []
    effect = effect_of(step.skill, step.tool)
    if effect is None:
        return []
    params = _params(step, steps)
    objs, pending = _objects(effect, params)
    if pending:
        return []
    names = _fields(effect, params)
    out: dict[str, list[str]] = {}
    for obj in objs:
        fields = [n.partition(".")[2] for n in names if n.partition(".")[0] == obj.alias]
        out.setdefault(object_label(obj.kind, obj.name), []).extend(f for f in fields if f)
    return [(label, list(dict.fromkeys(fields))) for label, fields in out.items()]


def expected_before(
    index: int,
    walked: Sequence[Step],
    steps: Sequence[Step],
    inspection: Inspection | None,
    catalog: Catalog,
) -> list[Expected]:
    """The fields write step ``index`` depends on (its declared precondition, no-op test and
    settings), as the gate's prediction leaves them just before it: the state ``inspection``
    read, changed by the declared effects of the ``walked`` steps before it (the released steps
    the prediction walked; they ran, so their effects apply whatever was predicted). A field not
    known there (not read, an effect Pilot cannot tell) is left out: nothing to compare."""
    step = steps[index]
    effect = effect_of(step.skill, step.tool)
    if inspection is None or effect is None or classify_step(step, catalog)[0].value == "read":
        return []
    world = _world(inspection.targets if inspection else [], "")
    for earlier in walked:
        if earlier.index >= index:
            break
        declared = effect_of(earlier.skill, earlier.tool)
        if declared is None or classify_step(earlier, catalog)[0].value == "read":
            continue
        params = _params(earlier, steps)
        objs, pending = _objects(declared, params)
        for setting in () if pending else declared.sets:
            _apply(setting, objs, params, world, earlier.index)
    params = _params(step, steps)
    objs, pending = _objects(effect, params)
    if pending:
        return []
    target = params.get("target")
    where = target if isinstance(target, str) else ""
    out: list[Expected] = []
    for name in _fields(effect, params):
        alias, _, field_name = name.partition(".")
        for obj in (o for o in objs if o.alias == alias):
            value = world.get(obj.key, field_name)
            if value is _UNKNOWN or isinstance(value, _Pending) or _has_unknown(value):
                continue
            if field_name != "exists" and world.get(obj.key, "exists") is False:
                continue  # a missing object has no fields: its existence is compared
            out.append(
                Expected(
                    obj.kind, obj.name, where, field_name, value, world.set_by.get((obj.key, field_name))
                )
            )
    return out


def _has_unknown(value: Any) -> bool:
    return isinstance(value, list) and any(v is _UNKNOWN or isinstance(v, _Pending) for v in value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return sorted(map(str, a)) == sorted(map(str, b))  # the order a skill lists them in is noise
    return bool(a == b)


def drifted(expected: Sequence[Expected], targets: Sequence[Mapping[str, Any]]) -> list[Drifted]:
    """The expected fields that differ in ``targets`` (the objects read again, in the gate's
    inspection shape). A field the new read does not give (a failed read, a field it lacks) is
    not compared; when an object's existence moved, its other fields are not listed."""
    now = _world(targets, "")
    out: list[Drifted] = []
    gone: set[str] = set()
    for e in expected:
        if e.key in gone:
            continue
        actual = now.get(e.key, e.field)
        if actual is _UNKNOWN or _same(actual, e.value):
            continue
        if e.field == "exists":
            gone.add(e.key)
            out = [d for d in out if d.expected.key != e.key]
        out.append(Drifted(e, actual))
    return out


_GOOD: Final = frozenset({"succeeds", "no_change"})
_BAD: Final = frozenset({"fails", "refused"})


def _agrees(model: str, rehearsed: str) -> bool:
    return model == "unknown" or (
        (model in _GOOD) == (rehearsed in _GOOD) and (model in _BAD) == (rehearsed in _BAD)
    )


def with_rehearsal(
    prediction: Prediction, rehearsal: Mapping[str, Any] | None, *, required: bool = False
) -> Prediction:
    """The prediction with a rehearsal's outcomes (``twin.rehearse``) taken for the steps it ran
    (``source: rehearsal``), the verdict drawn again, and where model and rehearsal disagree said.
    ``required``: a rehearsal that could not run makes an otherwise predicted verdict ``unknown``."""
    if rehearsal is None:
        return prediction
    ran = {
        s.get("step"): s
        for s in rehearsal.get("steps") or []
        if isinstance(s, Mapping) and s.get("outcome") in ("succeeds", "refused", "fails", "not_reached")
    }
    stop = next((s.get("step") for s in ran.values() if s.get("outcome") in _BAD), None)
    steps: list[PredictedStep] = []
    disagreements: list[str] = []
    for s in prediction.steps:
        r = ran.get(s.step)
        if r is None:
            steps.append(s)
            continue
        base = {"step": s.step, "skill": s.skill, "tool": s.tool}
        said = str(r.get("answer") or "no answer")
        if r["outcome"] == "not_reached":
            outcome, reason, changes = (
                "unknown",
                f"{NOT_REACHED} on the twin: the rehearsal stopped at step {stop}.",
                [],
            )
        else:
            outcome = (
                "no_change" if r["outcome"] == "succeeds" and s.outcome == "no_change" else str(r["outcome"])
            )
            reason = f"On the twin, {s.skill} answered: {said}"
            changes = list(s.changes) if outcome == "succeeds" and s.outcome == "succeeds" else []
            if not _agrees(s.outcome, outcome) and not s.reason.startswith(NOT_REACHED):
                disagreements.append(
                    f"step {s.step} ({s.skill}.{s.tool}): the model predicted {s.outcome.replace('_', ' ')}, "
                    f"the rehearsal {outcome.replace('_', ' ')} ({said})"
                )
        steps.append(
            PredictedStep.model_validate(
                {**base, "outcome": outcome, "reason": reason, "changes": changes, "source": "rehearsal"}
            )
        )
    merged = _conclude(steps)
    summary = merged.summary
    if rehearsal.get("status") != "rehearsed":
        why = str(rehearsal.get("reason") or "no reason given")
        if required and merged.verdict != "fails":
            merged = Prediction(verdict="unknown", steps=merged.steps)
            summary = f"UNKNOWN: the rehearsal on a twin (VMWARE_PILOT_TWIN=required) could not run: {why}."
        else:
            summary += f" Not rehearsed on a twin: {why}."
    else:
        capture = rehearsal.get("capture") or {}
        summary += f" Rehearsed on a twin of {capture.get('target', '?')} ({rehearsal.get('verdict')})."
        if rehearsal.get("verdict") == "unknown" and rehearsal.get("reason"):
            summary += f" {rehearsal['reason']}."
    if disagreements:
        summary += " The rehearsal disagrees with the model: " + "; ".join(disagreements) + "."
    if (rehearsal.get("capture") or {}).get("stale"):
        summary += f" The capture is {rehearsal['capture'].get('age_hours')} h old: stale."
    view = Rehearsal.model_validate({**rehearsal, "disagreements": disagreements})
    # Rebuilt, not copied: a result is written back with the keys it was built with.
    data = {**merged.model_dump(mode="json"), "summary": summary}
    if prediction.at:
        data["at"] = prediction.at
    return Prediction.model_validate({**data, "rehearsal": view.model_dump(mode="json")})
