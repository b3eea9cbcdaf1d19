"""The one place that turns exceptions escaping the service into tool payloads.

``PilotError`` → its ``payload()`` (a refusal body with ``error``, fields and ``hint``).
Anything else is a bug or an outside failure: logged to stderr with a correlation id, and
reported generically so internals never leak into the client's context.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio.to_thread

from vmware_pilot.errors import PilotError

__all__ = ["ServiceCall", "call_guarded", "unexpected_error_payload"]

_log = logging.getLogger("vmware_pilot.server")

# What to do next when a tool failed unexpectedly; ``{workflow_id}`` is filled in when known.
_HINTS: dict[str, str] = {
    "run_workflow": "Workflow '{workflow_id}' execution failed. Use get_workflow_status() to check its "
    "state, or rollback().",
    "approve": "Approval failed for '{workflow_id}'. Use get_workflow_status() to check its state.",
    "rollback": "Rollback failed for '{workflow_id}'. Use get_workflow_status() to see which steps "
    "were reversed before retrying.",
    "cancel_workflow": "Cancel failed for '{workflow_id}'. Use get_workflow_status() to check its state.",
    "review_workflow": "Review failed for '{workflow_id}'. Use get_workflow_status() to inspect the raw state.",
    "get_workflow_status": "Use list_workflows() to see active workflow IDs.",
    "list_workflows": "The workflow store or template registry failed; the server log has the details.",
}
# Tools whose service method writes synchronously (a transaction and an fsync, or a wait for
# another process's lock), or works over a whole plan (decoding, review, plan digests, which grow
# with the plan's text): run in a worker thread so the event loop keeps serving others. The
# async tools (run_workflow, approve, rollback, cancel_workflow) save through ``Runner.save``,
# which does the same. The short reads (lists, the catalog) stay on the loop: they would only
# pay thread hand-offs under the GIL.
_THREADED = frozenset(
    {
        "create_workflow",
        "design_workflow",
        "update_draft",
        "confirm_draft",
        "create_workflow_from_template",
        "review_workflow",
        "get_workflow_status",
    }
)
_DEFAULT_HINT = (
    "Check the arguments (get_skill_catalog lists skill and tool names; list_workflows the "
    "templates) and try again; the server log has the details under that correlation id."
)


def unexpected_error_payload(tool: str, exc: BaseException, workflow_id: str = "") -> dict[str, Any]:
    """Log ``exc`` with a fresh correlation id and return the generic error payload naming it."""
    correlation_id = uuid.uuid4().hex[:12]
    _log.error(
        "tool %s failed (correlation id %s)",
        tool,
        correlation_id,
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    hint = _HINTS.get(tool, _DEFAULT_HINT).format(workflow_id=workflow_id)
    return {
        "error": f"{type(exc).__name__}: operation failed (correlation id {correlation_id})",
        "hint": hint,
    }


ServiceCall = Callable[[], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]


async def call_guarded(tool: str, call: ServiceCall, *, workflow_id: str = "") -> Mapping[str, Any]:
    """Run ``call`` (sync or async) and return its result, or the payload its failure translates to.

    For the writing tools (``_THREADED``) ``call`` runs in a worker thread, so a commit never holds
    up other callers' requests; those service methods must not touch the event loop. A coroutine
    ``call`` returns is awaited on the event loop.
    """
    try:
        result = await anyio.to_thread.run_sync(call) if tool in _THREADED else call()
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, Mapping):
            raise TypeError(f"{tool} returned {type(result).__name__}, expected a result object")
        return result
    except PilotError as exc:
        return exc.payload()
    except Exception as exc:
        return unexpected_error_payload(tool, exc, workflow_id)
