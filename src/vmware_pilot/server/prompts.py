"""MCP prompts: one per built-in template and three common flows, shown as slash commands.

A template prompt takes the template's parameters as arguments (text; a non-string parameter is
given as JSON, e.g. ``true`` or ``["web-01"]``) and asks the agent to plan it with
``create_workflow_from_template``, review it, run it and stop at each gate for the human. The
flows are ``plan_change`` (goal → design_workflow), ``handle_alert`` (incident_response or
investigate_alert), ``roll_back_workflow`` and ``review_workflows`` (those in one state). An
unknown prompt or a missing required argument is a JSON-RPC ``INVALID_PARAMS`` error.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as mtypes
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    GetPromptResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    TextContent,
)

from vmware_pilot.domain.enums import WorkflowState

if TYPE_CHECKING:  # the prompts are listed at start-up; the result models load with the first tool list
    from vmware_pilot.results import TemplateParameter

__all__ = ["prompts", "register_prompts"]

_AFTER_PLAN = (
    "Then call review_workflow on the new id and show me the findings. If I agree, call run_workflow. "
    "At each approval gate stop, show me what it releases, and call approve only after I say so. "
    "Report the final state from get_workflow_status."
)


@dataclass(frozen=True)
class _Prompt:
    prompt: Prompt
    render: Callable[[Mapping[str, str]], str]


def _value(text: str, kind: str) -> Any:
    """A typed parameter from its text: JSON for non-strings (kept as text if it is not JSON)."""
    if kind == "string":
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _template_prompt(name: str, description: str, parameters: Sequence[TemplateParameter]) -> _Prompt:
    arguments = []
    for p in parameters:
        text = p.description
        if p.type != "string":
            text += f" ({p.type}, as JSON)"
        if not p.required:
            text += f" Default: {json.dumps(p.default)}."
        arguments.append(PromptArgument(name=p.name, description=text, required=p.required))
    types = {p.name: p.type for p in parameters}

    def render(args: Mapping[str, str]) -> str:
        params = {k: _value(v, types[k]) for k, v in args.items() if k in types and v != ""}
        call = json.dumps({"workflow_type": name, "params": params}, ensure_ascii=False)
        return (
            f"Use vmware-pilot to plan the {name} workflow ({description}) Call "
            f"create_workflow_from_template with {call}. If it is refused, read the hint, fix the "
            f"parameters with me and try again. {_AFTER_PLAN}"
        )

    return _Prompt(Prompt(name=name, description=description, arguments=arguments), render)


def _flows() -> list[_Prompt]:
    states = ", ".join(s.value for s in WorkflowState)
    return [
        _Prompt(
            Prompt(
                name="plan_change",
                description="Plan a change with vmware-pilot: a template if one fits, else a designed draft.",
                arguments=[
                    PromptArgument(
                        name="goal", description="What should change, in your words.", required=True
                    ),
                    PromptArgument(name="constraints", description="Limits: window, hosts to avoid…"),
                ],
            ),
            lambda a: (
                f"I want this change: {a['goal']}. Constraints: {a.get('constraints') or 'none given'}. "
                "Read pilot://templates (or call list_workflows) and pick a template whose description "
                "fits; otherwise call design_workflow with the goal and constraints, refine the draft "
                f"with update_draft and confirm_draft. {_AFTER_PLAN}"
            ),
        ),
        _Prompt(
            Prompt(
                name="handle_alert",
                description="Investigate an alert (evidence rounds) and acknowledge it once understood.",
                arguments=[
                    PromptArgument(
                        name="alert_entity", description="Object the alert fired on.", required=True
                    ),
                    PromptArgument(name="alert_name", description="Name of the alert."),
                    PromptArgument(name="target", description="Target the reads address."),
                ],
            ),
            lambda a: (
                f"An alert '{a.get('alert_name') or 'unnamed'}' fired on '{a['alert_entity']}' "
                f"(target '{a.get('target', '')}'). Plan investigate_alert with these values through "
                "create_workflow_from_template, run it, and at each gate give me the evidence and your "
                "explanation before I decide. If the cause is clear and the alarm should be "
                f"acknowledged, plan incident_response next. {_AFTER_PLAN}"
            ),
        ),
        _Prompt(
            Prompt(
                name="roll_back_workflow",
                description="Preview, then roll back what a workflow changed.",
                arguments=[
                    PromptArgument(
                        name="workflow_id", description="The workflow to roll back.", required=True
                    )
                ],
            ),
            lambda a: (
                f"Roll back workflow {a['workflow_id']}. First call get_workflow_status and rollback with "
                "confirm=false, and show me the blast radius: what will be reversed, what stays, and "
                "anything with unknown effect. Call rollback with confirm=true only after I agree; set "
                "acknowledge_unknown_effects only if I checked those targets myself."
            ),
        ),
        _Prompt(
            Prompt(
                name="review_workflows",
                description="Summarise the workflows in one state and what each is waiting for.",
                arguments=[PromptArgument(name="state", description=f"One of: {states}.", required=True)],
            ),
            lambda a: (
                f"List the workflows in state '{a['state']}' (list_workflows shows the active ones; "
                "get_workflow_status each). For each, tell me what it does, who created it, and the next "
                "step it needs from me."
            ),
        ),
    ]


@functools.cache
def prompts() -> dict[str, _Prompt]:
    """Every prompt by name (built on first use: the schemas are not needed at start-up)."""
    from vmware_pilot.templates.builtin import BUILTINS
    from vmware_pilot.templates.params import parameters_of

    out = {b.name: _template_prompt(b.name, b.description, parameters_of(b.params_model)) for b in BUILTINS}
    out.update({p.prompt.name: p for p in _flows()})
    return out


def unknown_prompt(name: str) -> MCPError:
    """The ``-32602`` error for a prompt this server does not have (prompts/get, completions)."""
    return MCPError(
        code=INVALID_PARAMS,
        message=f"Unknown prompt: {name[:100]}",
        data={"hint": "prompts/list shows the prompts this server has."},
    )


def _get(name: str, arguments: Mapping[str, str] | None) -> GetPromptResult:
    entry = prompts().get(name)
    if entry is None:
        raise unknown_prompt(name)
    args = dict(arguments or {})
    missing = [a.name for a in entry.prompt.arguments or [] if a.required and not args.get(a.name)]
    if missing:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"Prompt {name} needs argument(s): {', '.join(missing)}",
            data={"hint": "prompts/list shows each argument; completion/complete suggests values."},
        )
    text = entry.render(args)
    return GetPromptResult(
        description=entry.prompt.description,
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )


def register_prompts(lowlevel: Server[Any]) -> None:
    """Install prompts/list and prompts/get on ``lowlevel``."""

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: mtypes.PaginatedRequestParams
    ) -> mtypes.ListPromptsResult:
        return mtypes.ListPromptsResult(prompts=[p.prompt for p in prompts().values()])

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: mtypes.GetPromptRequestParams
    ) -> GetPromptResult:
        return _get(params.name, params.arguments)

    lowlevel.add_request_handler("prompts/list", mtypes.PaginatedRequestParams, list_prompts)
    lowlevel.add_request_handler("prompts/get", mtypes.GetPromptRequestParams, get_prompt)
