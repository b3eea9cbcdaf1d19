"""The 13 MCP tools: thin adapters from validated arguments to ``PilotService`` calls.

Parameter names, types and defaults are the contract's (docs/contract.md#tools) and live here, in
each tool function's signature; everything else about a tool (its name, order, title,
description, annotations, whether it runs in a worker thread) comes from the tool table
(``vmware_pilot.tooltable``). Every input schema is closed (unknown arguments are rejected). A
tool declares an output schema exactly when its function's return annotation is a pydantic
model, or a union of models (``output_schema``): every tool's result is one of
``vmware_pilot.results``' models, so every tool declares one.

A tool function returns the service's result; ``PilotMCPServer.call_tool`` (``server.pipeline``)
frames it, and turns the ``PilotError`` it raises into the refusal result.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import operator
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Final

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp_types import InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, Field, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from vmware_pilot.card import card_meta
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError
from vmware_pilot.results import (
    ApproveResult,
    CancelResult,
    CatalogResult,
    ConfirmDraftResult,
    CreateResult,
    DesignResult,
    DraftResult,
    FromTemplateResult,
    ListResult,
    Preview,
    Refusal,
    ReviewResult,
    RollbackResult,
    RunResult,
    StatusView,
)
from vmware_pilot.server import sdk
from vmware_pilot.server.elicit import human_asker
from vmware_pilot.server.errors import unexpected_failure
from vmware_pilot.server.referral import approve_in_console, speaks_urls_only
from vmware_pilot.server.runlog import RunReport
from vmware_pilot.server.subscriptions import version_moved, version_of
from vmware_pilot.server.wire import current_connection
from vmware_pilot.tooltable import TOOL_NAMES, TOOLS, Effect, ToolSpec

if TYPE_CHECKING:
    from vmware_pilot.engine.service import PilotService
    from vmware_pilot.safety.duties import Role

__all__ = ["TOOL_NAMES", "build_tools"]

_log = logging.getLogger("vmware_pilot.server")

ToolContext = Context[Any, Any]

# --- annotations (docs/contract.md#annotations) ---------------------------------------------
_ANNOTATIONS: dict[Effect, ToolAnnotations] = {
    "write": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
    ),
    "destructive": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
    ),
    "read": ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
    ),
}

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
GateStep = Annotated[
    int | None,
    Field(
        ge=0,
        le=10_000,
        description="The step index of the gate you showed the user; refused when another gate waits. "
        "null (default): the gate waiting now.",
    ),
]
ApproveComment = Annotated[
    str,
    Field(
        description="The approver's comment, in their words (optional): recorded with the approval "
        "and in the audit trail.",
        max_length=500,
    ),
]
AcknowledgePredictedFailure = Annotated[
    str,
    Field(
        description="Only when the gate's prediction (get_workflow_status: prediction) says the run "
        "fails: the person's reason for approving anyway, recorded with the approval. Without it such "
        "an approval is refused.",
        max_length=2000,
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
        description="True accepts steps left 'running' or 'interrupted' whose effect is unknown (Pilot could "
        "not settle it by reading the target) after you checked the target system."
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
WaitSeconds = Annotated[
    float,
    Field(
        ge=0,
        le=60,
        description="Seconds (0 to 60) to wait for the workflow to change before answering: the answer "
        "comes as soon as its state, a step or a gate moves (a change by anyone), or when the wait ends, "
        "unchanged. 0 (default) answers at once. Use it instead of calling in a loop.",
    ),
]
Offset = Annotated[
    int, Field(ge=0, le=2**31 - 1, description="Number of active workflows to skip before the page.")
]


def _guarded(spec: ToolSpec, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as the SDK calls it: in a worker thread when the table says so, its awaitable
    awaited, and any failure that is not a ``PilotError`` turned into the generic refusal.

    The wrapper keeps ``fn``'s signature and annotations (``functools.wraps``), so the SDK derives
    the input schema, the context parameter and any output schema from ``fn`` itself."""

    @functools.wraps(fn)
    async def call(**kwargs: Any) -> Any:
        try:
            if spec.threaded:
                result = await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))
            else:
                result = fn(**kwargs)
            if inspect.isawaitable(result):
                result = await result
            return result
        except PilotError:
            raise
        except Exception as exc:
            raise unexpected_failure(spec.name, exc, str(kwargs.get("workflow_id", ""))) from exc

    return call


