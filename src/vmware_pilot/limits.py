"""Limits on what a caller may send, checked before any work starts.

One request (a JSON-RPC message: a stdio line or an HTTP body) is at most ``MAX_REQUEST_BYTES``.
Inside a tool call's arguments: at most ``MAX_STEPS`` steps, ``MAX_DEPTH`` levels of nested
objects and arrays, ``MAX_STRING`` characters in any string (object keys included) and
``MAX_LIST`` items in any array or members in any object. ``check_arguments`` walks the
arguments once, iteratively (no recursion however deep the input), and refuses the first value
over a limit with ``ArgumentError`` (an ``InvalidInput``) naming the field (``steps[3].params.note``) and the limit.
Strings must also be storable text: no NUL character and no lone UTF-16 surrogate (neither can
be written to the database or encoded as UTF-8). The README's "Limits" section states the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from vmware_pilot.errors import ArgumentError, excerpt

__all__ = [
    "MAX_DEPTH",
    "MAX_LIST",
    "MAX_REQUEST_BYTES",
    "MAX_STEPS",
    "MAX_STRING",
    "check_arguments",
]

MAX_REQUEST_BYTES: Final = 1 << 20  # 1 MiB
MAX_STEPS: Final = 200
MAX_DEPTH: Final = 16
MAX_STRING: Final = 65_536
MAX_LIST: Final = 1_000

_UNSTORABLE: Final = re.compile(r"[\x00\ud800-\udfff]")
# Arguments that carry a step list (the step count is checked before the generic list limit).
_STEP_ARGUMENTS: Final = frozenset({"steps"})
_HINT: Final = (
    "Send less: split the plan into several workflows, shorten the text, or flatten the "
    "parameters. The README's Limits section lists every maximum."
)


def _child(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    name = excerpt(str(key), 40)
    return f"{path}.{name}" if path else name


def _refuse(path: str, what: str, limit: int) -> ArgumentError:
    return ArgumentError(
        f"argument '{path}' is too large: {what} (the limit is {limit})",
        field=path,
        limit=limit,
        hint=_HINT,
    )


def _unstorable(path: str) -> ArgumentError:
    return ArgumentError(
        f"argument '{path}' holds a NUL character or a lone UTF-16 surrogate, which cannot be stored",
        field=path,
        hint="Send text as valid Unicode without NUL characters (escape or drop them).",
    )


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """Raise ``ArgumentError`` for the first value in ``arguments`` that is over a limit.

    Depth counts containers: a top-level string argument is at depth 0, the step list at 1, a
    step at 2, its ``params`` at 3. Values other than str, list and dict are not limited here.
    """
    for name, value in arguments.items():
        if isinstance(value, list) and name in _STEP_ARGUMENTS and len(value) > MAX_STEPS:
            raise _refuse(name, f"{len(value)} steps", MAX_STEPS)
    for key in arguments:
        if len(key) > MAX_STRING:
            raise _refuse("(argument name)", f"a name of {len(key)} characters", MAX_STRING)
        if _UNSTORABLE.search(key):
            raise _unstorable("(argument name)")
    stack: list[tuple[str, object, int]] = [(_child("", k), v, 0) for k, v in arguments.items()]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                raise _refuse(path, f"a string of {len(value)} characters", MAX_STRING)
            if _UNSTORABLE.search(value):
                raise _unstorable(path)
            continue
        if not isinstance(value, list | dict):
            continue
        if depth + 1 > MAX_DEPTH:
            raise _refuse(path, f"nested more than {MAX_DEPTH} levels deep", MAX_DEPTH)
        if len(value) > MAX_LIST:
            kind = "items" if isinstance(value, list) else "members"
            raise _refuse(path, f"{len(value)} {kind}", MAX_LIST)
        if isinstance(value, list):
            stack.extend((_child(path, i), item, depth + 1) for i, item in enumerate(value))
            continue
        for key, item in value.items():
            if isinstance(key, str) and len(key) > MAX_STRING:
                raise _refuse(path, f"a key of {len(key)} characters", MAX_STRING)
            if isinstance(key, str) and _UNSTORABLE.search(key):
                raise _unstorable(path)
            stack.append((_child(path, key), item, depth + 1))
