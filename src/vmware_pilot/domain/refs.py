"""Step references ``__from_step_N__`` and ``__from_step_N__:key`` (docs/contract.md#step-references).

A param value that is a string starting with ``__from_step_`` refers to an earlier step's
result. It must be the whole string. Resolution works on a copy; stored params keep the text.
``reference_problems`` is the static half of the rules, checked whenever a plan is accepted: a
reference must parse and name an earlier step (in ``rollback_params`` the step itself, too);
whether that step's result has the key is only known once it ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step
from vmware_pilot.errors import StepReferenceError

__all__ = [
    "PREFIX",
    "RefProblem",
    "StepRef",
    "find_refs",
    "is_ref",
    "parse_ref",
    "reference_problems",
    "resolve_refs",
]

PREFIX = "__from_step_"


@dataclass(frozen=True, slots=True)
class StepRef:
    index: int
    key: str | None  # None: the whole result


def is_ref(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def parse_ref(text: str) -> StepRef:
    """Parse a reference string; raise StepReferenceError when it is malformed."""
    body = text[len(PREFIX) :]
    key: str | None
    if body.endswith("__"):
        raw_index, key = body[:-2], None
    else:
        head, sep, rest = body.partition(":")
        if not sep or not head.endswith("__"):
            raise StepReferenceError(
                f"Malformed step reference {text!r}",
                hint="Write __from_step_N__ for a whole result or __from_step_N__:key for one key.",
            )
        raw_index, key = head[:-2], rest
    try:
        index = int(raw_index)
    except ValueError:
        raise StepReferenceError(
            f"Malformed step reference {text!r}: {raw_index!r} is not an integer step index",
            hint="Write __from_step_N__ with N the index of an earlier step.",
        ) from None
    return StepRef(index, key)


def find_refs(value: Any) -> Iterator[str]:
    """Every reference string inside ``value`` (dict values and list items, recursively)."""
    if is_ref(value):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from find_refs(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from find_refs(item)


@dataclass(frozen=True, slots=True)
class RefProblem:
    """A reference that can never resolve: the step holding it, where (``params.a[0]``), and why."""

    step_index: int
    field: str
    message: str


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:80] + "…")


def _ref_paths(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if is_ref(value):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            name = str(key) if len(str(key)) <= 40 else str(key)[:40] + "…"  # a path stays short
            yield from _ref_paths(item, f"{path}.{name}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _ref_paths(item, f"{path}[{i}]")


def reference_problems(
    steps: Sequence[Step], *, skip: Callable[[str], bool] | None = None
) -> list[RefProblem]:
    """Every reference in ``steps`` that is malformed or does not name an earlier step, in step order.

    ``skip``: references to leave unchecked (a template's, before its placeholders are filled)."""
    out: list[RefProblem] = []
    for step in steps:
        for field, own in (("params", False), ("rollback_params", True)):
            bound = step.index + 1 if own else step.index
            for path, text in _ref_paths(getattr(step, field), field):
                if skip is not None and skip(text):
                    continue
                where = f"Step {step.index}: {path} is {_shown(text)}"
                try:
                    ref = parse_ref(text)
                except StepReferenceError as exc:
                    out.append(
                        RefProblem(step.index, path, f"{where}, a malformed step reference ({exc.hint})")
                    )
                    continue
                if not 0 <= ref.index < len(steps):
                    out.append(
                        RefProblem(
                            step.index,
                            path,
                            f"{where}, a reference to step {ref.index}, but the plan has steps "
                            f"0..{len(steps) - 1}",
                        )
                    )
                elif ref.index >= bound:
                    which = "a later step" if own else "this step or a later one"
                    out.append(
                        RefProblem(
                            step.index,
                            path,
                            f"{where}, a reference to {which} (step {ref.index}): a step can only use "
                            "results of steps before it",
                        )
                    )
    return out


def _lookup(text: str, steps: Sequence[Step], bound: int) -> Any:
    ref = parse_ref(text)
    if ref.index < 0 or ref.index >= len(steps):
        raise StepReferenceError(
            f"{text!r} points to step {ref.index}, but this workflow has steps 0..{len(steps) - 1}",
            hint="Fix the index in the step's params.",
        )
    if ref.index >= bound:
        raise StepReferenceError(
            f"{text!r} is a forward/self reference: step {ref.index} has not run before this one",
            hint="A step may only use results of steps before it.",
        )
    source = steps[ref.index]
    if source.status is StepStatus.REPORTED_DONE:
        raise StepReferenceError(
            f"{text!r} refers to step {ref.index}, which was performed outside Pilot: Pilot never "
            "saw its result",
            hint="Pass the value yourself, or create a new workflow; do not rerun that step.",
        )
    if source.status is not StepStatus.SUCCESS:
        raise StepReferenceError(
            f"{text!r} refers to step {ref.index}, whose status is '{source.status.value}', not 'success'",
            hint="Only results of steps Pilot ran successfully can be referenced.",
        )
    if ref.key is None:
        return source.result
    if not isinstance(source.result, dict):
        raise StepReferenceError(
            f"{text!r} asks for key {ref.key!r}, but step {ref.index}'s result is a "
            f"{type(source.result).__name__}, not an object",
            hint=f"Use the keyless form __from_step_{ref.index}__ for the whole result.",
        )
    if ref.key not in source.result:
        keys = ", ".join(sorted(str(k) for k in source.result)[:12])
        raise StepReferenceError(
            f"{text!r}: step {ref.index}'s result has no key {ref.key!r} (keys: {keys})",
            hint="Pick one of the listed keys.",
        )
    return source.result[ref.key]


def resolve_refs(value: Any, steps: Sequence[Step], bound: int) -> Any:
    """A copy of ``value`` with every reference replaced; only steps below ``bound`` may be used."""
    if is_ref(value):
        return _lookup(value, steps, bound)
    if isinstance(value, dict):
        return {k: resolve_refs(v, steps, bound) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_refs(v, steps, bound) for v in value]
    return value