# The dialect the output schemas are written in. An MCP client may validate every result, and the
# Python SDK's client checks the schema itself against its dialect's metaschema on every call: the
# draft-07 metaschema costs a small fraction of the 2020-12 one (the default when none is named);
# a status call took about 4x as long with a 2020-12 schema.
SCHEMA_DIALECT: Final = "http://json-schema.org/draft-07/schema#"


def output_schema(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The JSON schema of ``fn``'s result when its return annotation is a pydantic model or a union
    of models (``rollback``: the result or its preview), else None (a plain mapping declares none).

    A refusal (``Refusal``: ``error``, the fields a client keys on, ``hint``) is one of the shapes
    declared: some clients (the TypeScript SDK, MCP Inspector) validate a result against the
    schema even when ``isError`` is set, and throw on one that does not match.

    Written in draft-07 and lean (``_lean``): an object that is one of the results or the refusal
    (``anyOf`` of ``$ref``). Every model appears once under ``$defs``, where ``$ref`` finds it by its
    JSON pointer. Draft-07 has no ``$defs`` keyword, so a client that checks the schema against the
    metaschema on every call (the Python SDK's does) checks a handful of top-level keys, not every
    definition; a 2020-12 client reads ``$defs`` as its own keyword. The results are validated
    against every definition all the same."""
    result = typing.get_type_hints(fn).get("return")
    members = tuple(
        m
        for m in (
            typing.get_args(result)
            if typing.get_origin(result) in (types.UnionType, typing.Union)
            else (result,)
        )
        # An InputRequiredResult (approve asking for the console: server.referral) is no result.
        if not (isinstance(m, type) and issubclass(m, InputRequiredResult))
    )
    if result is None or not all(isinstance(m, type) and issubclass(m, BaseModel) for m in members):
        return None
    shapes: Any = functools.reduce(operator.or_, (*members, Refusal))  # the results, or the refusal
    schema: dict[str, Any] = _lean(TypeAdapter(shapes).json_schema(schema_generator=_LeanSchema))
    definitions: dict[str, Any] = schema.pop("$defs", {})
    for definition in definitions.values():  # an enum's title is its name under $defs
        definition.pop("title", None)
    return {"$schema": SCHEMA_DIALECT, "type": "object", **schema, "$defs": definitions}


class _LeanSchema(GenerateJsonSchema):
    """Pydantic's schema generator without what validation does not use: defaults (the model fills
    them in; working them out is most of the generator's time) and property titles."""

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _lean(schema: Any) -> Any:
    """``schema`` without what is the default anyway (``additionalProperties: true``), a choice
    among plain types (``X | None``) as one ``type`` list, and a choice among sets of values
    (``Literal[...] | Literal[""]``, ``Literal[...] | None``) as one ``enum``: fewer subschemas for a
    client to check."""
    if isinstance(schema, list):
        return [_lean(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        key: _lean(value)
        for key, value in schema.items()
        if not (key == "additionalProperties" and value is True)
    }
    choices = out.get("anyOf")
    if isinstance(choices, list) and all(isinstance(c, dict) and list(c) == ["type"] for c in choices):
        del out["anyOf"]
        out["type"] = [c["type"] for c in choices]
    elif isinstance(choices, list) and choices and all(_values_of(c) is not None for c in choices):
        del out["anyOf"]
        out["enum"] = [v for c in choices for v in _values_of(c) or ()]
    return out


def _values_of(choice: Any) -> list[Any] | None:
    """The values a subschema allows when it is a plain set of them (``enum``, ``const`` or
    ``null``), else None."""
    if not isinstance(choice, dict):
        return None
    if choice == {"type": "null"}:
        return [None]
    rest = {k: v for k, v in choice.items() if k != "type"}
    if list(rest) == ["enum"]:
        return list(rest["enum"])
    if list(rest) == ["const"]:
        return [rest["const"]]
    return None


async def _wait_for_change(
    versions: Callable[[list[str]], dict[str, int]], workflow_id: str, wait: float, interval: float
) -> None:
    """Return once ``workflow_id``'s stored version moved from what it is now, or after ``wait``
    seconds, whichever comes first; at once when there is no such workflow (the status says so).
    A change by any process sharing the database counts, as for resource subscriptions
    (``server.subscriptions.version_moved``)."""
    first = await version_of(versions, workflow_id)
    if first is None:
        return
    _log.debug(
        "get_workflow_status: waiting up to %g s for %s to move from version %d", wait, workflow_id, first
    )
    await version_moved(versions, workflow_id, first, wait, interval)


# A tool as first registered, by name and the code of its function: what the SDK derives from the
# signature (the argument model, the input and output schemas) is the same for every server built
# from that code, and deriving it cost about 75 ms per server (every in-memory test session).
_REGISTERED: dict[tuple[str, types.CodeType], Tool] = {}


def _register(spec: ToolSpec, fn: Callable[..., Any]) -> Tool:
    guarded = _guarded(spec, fn)
    key = (spec.name, fn.__code__)
    first = _REGISTERED.get(key)
    if first is not None:
        return first.model_copy(update={"fn": guarded})
    tool = Tool.from_function(
        guarded,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        annotations=_ANNOTATIONS[spec.effect],
        structured_output=False,  # the result is framed by server.errors.tool_result
        meta=card_meta(spec.name),  # MCP Apps hosts draw a waiting gate with the approval card
    )
    tool = sdk.close_arguments(sdk.with_output_schema(tool, output_schema(fn)))
    _REGISTERED[key] = tool
    return tool


# The longest client name kept with a caller (``Actor.via``): it is the client's own word.
_CLIENT_NAME_MAX: Final = 64


def _through_client(actor: Callable[[], Actor]) -> Callable[[], Actor]:
    """``actor`` with ``via`` set to the name the request's MCP client gave (one line, bounded)."""

    def caller() -> Actor:
        who = actor()
        via = " ".join(sdk.client_name().split())[:_CLIENT_NAME_MAX]
        return dataclasses.replace(who, via=via) if via else who

    return caller


def build_tools(
    service: Callable[[], PilotService],
    actor: Callable[[], Actor],
    watch: float = 1.0,
    role: Callable[[], Role | None] = lambda: None,
    console_url: str = "",
) -> list[Tool]:
    """The 13 tools bound to ``service()``, in the tool table's order; ``watch`` is the seconds
    between two looks at a workflow's version while ``get_workflow_status`` (or an approval
    referred to the console) waits for a change. ``console_url``: the public URL of the Pilot
    serving the web console, where ``approve`` sends the person under the ``elicit`` policy on a
    2026-07-28 connection (``server.referral``; empty: no console, such an approval is refused).

    ``service()`` and ``actor()`` are called once per tool call, inside the call's error handling
    (and, for a threaded tool, in its worker thread): the service may be built by the first call,
    and ``actor()`` returns the caller of the request, ``role()`` its role (None: no roles). Each
    function is named after its tool.
    """
    functions: dict[str, Callable[..., Any]] = {}
    actor = _through_client(actor)

    def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
        functions[fn.__name__] = fn
        return fn

    @tool
    def create_workflow(
        name: WorkflowName,
        description: WorkflowDescription,
        steps: Steps,
        save_as_template: SaveAsTemplate = False,
    ) -> CreateResult:
        from vmware_pilot.engine.requests import CreateRequest  # at the call: tools/list loads no engine

        request = CreateRequest(actor(), name, description, steps, save_as_template, role=role())
        return service().create_workflow(request)

    @tool
    def design_workflow(goal: Goal, constraints: Constraints = "") -> DesignResult:
        from vmware_pilot.engine.requests import DesignRequest  # at the call: tools/list loads no engine

        return service().design_workflow(DesignRequest(actor(), goal, constraints, role=role()))

    @tool
    def update_draft(
        workflow_id: WorkflowId,
        name: DraftName = "",
        description: DraftDescription = "",
        steps: DraftSteps = None,
    ) -> DraftResult:
        from vmware_pilot.engine.requests import UpdateDraftRequest  # at the call: tools/list loads no engine

        request = UpdateDraftRequest(actor(), workflow_id, name, description, steps, role=role())
        return service().update_draft(request)

    @tool
    def confirm_draft(
        workflow_id: WorkflowId, save_as_template: SaveAsTemplate = False
    ) -> ConfirmDraftResult:
        from vmware_pilot.engine.requests import (
            ConfirmDraftRequest,
        )  # at the call: tools/list loads no engine

        request = ConfirmDraftRequest(actor(), workflow_id, save_as_template, role=role())
        return service().confirm_draft(request)

    @tool
    def create_workflow_from_template(
        workflow_type: WorkflowType, params: TemplateParams
    ) -> FromTemplateResult:
        from vmware_pilot.engine.requests import (
            FromTemplateRequest,
        )  # at the call: tools/list loads no engine

        request = FromTemplateRequest(actor(), workflow_type, params, role=role())
        return service().create_workflow_from_template(request)

    @tool
    async def run_workflow(workflow_id: WorkflowId, ctx: ToolContext, force: Force = False) -> RunResult:
        report = RunReport(ctx, current_connection(), workflow_id)
        try:
            progress = report if report.wanted else None
            from vmware_pilot.engine.requests import RunRequest  # at the call: tools/list loads no engine

            request = RunRequest(actor(), workflow_id, force, role=role())
            return await service().run_workflow(request, progress=progress)
        finally:
            report.close()  # answered or cancelled: nothing more about this request

    @tool
    async def approve(
        workflow_id: WorkflowId,
        ctx: ToolContext,
        approver: Approver = "",
        acknowledge_not_executed: AcknowledgeNotExecuted = False,
        gate_step: GateStep = None,
        acknowledge_predicted_failure: AcknowledgePredictedFailure = "",
        comment: ApproveComment = "",
    ) -> ApproveResult | InputRequiredResult:
        report = RunReport(ctx, current_connection(), workflow_id)
        ask = human_asker(ctx)  # used only when the approvals policy is 'elicit'
        try:
            progress = report if report.wanted else None
            from vmware_pilot.engine.requests import ApproveRequest  # at the call: tools/list loads no engine

            request = ApproveRequest(
                actor(),
                workflow_id,
                door="mcp",
                role=role(),
                approver=approver,
                acknowledge_not_executed=acknowledge_not_executed,
                gate_step=gate_step,
                acknowledge_failure=acknowledge_predicted_failure,
                comment=comment,
            )
            pilot = service()
            if pilot.core.approvals == "elicit" and speaks_urls_only(ctx):
                # No form on this connection: the person decides in the console (server.referral).
                return await approve_in_console(
                    ctx, pilot, request, console_url, pilot.records.versions, watch
                )
            return await pilot.approve(request, progress=progress, ask=ask)
        finally:
            report.close()  # answered or cancelled: nothing more about this request

    @tool
    async def rollback(
        workflow_id: WorkflowId,
        confirm: Confirm = False,
        acknowledge_unknown_effects: AcknowledgeUnknownEffects = False,
    ) -> RollbackResult | Preview:
        from vmware_pilot.engine.requests import RollbackRequest  # at the call: tools/list loads no engine

        request = RollbackRequest(actor(), workflow_id, confirm, acknowledge_unknown_effects, role=role())
        return await service().rollback(request)

    @tool
    async def cancel_workflow(
        workflow_id: WorkflowId,
        reason: Reason = "",
        confirm: Confirm = False,
        acknowledge_unknown_effects: AcknowledgeUnknownEffects = False,
    ) -> CancelResult | Preview:
        from vmware_pilot.engine.requests import CancelRequest  # at the call: tools/list loads no engine

        request = CancelRequest(
            actor(), workflow_id, reason, confirm, acknowledge_unknown_effects, role=role()
        )
        return await service().cancel_workflow(request)

    @tool
    def review_workflow(workflow_id: WorkflowId) -> ReviewResult:
        return service().review_workflow(workflow_id)

    @tool
    async def get_workflow_status(workflow_id: WorkflowId, wait_seconds: WaitSeconds = 0) -> StatusView:
        # Every store read hops to a worker thread and back: a wait holds neither a thread nor a
        # database connection between two looks at the workflow's version.
        if wait_seconds > 0:

            def versions(ids: list[str]) -> dict[str, int]:
                return service().records.versions(ids)  # in the worker thread: may build the app

            await _wait_for_change(versions, workflow_id, wait_seconds, watch)
        return await anyio.to_thread.run_sync(lambda: service().get_workflow_status(workflow_id))

    @tool
    def list_workflows(limit: Limit = None, offset: Offset = 0) -> ListResult:
        return service().list_workflows(limit, offset)

    @tool
    def get_skill_catalog() -> CatalogResult:
        return service().get_skill_catalog()

    if set(functions) != set(TOOL_NAMES):
        raise RuntimeError(f"tool functions {sorted(functions)} do not match the tool table")
    return [_register(spec, functions[spec.name]) for spec in TOOLS]
