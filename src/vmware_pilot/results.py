"""The results of the 13 tools as typed models, one per tool (docs/contract.md#tools).

The engine still builds each result as the dict the contract gives; ``result_of`` (below) turns it
into its model at the door. The MCP layer declares every tool's ``outputSchema`` from these models
and writes a model back as exactly the JSON the dict was: a ``Result`` is serialised with the keys
it was built with, in the order it was built with (a key the engine leaves out, such as
``pending_dispatch`` when nothing was handed out, stays out; the contract's key order stays).
The CLI, the approval form and the webhook body read the models' attributes, never string keys.

A key a model does not declare is kept and passed through (the schemas allow it), so a key the
engine adds later cannot break a tool; ``undeclared_keys`` finds such keys, and a test holds
every result of every tool free of them.

Schemas stay compact, because an MCP client may validate every result against them: no titles,
no defaults, free-form parts (step params and results, the diff report, template inputs) are
plain objects, and each tool's schema holds every model it uses once, under ``$defs``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    RootModel,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

__all__ = [
    "ActiveWorkflow",
    "ApproveResult",
    "AuditLine",
    "BlastRadius",
    "CancelResult",
    "CatalogResult",
    "CatalogSkill",
    "CatalogTool",
    "ConfirmDraftResult",
    "CreateResult",
    "Decision",
    "DecisionChange",
    "DesignResult",
    "DraftResult",
    "DraftStep",
    "Eligibility",
    "Finding",
    "FromTemplateResult",
    "GateApproval",
    "GatePolicy",
    "GateStatus",
    "GateViolation",
    "Handout",
    "HeldStep",
    "InFlight",
    "ListResult",
    "PlannedStep",
    "PredictedChange",
    "PredictedStep",
    "Prediction",
    "Preview",
    "RecordStep",
    "Refusal",
    "Result",
    "ReviewResult",
    "ReviewSummary",
    "RollbackEntry",
    "RollbackResult",
    "RunResult",
    "StatusView",
    "StepRef",
    "TemplateExample",
    "TemplateInfo",
    "TemplateParameter",
    "UndoEntry",
    "WorkflowRecord",
    "WorkflowRef",
    "result_of",
    "undeclared_keys",
]

M = TypeVar("M", bound=BaseModel)


def _compact(schema: dict[str, Any]) -> None:
    """Drop what validation does not use: the titles pydantic writes on the model and on every
    property (the names say it) and the properties' defaults (the model fills those in)."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
            prop.pop("default", None)


