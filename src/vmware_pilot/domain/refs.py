"""Step references ``__from_step_N__`` and ``__from_step_N__:key`` (reference §5.4).

A param value that is a string starting with ``__from_step_`` refers to an earlier step's
result. It must be the whole string. Resolution works on a copy; stored params keep the text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step
from vmware_pilot.errors import StepReferenceError

__all__ = ["PREFIX", "StepRef", "find_refs", "is_ref", "parse_ref", "resolve_refs"]

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
