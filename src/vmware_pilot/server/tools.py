"""The 13 MCP tools: thin adapters from validated arguments to ``PilotService`` calls.

Names, order, parameter names, types and defaults are the contract's (docs/contract.md#tools); every input
schema is closed (unknown arguments are rejected) and no tool declares an output schema. Each
tool returns the service's result dict framed by ``results.to_result``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, cast

from mcp.server.fastmcp import Context
from mcp.server.fastmcp.tools import Tool
from mcp.server.fastmcp.utilities.func_metadata import ArgModelBase
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import ConfigDict, Field

from vmware_pilot.domain.actor import Actor
from vmware_pilot.server.descriptions import DESCRIPTIONS
from vmware_pilot.server.elicit import human_asker
from vmware_pilot.server.errors import ServiceCall, call_guarded
from vmware_pilot.server.results import to_result
from vmware_pilot.server.runlog import RunReport
from vmware_pilot.server.wire import current_connection

if TYPE_CHECKING:
    from vmware_pilot.engine.service import PilotService

__all__ = ["TOOL_NAMES", "build_tools"]

_log = logging.getLogger("vmware_pilot.server")

TOOL_NAMES: tuple[str, ...] = (
    "create_workflow",
    "design_workflow",
    "update_draft",
    "confirm_draft",
    "create_workflow_from_template",
    "run_workflow",
    "approve",
    "rollback",
    "cancel_workflow",
    "review_workflow",
    "get_workflow_status",
    "list_workflows",
    "get_skill_catalog",
)

ToolContext = Context[Any, Any, Any]

# --- annotations (docs/contract.md#annotations) ---------------------------------------------
_WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True)
_DESTRUCTIVE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True
)
_READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True)

# --- parameter types ------------------------------------------------------------------------
_STEP_SHAPE = (
    "{action, skill, tool, params, rollback_tool?, rollback_params?, group_id?}; "
    'action "require_approval" makes the step an approval gate.'
)
WorkflowId = Annotated[
    str, Field(description="The workflow's id (wf-…), as returned by a create call or list_workflows.")
]
Steps = Annotated[list[dict[str, Any]], Field(description=f"Ordered steps, each {_STEP_SHAPE}")]
DraftSteps = Annotated[
    list[dict[str, Any]] | None,
    Field(description=f"New step list replacing all steps (null keeps them). Each step is {_STEP_SHAPE}"),
]
WorkflowName = Annotated[
    str, Field(description="Name of the workflow; also the template name when save_as_template is true.")
]
WorkflowDescription = Annotated[str, Field(description="What the workflow does, in a sentence.")]
DraftName = Annotated[str, Field(description="New workflow name; empty keeps the current one.")]
DraftDescription = Annotated[str, Field(description="New description; empty keeps the current one.")]
SaveAsTemplate = Annotated[
    bool,
    Field(description="Also save the steps as a custom YAML template named after the workflow."),
]
Goal = Annotated[str, Field(description="What the user wants done, in their own words.")]
Constraints = Annotated[
    str, Field(description="Limits to respect, e.g. a maintenance window or hosts to leave alone.")
]
WorkflowType = Annotated[str, Field(description="Template name, as listed by list_workflows.")]
TemplateParams = Annotated[
    dict[str, Any],
    Field(
        description='The template\'s inputs as an object, e.g. {"alert_entity": "web-01", "alert_name": "CPU"}.'
    ),
]
Force = Annotated[
    bool,
    Field(
        description="Run a built-in template despite blocking review findings, only after a human "
        "explicitly agreed. Never bypasses a custom workflow's missing approval gate."
    ),
]
Approver = Annotated[
    str,
    Field(
        description="Name of the person approving, for the audit trail. Over an authenticated network "
        "transport leave it empty: the approver is the caller (token name or OAuth subject) and a different "
        "name is refused."
    ),
]
AcknowledgeNotExecuted = Annotated[
    bool,
    Field(
        description="True states that the steps before this gate were performed outside Pilot and their "
        "results were checked."
    ),
]
Confirm = Annotated[
    bool,
    Field(
        description="False (default) only previews. True acts, once the human saw the preview and decided."
    ),
]
AcknowledgeUnknownEffects = Annotated[
    bool,
    Field(
        description="True accepts steps left 'running' or 'interrupted' (effect unknown) after you checked "
        "the target system."
    ),
]
Reason = Annotated[str, Field(description="Why the workflow is cancelled; written to its audit log.")]
Limit = Annotated[
    int | None,
    Field(
        ge=1,
        le=500,
        description="Page size for active_workflows, 1 to 500; null (default) returns the 50 most recent.",
    ),
]
Offset = Annotated[
    int, Field(ge=0, le=2**31 - 1, description="Number of active workflows to skip before the page.")
]


def _closed(tool: Tool) -> Tool:
    """The same tool with a closed, strict input model.

    Unknown arguments are refused (schema: additionalProperties false) and nothing is coerced:
    ``"yes"`` is not ``true``, ``true`` is not ``1``, ``"5"`` is not ``5``. Objects and arrays sent
    as JSON text are still accepted (FastMCP parses them before validation).
    """
    base = tool.fn_metadata.arg_model
    config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)
    closed = cast(type[ArgModelBase], type(base.__name__, (base,), {"model_config": config}))
    metadata = tool.fn_metadata.model_copy(update={"arg_model": closed})
    return tool.model_copy(
        update={"fn_metadata": metadata, "parameters": closed.model_json_schema(by_alias=True)}
    )


def build_tools(service: Callable[[], PilotService], actor: Callable[[], Actor]) -> list[Tool]:
    """The 13 tools bound to ``service()``, in the contract's tools/list order.

    ``service()`` and ``actor()`` are called once per tool call, inside the call's error handling:
    the service may be built by the first call, and ``actor()`` returns the caller of the request.
    """

    async def respond(tool: str, call: ServiceCall, workflow_id: str = "") -> CallToolResult:
        return to_result(await call_guarded(tool, call, workflow_id=workflow_id))

    async def create_workflow(
        name: WorkflowName,
        description: WorkflowDescription,
        steps: Steps,
        save_as_template: SaveAsTemplate = False,
    ) -> CallToolResult:
        return await respond(
            "create_workflow",
            lambda: service().create_workflow(actor(), name, description, steps, save_as_template),
        )

    async def design_workflow(goal: Goal, constraints: Constraints = "") -> CallToolResult:
        return await respond("design_workflow", lambda: service().design_workflow(actor(), goal, constraints))

    async def update_draft(
        workflow_id: WorkflowId,
        name: DraftName = "",
        description: DraftDescription = "",
        steps: DraftSteps = None,
    ) -> CallToolResult:
        return await respond(
            "update_draft",
            lambda: service().update_draft(actor(), workflow_id, name, description, steps),
            workflow_id,
        )

    async def confirm_draft(
        workflow_id: WorkflowId, save_as_template: SaveAsTemplate = False
    ) -> CallToolResult:
        return await respond(
            "confirm_draft",
            lambda: service().confirm_draft(actor(), workflow_id, save_as_template),
            workflow_id,
        )

    async def create_workflow_from_template(
        workflow_type: WorkflowType, params: TemplateParams
    ) -> CallToolResult:
        return await respond(
            "create_workflow_from_template",
            lambda: service().create_workflow_from_template(actor(), workflow_type, params),
        )

    async def run_workflow(workflow_id: WorkflowId, ctx: ToolContext, force: Force = False) -> CallToolResult:
        report = RunReport(ctx, current_connection(), workflow_id)
        progress = report if report.wanted else None
        try:
            return await respond(
                "run_workflow",
                lambda: service().run_workflow(actor(), workflow_id, force, progress=progress),
                workflow_id,
            )
        finally:
            report.close()  # answered or cancelled: nothing more about this request

    async def approve(
        workflow_id: WorkflowId,
        ctx: ToolContext,
        approver: Approver = "",
        acknowledge_not_executed: AcknowledgeNotExecuted = False,
    ) -> CallToolResult:
        report = RunReport(ctx, current_connection(), workflow_id)
        progress = report if report.wanted else None
        ask = human_asker(ctx)  # used only when the approvals policy is 'elicit'
        try:
            return await respond(
                "approve",
                lambda: service().approve(
                    actor(), workflow_id, approver, acknowledge_not_executed, progress=progress, ask=ask
                ),
                workflow_id,
            )
        finally:
            report.close()  # answered or cancelled: nothing more about this request

    async def rollback(
        workflow_id: WorkflowId,
        confirm: Confirm = False,
        acknowledge_unknown_effects: AcknowledgeUnknownEffects = False,
    ) -> CallToolResult:
        return await respond(
            "rollback",
            lambda: service().rollback(actor(), workflow_id, confirm, acknowledge_unknown_effects),
            workflow_id,
        )

    async def cancel_workflow(
        workflow_id: WorkflowId,
        reason: Reason = "",
        confirm: Confirm = False,
        acknowledge_unknown_effects: AcknowledgeUnknownEffects = False,
    ) -> CallToolResult:
        return await respond(
            "cancel_workflow",
            lambda: service().cancel_workflow(
                actor(), workflow_id, reason, confirm, acknowledge_unknown_effects
            ),
            workflow_id,
        )

    async def review_workflow(workflow_id: WorkflowId) -> CallToolResult:
        return await respond("review_workflow", lambda: service().review_workflow(workflow_id), workflow_id)

    async def get_workflow_status(workflow_id: WorkflowId) -> CallToolResult:
        return await respond(
            "get_workflow_status", lambda: service().get_workflow_status(workflow_id), workflow_id
        )

    async def list_workflows(limit: Limit = None, offset: Offset = 0) -> CallToolResult:
        return await respond("list_workflows", lambda: service().list_workflows(limit, offset))

    async def get_skill_catalog() -> CallToolResult:
        return await respond("get_skill_catalog", lambda: service().get_skill_catalog())

    specs: list[tuple[Callable[..., Any], ToolAnnotations]] = [
        (create_workflow, _WRITE),
        (design_workflow, _WRITE),
        (update_draft, _WRITE),
        (confirm_draft, _WRITE),
        (create_workflow_from_template, _WRITE),
        (run_workflow, _WRITE),
        (approve, _WRITE),
        (rollback, _DESTRUCTIVE),
        (cancel_workflow, _DESTRUCTIVE),
        (review_workflow, _READ),
        (get_workflow_status, _READ),
        (list_workflows, _READ),
        (get_skill_catalog, _READ),
    ]
    return [
        _closed(
            Tool.from_function(
                fn,
                name=fn.__name__,
                description=DESCRIPTIONS[fn.__name__],
                annotations=annotations,
                structured_output=False,
            )
        )
        for fn, annotations in specs
    ]