class Result(BaseModel):
    """A typed result written back with exactly the keys it was built with, in that order."""

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra=_compact)

    # The mapping the result was built from (its keys, in order), or () for one built otherwise.
    _keys: Mapping[str, Any] | tuple[()] = PrivateAttr(default=())
    # Set by ``result_of`` on the model it returns: the engine's plain mapping, which is already
    # what ``payload`` would write (a frozen model cannot drift from it), so it is written as is.
    _source: Mapping[str, Any] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_keys(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        made = handler(data)
        if isinstance(data, Mapping) and isinstance(made, Result):
            # Straight into the private store (not through __setattr__): this runs for every
            # object inside a result, hundreds in a listing.
            made.__pydantic_private__["_keys"] = data  # type: ignore[index]
        return made

    @model_serializer(mode="wrap")
    def _in_built_order(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if not isinstance(out, dict):
            return out
        keys = self._keys or tuple(k for k in type(self).model_fields if k in self.model_fields_set)
        return {k: out[k] for k in keys if k in out}

    def has(self, key: str) -> bool:
        """Whether the result carries ``key`` at all (an optional key the engine may leave out)."""
        return key in self._keys if self._keys else key in self.model_fields_set

    def payload(self) -> dict[str, Any]:
        """The JSON object a client receives."""
        if self._source is not None:
            return dict(self._source)
        dumped: dict[str, Any] = self.model_dump(mode="json")
        return dumped


def undeclared_keys(model: BaseModel, where: str = "") -> Iterator[str]:
    """The paths of keys ``model`` (and the models inside it) carries without declaring them."""
    for key in model.model_extra or {}:
        yield f"{where}{key}"
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = (
            value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else [value]
        )
        for i, item in enumerate(items):
            if isinstance(item, BaseModel):
                yield from undeclared_keys(item, f"{where}{name}[{i}].")
    if isinstance(model, RootModel) and isinstance(model.root, dict):
        for key, item in model.root.items():
            if isinstance(item, BaseModel):
                yield from undeclared_keys(item, f"{where}{key}.")


def result_of(model: type[M], payload: Mapping[str, Any] | M) -> M:
    """``payload`` (the engine's dict) as ``model``; a model passes through."""
    if isinstance(payload, model):
        return payload
    made = model.model_validate(payload)
    if isinstance(made, Result):
        made.__pydantic_private__["_source"] = payload  # type: ignore[index]
    return made


# --- the workflow record (docs/contract.md#the-workflow-record) -------------------------------
class RecordStep(Result):
    index: int
    action: str
    skill: str
    tool: str
    params: dict[str, Any]
    status: str
    result: Any = None
    started_at: str | None = None
    completed_at: str | None = None
    rollback_tool: str = ""
    rollback_params: dict[str, Any] = Field(default_factory=dict)
    group_id: str = ""


class AuditLine(Result):
    ts: str
    action: str
    detail: str
    actor: str = ""


class GateApproval(Result):
    approver: str
    at: str
    channel: str = ""
    digest: str = ""
    # The prediction the approval was given for, and the reason given for approving despite a
    # failing one (``approve``'s ``acknowledge_predicted_failure``).
    verdict: str = ""
    acknowledged_failure: str = ""
    # The digest of the policy in force when the approval was judged (docs/policies.md).
    policy_digest: str = ""

    # The approver's comment (``approve``'s ``comment``), when they gave one.
    comment: str = ""


class GatePolicy(Result):
    """The policy rule a gate follows (docs/policies.md): the strictest approval rule matching a
    step it releases, recorded when the run reached the gate."""

    rule: str
    quorum: int = 1
    approvers: list[str] = Field(default_factory=list)
    requester_may_approve: bool = True
    max_validity_minutes: float | None = None
    policy_digest: str = ""
    step_index: int = 0
    why: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        """One line for a person: the rule, the quorum, who may approve, for how long."""
        who = ", ".join(self.approvers) or "any role that may approve"
        line = f"policy rule '{self.rule}': {self.quorum} approval(s) by {who}"
        if not self.requester_may_approve:
            line += "; the requester may not approve"
        if self.max_validity_minutes is not None:
            line += f"; valid {self.max_validity_minutes:g} minutes at most"
        return line


class GateStatus(Result):
    """One approval gate a run reached (``gates``), or the pending one (``pending_gate``; ``{}``
    for a workflow left awaiting approval with no pending gate, which a run result may show)."""

    index: int = -1
    status: str = ""
    message: str = ""
    digest: str = ""
    reached_at: str = ""
    expires_at: str = ""
    expired: bool = False
    approvals_required: int = 1
    approvals: list[GateApproval] = Field(default_factory=list)
    approvals_missing: int = 0
    plan_changed: bool = False
    # A gate opened again by a check right before a write (engine/execution/holds.py): why, and
    # the records of the approvals given before it.
    hold: dict[str, Any] | None = None
    earlier: list[dict[str, Any]] = Field(default_factory=list)
    # With a policy in force: the rule that set the gate's quorum and who may approve.
    policy: GatePolicy | None = None


class StepRef(Result):
    """The short ``{index, skill, tool}`` form of a step in a list."""

    index: int
    skill: str
    tool: str


class InFlight(StepRef):
    started_at: str | None = None
    run_by: str = ""


class HeldStep(StepRef):
    """A step handed to another caller (``with_another_caller``)."""

    handed_to: str = ""


class Handout(StepRef):
    """A step handed to the caller to perform (``pending_dispatch``)."""

    params: dict[str, Any] = Field(default_factory=dict)
    group_id: str = ""
    rollback_tool: str = ""
    # A write's checks Pilot would make right before sending it (the drift check), the agent's here.
    agent_checks: list[str] = Field(default_factory=list)


class RollbackEntry(Result):
    """One entry of ``rollback_results``."""

    step: int
    tool: str
    status: str
    reason: str = ""
    error: str = ""
    left_behind: str = ""
    result: Any = None  # what the undo tool answered


class WorkflowRecord(Result):
    id: str
    workflow_type: str
    state: str
    steps: list[RecordStep]
    params: dict[str, Any]
    created_at: str
    updated_at: str
    approved_by: str = ""
    diff_report: dict[str, Any] = Field(default_factory=dict)
    audit_log: list[AuditLine] = Field(default_factory=list)
    blocked_reason: str = ""
    rollback_results: list[RollbackEntry] = Field(default_factory=list)
    created_by: str = ""
    authors: list[str] = Field(default_factory=list)
    gates: list[GateStatus] = Field(default_factory=list)
    in_flight: list[InFlight] = Field(default_factory=list)


class PredictedChange(Result):
    """One change a step is predicted to make: ``object``'s ``field`` from ``before`` to ``after``
    (None: not known)."""

    object: str
    field: str
    before: Any = None
    after: Any = None


class PredictedStep(Result):
    """One released step as predicted (``safety.predict``)."""

    step: int
    skill: str = ""
    tool: str = ""
    outcome: Literal["succeeds", "no_change", "refused", "fails", "unknown"]
    reason: str = ""
    changes: list[PredictedChange] = Field(default_factory=list)
    # Where the outcome comes from: Pilot's effect table ("model") or a run on a twin ("rehearsal").
    source: Literal["model", "rehearsal"] = "model"


class Rehearsal(Result):
    """The released steps run on a twin of the inventory (``twin.rehearse``): its ``verdict``, why
    it is ``unknown``, the capture it used (with its age and whether it is ``stale``), each step's
    outcome and the skill's answer, what changed on the twin, where it disagrees with the model,
    and the ``digest`` approvals bind to."""

    status: Literal["rehearsed", "unknown"]
    verdict: Literal["succeeds", "fails", "unknown"]
    reason: str = ""
    digest: str = ""
    capture: dict[str, Any] = Field(default_factory=dict)
    steps: list[dict[str, Any]] = Field(default_factory=list)
    diff: list[dict[str, Any]] = Field(default_factory=list)
    overlay: list[str] = Field(default_factory=list)
    disagreements: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class Prediction(Result):
    """What approving the pending gate is predicted to do: one ``verdict``, a one-line ``summary``,
    the first failing step and what the steps before it leave (``fails``), and every step."""

    verdict: Literal["succeeds", "fails", "unknown"]
    summary: str = ""
    failing_step: int | None = None
    leaves: str = ""
    at: str = ""
    steps: list[PredictedStep] = Field(default_factory=list)
    rehearsal: Rehearsal | None = None


class DecisionChange(Result):
    """One change approving is predicted to make: step ``step`` (``tool``) moves ``object``'s
    ``field`` from ``before`` to ``after`` (None: not known)."""

    step: int
    tool: str = ""
    object: str
    field: str
    before: Any = None
    after: Any = None


class Decision(Result):
    """The decision summary of a waiting gate (``engine.decision``): what a person needs to decide,
    built once and shown first on every approval surface. ``rehearsal`` is the rehearsal on a twin
    in one line (its verdict, the capture and its age; empty without one). ``requested_via`` is the agent (MCP
    client) that created the workflow when it is not the creator itself; ``seconds_left`` and
    ``expired`` are read on the database's clock at ``at`` (None: the gate never expires)."""

    workflow_id: str
    gate: int
    message: str = ""
    verdict: Literal["succeeds", "fails", "unknown"]
    verdict_summary: str = ""
    failing_step: int | None = None
    rehearsal: str = ""
    changes: list[DecisionChange] = Field(default_factory=list)
    objects: list[str] = Field(default_factory=list)
    requested_by: str = ""
    requested_via: str = ""
    why: str = ""
    ticket: str = ""
    approvals_required: int = 1
    approved_by: list[str] = Field(default_factory=list)
    approvals_missing: int = 0
    expires_at: str = ""
    seconds_left: float | None = None
    expired: bool = False
    plan_changed: bool = False
    at: str = ""


class Eligibility(Result):
    """What one caller may do now at a workflow's waiting gate (``engine.decision.eligibility``).
    ``approve_refused``/``reject_refused``: a code saying why not (empty: allowed), ``approve_why``/
    ``reject_why`` the sentence to show in place of the control."""

    may_approve: bool
    may_reject: bool
    approve_refused: str = ""
    approve_why: str = ""
    reject_refused: str = ""
    reject_why: str = ""


class StatusView(WorkflowRecord):
    """``get_workflow_status``: the record, with ``gates`` and ``in_flight`` when they say something,
    and ``prediction`` and ``decision`` while a gate waits."""

    prediction: Prediction | None = None
    decision: Decision | None = None


# --- blast radius (docs/contract.md#rollback-and-cancel) ----------------------------------------
class WorkflowRef(Result):
    id: str
    type: str
    state: str


class UndoEntry(StepRef):
    """A step in a blast-radius list; undo entries also carry the undo and what it leaves behind."""

    rollback_tool: str = ""
    rollback_params: dict[str, Any] = Field(default_factory=dict)
    leaves_behind: str = ""


class BlastRadius(Result):
    workflow: WorkflowRef
    state_after: str
    unknown_effects_count: int = 0
    unknown_effects: list[StepRef] = Field(default_factory=list)
    unknown_effects_acknowledged: bool = False
    would_roll_back_count: int = 0
    would_roll_back: list[UndoEntry] = Field(default_factory=list)
    left_in_place_count: int = 0
    left_in_place: list[StepRef] = Field(default_factory=list)
    left_in_place_note: str = ""
    not_reversed_by_pilot_count: int = 0
    not_reversed_by_pilot: list[UndoEntry] = Field(default_factory=list)
    not_reversible_outside_pilot_count: int = 0
    not_reversible_outside_pilot: list[StepRef] = Field(default_factory=list)
    not_reversible_outside_pilot_note: str = ""
    left_behind_by_earlier_rollback_count: int = 0
    left_behind_by_earlier_rollback: list[UndoEntry] = Field(default_factory=list)
    performed_outside_pilot_count: int = 0
    performed_outside_pilot: list[StepRef] = Field(default_factory=list)
    would_skip_count: int = 0
    would_skip: list[StepRef] = Field(default_factory=list)
    handed_out_to_caller_count: int = 0
    handed_out_to_caller: list[StepRef] = Field(default_factory=list)
    handed_out_to_caller_note: str = ""
    blockers: list[str] = Field(default_factory=list)
    unmeasured: list[str] = Field(default_factory=list)


# --- run, approve, rollback, cancel ---------------------------------------------------------
class RunResult(WorkflowRecord):
    """``run_workflow``: the record plus ``outcome``, and what was handed out or where it stops.
    ``approve``, ``rollback`` and ``cancel_workflow`` results extend it (a rollback or cancel
    preview is a ``Preview`` instead)."""

    outcome: str = ""
    error: str = ""
    pending_dispatch: list[Handout] = Field(default_factory=list)
    with_another_caller: list[HeldStep] = Field(default_factory=list)
    released_to: str = ""
    message: str = ""
    pending_gate: GateStatus | None = None
    approvals_missing: int = 0


class ApproveResult(RunResult):
    """``approve``: like a run's; a person who rejected the gate at the form gets a cancel's."""

    action: str = ""
    rejected_by: str = ""
    blast_radius: BlastRadius | None = None


class Preview(Result):
    """``rollback`` or ``cancel_workflow`` without ``confirm``: what it would do, nothing changed."""

    action: Literal["preview"]
    workflow_id: str
    blast_radius: BlastRadius
    hint: str = ""


class RollbackResult(RunResult):
    action: str = ""
    blast_radius: BlastRadius | None = None


class CancelResult(RunResult):
    """``cancel_workflow``; a rejection at the CLI or console also names ``rejected_by``."""

    action: str = ""
    rejected_by: str = ""
    blast_radius: BlastRadius | None = None


# --- creating and editing ----------------------------------------------------------------------
class PlannedStep(Result):
    index: int
    action: str
    skill: str
    tool: str


class CreateResult(Result):
    workflow_id: str
    workflow_type: str
    state: str
    steps: list[PlannedStep]
    saved_as_template: bool = False
    message: str = ""
    template_file: str = ""


class FromTemplateResult(Result):
    workflow_id: str
    workflow_type: str
    state: str
    steps: list[PlannedStep]
    params: dict[str, Any] = Field(default_factory=dict)
    message: str = ""


class DesignResult(Result):
    workflow_id: str
    state: str
    goal: str
    constraints: str = ""
    available_skills: list[str] = Field(default_factory=list)
    next_step: str = ""


class DraftStep(PlannedStep):
    has_rollback: bool = False
    group_id: str = ""


class GateViolation(Result):
    step_index: int
    skill: str
    tool: str
    kind: str
    reason: str = ""


class DraftResult(Result):
    """``update_draft``."""

    workflow_id: str
    workflow_type: str
    state: str
    steps: list[DraftStep]
    approval_gate_violations: list[GateViolation] = Field(default_factory=list)
    message: str = ""


class ConfirmDraftResult(Result):
    workflow_id: str
    workflow_type: str
    state: str
    steps_count: int
    saved_as_template: bool = False
    message: str = ""
    template_file: str = ""


# --- reads ---------------------------------------------------------------------------------------
class Finding(Result):
    severity: str
    kind: str
    step_index: int | None = None
    message: str


class ReviewSummary(Result):
    total_steps: int
    destructive_steps: int
    write_steps: int
    read_only_steps: int
    classified_steps: int
    unclassified_steps: int
    approval_gates: int
    parallel_groups: int
    est_duration_min: int | float  # a whole number stays one on the wire


class Refusal(Result):
    """A refusal as a client receives it (``isError`` true): ``error`` first, the keys a client
    acts on, then ``hint``. Other keys a refusal carries are kept as they came."""

    error: str
    workflow_id: str | None = None
    state: str | None = None
    field: str | None = None
    not_executed_before_gate: list[StepRef] | None = None
    hint: str | None = None


class ReviewResult(Result):
    workflow_id: str
    verdict: str
    findings: list[Finding]
    summary: ReviewSummary
    # With a policy in force: which rules apply to the plan (``vmware-pilot policy explain``).
    policy: dict[str, Any] | None = None


class TemplateParameter(Result):
    name: str
    type: str
    required: bool
    description: str = ""
    default: Any = None
    enum: list[Any] = Field(default_factory=list)


class TemplateExample(Result):
    tool: str
    arguments: dict[str, Any]


class TemplateInfo(Result):
    """A template as ``list_workflows`` lists it; a custom file that cannot be used has ``error``."""

    name: str
    type: str
    description: str = ""
    file: str = ""
    steps: int = 0
    parameters: list[TemplateParameter] = Field(default_factory=list)
    example: TemplateExample | None = None
    error: str = ""


class ActiveWorkflow(Result):
    """One listed workflow; ``expired`` (only when true): it waits at a gate that expired."""

    id: str
    type: str
    state: str
    created_at: str
    updated_at: str
    expired: bool = False


class ListResult(Result):
    templates: list[TemplateInfo]
    active_workflows: list[ActiveWorkflow]
    active_total: int = 0
    next_offset: int | None = None


class CatalogTool(Result):
    risk: str
    desc: str = ""


class CatalogSkill(Result):
    description: str = ""
    tools: dict[str, CatalogTool] = Field(default_factory=dict)


class CatalogResult(RootModel[dict[str, CatalogSkill]]):
    """``get_skill_catalog``: ``{skill: {description, tools: {tool: {risk, desc}}}}``."""

    model_config = ConfigDict(json_schema_extra=_compact)

    def payload(self) -> dict[str, Any]:
        dumped: dict[str, Any] = self.model_dump(mode="json")
        return dumped
