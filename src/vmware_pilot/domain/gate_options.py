"""Options a require_approval gate takes in its params: an expiry and a quorum of approvers.

``expires_in_minutes``: once that long has passed since the run reached the gate, approve is
refused (the workflow can still be rejected or cancelled). ``approvals_required``: that many
distinct people must approve before the run goes on. Only in a YAML template's own steps may a
value be a whole placeholder (``"{{ttl}}"``), left for the template to fill and checked once
filled; anywhere else a value that is not a usable number is refused, never ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "APPROVALS_REQUIRED",
    "EXPIRES_IN_MINUTES",
    "GATE_OPTION_KEYS",
    "MAX_APPROVALS_REQUIRED",
    "MAX_EXPIRES_IN_MINUTES",
    "GateOptions",
    "gate_option_problem",
    "gate_options",
]

EXPIRES_IN_MINUTES: Final = "expires_in_minutes"
APPROVALS_REQUIRED: Final = "approvals_required"
GATE_OPTION_KEYS: Final = (EXPIRES_IN_MINUTES, APPROVALS_REQUIRED)
MAX_APPROVALS_REQUIRED: Final = 20
MAX_EXPIRES_IN_MINUTES: Final = 60 * 24 * 366


@dataclass(frozen=True, slots=True)
class GateOptions:
    expires_in_minutes: float | None = None
    approvals_required: int = 1


_WHOLE_PLACEHOLDER = re.compile(r"\{\{\s*\w+\s*\}\}")


def _is_placeholder(value: object) -> bool:
    return isinstance(value, str) and _WHOLE_PLACEHOLDER.fullmatch(value.strip()) is not None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def gate_option_problem(params: Mapping[str, Any], *, placeholders: bool = False) -> tuple[str, str] | None:
    """``(key, problem)`` for the first unusable gate option in ``params``; None when all are usable.

    ``placeholders``: a template's unfilled steps, where a whole ``{{name}}`` value waits for its value."""

    def skip(key: str) -> bool:
        return params.get(key) is None or (placeholders and _is_placeholder(params[key]))

    if not skip(EXPIRES_IN_MINUTES):
        minutes = _number(params[EXPIRES_IN_MINUTES])
        if minutes is None or not 0 < minutes <= MAX_EXPIRES_IN_MINUTES:
            return (
                EXPIRES_IN_MINUTES,
                f"'{EXPIRES_IN_MINUTES}' must be a number of minutes above 0 and at most "
                f"{MAX_EXPIRES_IN_MINUTES}, got {params[EXPIRES_IN_MINUTES]!r}",
            )
    if not skip(APPROVALS_REQUIRED):
        count = _number(params[APPROVALS_REQUIRED])
        if count is None or count != int(count) or not 1 <= count <= MAX_APPROVALS_REQUIRED:
            return (
                APPROVALS_REQUIRED,
                f"'{APPROVALS_REQUIRED}' must be a whole number from 1 to {MAX_APPROVALS_REQUIRED}, "
                f"got {params[APPROVALS_REQUIRED]!r}",
            )
    return None


def gate_options(params: Mapping[str, Any]) -> GateOptions:
    """The options of a gate whose params passed ``gate_option_problem`` (unusable ones are ignored)."""
    if gate_option_problem(params) is not None:
        return GateOptions()
    minutes = _number(params.get(EXPIRES_IN_MINUTES))
    count = _number(params.get(APPROVALS_REQUIRED))
    return GateOptions(
        expires_in_minutes=minutes,
        approvals_required=int(count) if count is not None else 1,
    )
