"""The one place that turns a refusal into a tool result, and any other failure into a refusal.

Every refusal a client sees is a raised ``PilotError``: the engine's, the door's (an unknown tool,
arguments over a limit or against the schema: ``server.arguments``) and the caller's role
(``server.pipeline``). ``refusal_result`` frames its ``payload()`` (``error``, the fields a client
keys on, ``hint``) with ``isError`` true, kept small whatever the caller sent (``server.bounds``).

Anything else escaping a tool is a bug or an outside failure: ``unexpected_failure`` logs it to
stderr with a correlation id and returns a generic refusal naming that id and the tool's
``failure_hint``, so internals never leak into the client's context.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from mcp_types import CallToolResult
from pydantic import BaseModel

from vmware_pilot.errors import PilotError
from vmware_pilot.server.bounds import bound_refusal, long_strings
from vmware_pilot.server.results import payload_of, to_result
from vmware_pilot.tooltable import DEFAULT_FAILURE_HINT, spec_of

__all__ = ["refusal_result", "tool_result", "unexpected_failure"]

_log = logging.getLogger("vmware_pilot.server")


def refusal_result(exc: PilotError, arguments: Mapping[str, Any]) -> CallToolResult:
    """``exc`` as the tool result a client sees: its payload, bounded, with ``isError`` true.

    ``arguments`` are the call's arguments: a refusal quotes at most the start of a long one."""
    return to_result(bound_refusal(exc.payload(), long_strings(arguments)))


def tool_result(result: Mapping[str, Any] | BaseModel, arguments: Mapping[str, Any]) -> CallToolResult:
    """A tool's own result (a mapping or a pydantic model) framed. One that carries an ``error``
    (a run, approval or rollback that ended in a failure) has the long inputs it quotes cut; its
    size is the plan's."""
    payload = payload_of(result)
    if payload.get("error"):
        squeeze = "outcome" not in payload  # no outcome: a refusal after all, kept small
        return to_result(bound_refusal(payload, long_strings(arguments), squeeze=squeeze))
    return to_result(payload)


def unexpected_failure(tool: str, exc: BaseException, workflow_id: str = "") -> PilotError:
    """Log ``exc`` with a fresh correlation id; the generic refusal naming it."""
    correlation_id = uuid.uuid4().hex[:12]
    _log.error(
        "tool %s failed (correlation id %s)",
        tool,
        correlation_id,
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    spec = spec_of(tool)
    hint = (spec.failure_hint if spec else DEFAULT_FAILURE_HINT).format(workflow_id=workflow_id)
    return PilotError(f"{type(exc).__name__}: operation failed (correlation id {correlation_id})", hint=hint)
