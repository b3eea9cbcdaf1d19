"""``completion/complete``: suggestions for prompt arguments and resource-template variables.

* ``workflow_id`` (prompt ``roll_back_workflow``, ``pilot://workflows/{workflow_id}[/audit]``):
  stored workflow ids starting with what was typed, newest first, if the caller's role may read
  workflows;
* ``name`` of ``pilot://templates/{name}``: template names (built-in and YAML);
* ``state`` (prompt ``review_workflows``): workflow states;
* a template prompt's parameter with fixed values: its ``enum`` values, ``true``/``false`` for a
  boolean.

A prompt this server does not have is an error (``-32602``, as prompts/get answers it); anything
else completes to nothing. At most 100 values are returned (``hasMore`` says if more matched). A
typed value longer than ``MAX_TYPED`` characters is refused (-32602), and a failure reading the
store is a -32603 error that names no file or database (the log has the details).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    CompletionArgument,
    PromptReference,
    ResourceTemplateReference,
)

from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.errors import PilotError
from vmware_pilot.server.prompts import prompts, unknown_prompt
from vmware_pilot.server.resources import Refusal

if TYPE_CHECKING:  # the engine is imported when the app is built, not at start-up
    from vmware_pilot.engine.service import PilotService

__all__ = ["MAX_TYPED", "register_completions"]

_MAX = 100
MAX_TYPED = 256
_log = logging.getLogger("vmware_pilot.server")


def _done(values: list[str], typed: str) -> Completion:
    matching = [v for v in values if v.startswith(typed)]
    return Completion(values=matching[:_MAX], total=len(matching), has_more=len(matching) > _MAX)


def _fixed_values(service: PilotService, template: str, parameter: str) -> list[str]:
    entry = next((t for t in service.templates.listing() if t.name == template), None)
    if entry is None or entry.type != "builtin":
        return []
    spec = next((p for p in entry.parameters if p.name == parameter), None)
    if spec is None:
        return []
    if spec.enum:
        return [v if isinstance(v, str) else json.dumps(v) for v in spec.enum]
    return ["true", "false"] if spec.type == "boolean" else []


def complete(service: PilotService, refusal: Refusal, ref: Any, argument: CompletionArgument) -> Completion:
    """The values for ``argument`` of ``ref`` (see the module docstring)."""
    typed, name = argument.value, argument.name
    if isinstance(ref, ResourceTemplateReference):
        if name == "workflow_id" and ref.uri.startswith("pilot://workflows/"):
            name = "workflow_id"
        elif name == "name" and ref.uri == "pilot://templates/{name}":
            if refusal("list_workflows") is not None:
                return Completion(values=[])
            return _done([t.name for t in service.templates.listing()], typed)
        else:
            return Completion(values=[])
    elif isinstance(ref, PromptReference) and name not in ("workflow_id", "state"):
        return _done(_fixed_values(service, ref.name, name), typed)
    if name == "state":
        return _done([s.value for s in WorkflowState], typed)
    if name == "workflow_id":
        if refusal("get_workflow_status") is not None:
            return Completion(values=[])
        ids = service.records.workflow_ids(typed, _MAX + 1)
        return Completion(values=ids[:_MAX], has_more=len(ids) > _MAX)
    return Completion(values=[])


def register_completions(lowlevel: Server[Any], service: PilotService, refusal: Refusal) -> None:
    """Install completion/complete on ``lowlevel``."""

    async def handler(ctx: ServerRequestContext[Any, Any], params: CompleteRequestParams) -> CompleteResult:
        ref, argument = params.ref, params.argument
        if len(argument.value) > MAX_TYPED:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"argument.value is {len(argument.value)} characters; a completion takes at "
                f"most {MAX_TYPED} (no id or name is longer)",
                data={"hint": "Send the first characters typed, not a whole text."},
            )
        if isinstance(ref, PromptReference) and ref.name not in prompts():
            raise unknown_prompt(ref.name)
        # The caller's role is resolved here, on the request; the store is read in a worker thread.
        refused = {t: refusal(t) for t in ("list_workflows", "get_workflow_status")}
        try:
            completion = await anyio.to_thread.run_sync(lambda: complete(service, refused.get, ref, argument))
        except Exception as exc:  # the store's message names the database: it stays in the log
            _log.warning("completion failed: %s", exc, exc_info=not isinstance(exc, PilotError))
            raise MCPError(
                code=INTERNAL_ERROR,
                message="completion failed: the workflows could not be read",
                data={"hint": "Try again; the server log has the details."},
            ) from None
        return CompleteResult(completion=completion)

    lowlevel.add_request_handler("completion/complete", CompleteRequestParams, handler)
