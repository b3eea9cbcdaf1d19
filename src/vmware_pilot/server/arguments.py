"""The door of every tool call: the tool must exist, the arguments must fit the limits and the schema.

Each problem is an ``ArgumentError`` (``error``, ``field``, ``hint``; ``isError`` once framed by
``server.errors.refusal_result``), raised before the tool runs: an unknown tool name, arguments over a limit (``vmware_pilot.limits``), and
arguments the tool's input schema rejects. Schemas are strict (``server.tools``): ``"yes"`` is not
``true``, ``true`` is not ``1``, ``"5"`` is not ``5``. The message keeps the words of the SDK's own
rejection (``Error executing tool <name>: …``) for clients that match on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from vmware_pilot.errors import ArgumentError, excerpt
from vmware_pilot.limits import check_arguments

__all__ = ["check_limits", "schema_refusal", "unknown_tool_refusal"]

_JSON_TYPES: Final = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    list: "array",
    dict: "object",
    type(None): "null",
}
_SCHEMA_HINT: Final = (
    "Send the arguments the tool's input schema in tools/list describes: booleans as true/false "
    "(not strings), integers as whole numbers (not strings or booleans), no unknown arguments."
)


def unknown_tool_refusal(name: str, known: Iterable[str]) -> ArgumentError:
    """The refusal of a call to a tool this server does not have."""
    return ArgumentError(
        f"Unknown tool: {excerpt(name)}",
        field="name",
        hint=f"Call one of the tools tools/list shows: {', '.join(known)}.",
    )


def check_limits(arguments: Mapping[str, Any]) -> None:
    """Raise ``ArgumentError`` for arguments over a size limit (``vmware_pilot.limits``)."""
    check_arguments(arguments)


def _field(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            name = excerpt(str(part), 60)
            path = f"{path}.{name}" if path else name
    return path or "(arguments)"


def schema_refusal(tool: str, exc: ValidationError) -> ArgumentError:
    """The refusal of arguments ``tool``'s input model rejected: the first problem, named by field."""
    problems = exc.errors(include_url=False, include_context=False)
    first = problems[0]
    field = _field(tuple(first["loc"]))
    message = first["msg"]
    if first["type"] not in ("missing", "extra_forbidden"):
        given = _JSON_TYPES.get(type(first.get("input")), "another type")
        message += f" (got {given})"
    more = f"; {len(problems) - 1} more problem(s)" if len(problems) > 1 else ""
    return ArgumentError(
        f"Error executing tool {tool}: argument '{field}': {message}{more}", field=field, hint=_SCHEMA_HINT
    )
