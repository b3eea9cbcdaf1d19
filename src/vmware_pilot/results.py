"""The results of the 13 tools as typed models, one per tool (docs/contract.md#tools).

The engine builds each result as its model, once, where it decides the answer; the MCP layer
declares every tool's ``outputSchema`` from these models and writes a model out once
(``Result.payload``). What a client reads is the model: its set keys in the order the model
declares them (a key the engine leaves unset, such as ``pending_dispatch`` when nothing was
handed out, stays out; the declaration order is the contract's key order). The CLI, the console,
the approval form and the webhook body read the models' attributes and predicates
(``is_refusal``, ``is_terminal``, ``is_waiting``, …), never string keys.

Every closed set of values is an enum (``WorkflowState``, ``StepStatus``, ``Outcome`` from the
domain; ``Literal`` sets here), so the output schemas list the allowed values.

A key a model does not declare is kept and passed through (the schemas allow it), so a key the
engine adds later cannot break a tool; ``undeclared_keys`` finds such keys, and a test holds
every result of every tool free of them.

Schemas stay compact, because an MCP client may validate every result against them: no titles,
no defaults, free-form parts (step params and results, the diff report, template inputs) are
plain objects, and each tool's schema holds every model it uses once, under ``$defs``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    RootModel,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from vmware_pilot.domain.enums import GATE_ACTION, TERMINAL_STATES, Outcome, StepStatus, WorkflowState

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
    "ConflictsNote",
    "CreateResult",
    "Decision",
    "DecisionChange",
    "DeniedStep",
    "DesignResult",
    "DraftResult",
    "DraftStep",
    "Eligibility",
    "Finding",
    "FromTemplateResult",
    "GateApproval",
    "GateDemand",
    "GatePolicy",
    "GateStatus",
    "GateViolation",
    "Handout",
    "HeldObject",
    "HeldStep",
    "InFlight",
    "ListResult",
    "Outcome",
    "PlannedStep",
    "PolicyExplanation",
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
    "StepStatus",
    "TemplateExample",
    "TemplateInfo",
    "TemplateParameter",
    "UndoEntry",
    "WindowEntry",
    "WorkflowRecord",
    "WorkflowRef",
    "WorkflowState",
    "undeclared_keys",
]

M = TypeVar("M", bound=BaseModel)

# The closed sets of values the results carry (the domain's states, statuses and outcomes above).
Verdict = Literal["succeeds", "fails", "unknown"]
Severity = Literal["low", "medium", "high"]
ReviewVerdict = Literal["approved", "needs_revision"]
Risk = Literal["low", "medium", "high", "critical"]
TemplateKind = Literal["builtin", "custom"]
ApprovalChannel = Literal["mcp", "elicit", "cli", "console"]
UndoStatus = Literal["success", "partial", "failed", "unknown", "not_reversible", "skipped"]
EndAction = Literal["cancelled", "rolled_back", "rollback_incomplete"]
ApproveRefused = Literal[
    "not_waiting",
    "gate_expired",
    "plan_changed",
    "door_closed",
    "role_cannot_approve",
    "creator_four_eyes",
    "author_four_eyes",
    "no_creator",
    "already_approved",
    "policy",
]


def _compact(schema: dict[str, Any]) -> None:
    """Drop what validation does not use: the titles pydantic writes on the model and on every
    property (the names say it) and the properties' defaults (the model fills those in)."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
            prop.pop("default", None)


class Result(BaseModel):
    """A typed result. Written out with the keys that were set when it was built (explicitly,
    even to a default value), in the order the model declares them; undeclared keys last."""

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra=_compact)

    @model_serializer(mode="wrap")
    def _set_keys_in_declared_order(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if not isinstance(out, dict):
            return out
        return {k: out[k] for k in self._key_order() if k in out}

    def _key_order(self) -> list[str]:
        """The keys written out, in order: the set ones as declared, then undeclared ones."""
        chosen = self.model_fields_set
        return [*(k for k in type(self).model_fields if k in chosen), *(self.model_extra or {})]

    def has(self, key: str) -> bool:
        """Whether the result carries ``key`` at all (an optional key the engine may leave out)."""
        return key in self.model_fields_set or key in (self.model_extra or {})

    def but(self, **update: Any) -> Self:
        """This result with ``update``'s keys set (and written out)."""
        return self.model_copy(update=update)

    @classmethod
    def extending(cls, base: Result, **more: Any) -> Self:
        """A ``cls`` carrying ``base``'s set keys and ``more``: a run's result as an approval's,
        a rollback's or a cancel's."""
        kept = {k: getattr(base, k) for k in type(base).model_fields if k in base.model_fields_set}
        return cls.model_validate({**kept, **(base.model_extra or {}), **more})

    def payload(self) -> dict[str, Any]:
        """The JSON object a client receives (enums as their string values)."""
        dumped: dict[str, Any] = self.model_dump()
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


# --- the workflow record (docs/contract.md#the-workflow-record) -------------------------------
class RecordStep(Result):
    index: int
    action: str
    skill: str
    tool: str
    params: dict[str, Any]
    status: StepStatus
    result: Any = None
    started_at: str | None = None
    completed_at: str | None = None
    rollback_tool: str = ""
    rollback_params: dict[str, Any] = Field(default_factory=dict)
    group_id: str = ""

    @property
    def is_gate(self) -> bool:
        """An approval gate (``action: require_approval``)."""
        return self.action == GATE_ACTION


class AuditLine(Result):
    ts: str
    action: str
    detail: str
    actor: str = ""


class GateApproval(Result):
    approver: str
    at: str
    channel: ApprovalChannel | Literal[""] = ""
    digest: str = ""
    # The prediction the approval was given for, and the reason given for approving despite a
    # failing one (``approve``'s ``acknowledge_predicted_failure``).
    # The prediction's verdict, with the rehearsal's after ``|`` when there was one: not a closed set.
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
    """One approval gate a run reached (``gates``), or the pending one (``pending_gate``)."""

    # A run result may show ``{}`` (no key set) for a workflow left awaiting approval with no
    # pending gate: hence the defaults, and ``status`` None.

    index: int = -1
    status: StepStatus | None = None
    message: str = ""
    digest: str = ""
    reached_at: str = ""
    expires_at: str = ""
    expired: bool = False
    approvals_required: int = 1
    approvals: list[GateApproval] = Field(default_factory=list)
    approvals_missing: int = 0
    # With a policy in force: the rule that set the gate's quorum and who may approve.
    policy: GatePolicy | None = None
    # A gate opened again by a check right before a write (engine/execution/holds.py): why, and
    # the records of the approvals given before it.
    hold: dict[str, Any] | None = None
    earlier: list[dict[str, Any]] = Field(default_factory=list)
    plan_changed: bool = False


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
    status: UndoStatus
    reason: str = ""
    error: str = ""
    left_behind: str = ""
    result: Any = None  # what the undo tool answered


class WorkflowRecord(Result):
    id: str
    workflow_type: str
    state: WorkflowState
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
    in_flight: list[InFlight] = Field(default_factory=list)
    gates: list[GateStatus] = Field(default_factory=list)

    @property
    def is_terminal(self) -> bool:
        """Completed, failed or cancelled: nothing more happens to the workflow."""
        return self.state in TERMINAL_STATES

    @property
    def is_waiting(self) -> bool:
        """Waiting at an approval gate."""
        return self.state is WorkflowState.AWAITING_APPROVAL

    @property
    def is_running(self) -> bool:
        return self.state is WorkflowState.RUNNING

    @property
    def has_completed(self) -> bool:
        """Ended with every step done (the state ``completed``)."""
        return self.state is WorkflowState.COMPLETED


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

    verdict: Verdict
    summary: str = ""
    failing_step: int | None = None
    leaves: str = ""
    steps: list[PredictedStep] = Field(default_factory=list)
    # When the gate's targets were read for it (the inspection), then the rehearsal on a twin.
    at: str = ""
    rehearsal: Rehearsal | None = None

    @property
    def predicts_failure(self) -> bool:
        return self.verdict == "fails"


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
    verdict: Verdict
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
    approve_refused: ApproveRefused | Literal[""] = ""
    approve_why: str = ""
    reject_refused: Literal["not_waiting", "role_cannot_reject", ""] = ""
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
    state: WorkflowState


class UndoEntry(StepRef):
    """A step in a blast-radius list; undo entries also carry the undo and what it leaves behind."""

    rollback_tool: str = ""
    rollback_params: dict[str, Any] = Field(default_factory=dict)
    leaves_behind: str = ""


class BlastRadius(Result):
    workflow: WorkflowRef
    state_after: WorkflowState
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
    left_behind_by_earlier_rollback_count: int = 0
    left_behind_by_earlier_rollback: list[UndoEntry] = Field(default_factory=list)
    not_reversible_outside_pilot_note: str = ""
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

    outcome: Outcome | None = None
    pending_dispatch: list[Handout] = Field(default_factory=list)
    message: str = ""
    with_another_caller: list[HeldStep] = Field(default_factory=list)
    released_to: str = ""
    pending_gate: GateStatus | None = None
    approvals_missing: int = 0
    error: str = ""

    # The keys after the record, in the contract's order for each kind of answer (``_key_order``).
    _HANDED_OUT: ClassVar[tuple[str, ...]] = (
        "outcome",
        "pending_dispatch",
        "message",
        "with_another_caller",
        "pending_gate",
        "approvals_missing",
        "error",
    )
    # Steps released to another caller (an approval at the CLI or console without dispatch).
    _RELEASED: ClassVar[tuple[str, ...]] = (
        "pending_gate",
        "with_another_caller",
        "outcome",
        "released_to",
        "message",
    )
    # Nothing handed to the caller: the message (an approval the gate still waits for more of) last.
    _OTHERWISE: ClassVar[tuple[str, ...]] = (
        "outcome",
        "with_another_caller",
        "pending_gate",
        "approvals_missing",
        "error",
        "message",
    )
    _ENDING: ClassVar[tuple[str, ...]] = ("action", "rejected_by", "blast_radius")

    def _tail(self) -> tuple[str, ...]:
        if self.has("released_to"):
            return self._RELEASED
        return self._HANDED_OUT if self.has("pending_dispatch") else self._OTHERWISE

    def _key_order(self) -> list[str]:
        declared = super()._key_order()
        record = [k for k in WorkflowRecord.model_fields if k in declared]
        after = [k for k in (*self._tail(), *self._ENDING) if k in declared]
        rest = [k for k in declared if k not in record and k not in after]
        return [*record, *after, *rest]

    @property
    def is_refusal(self) -> bool:
        """The contract's isError rule: a truthy ``error`` or a failed ``outcome``."""
        return bool(self.error) or self.outcome is Outcome.FAILED

    @property
    def is_failed(self) -> bool:
        return self.outcome is Outcome.FAILED

    @property
    def is_completed(self) -> bool:
        return self.outcome is Outcome.COMPLETED

    @property
    def is_dispatch_required(self) -> bool:
        """Steps were handed back to be performed outside Pilot."""
        return self.outcome is Outcome.DISPATCH_REQUIRED

    @property
    def is_at_gate(self) -> bool:
        """The run stopped at an approval gate."""
        return self.outcome is Outcome.AWAITING_APPROVAL


class ApproveResult(RunResult):
    """``approve``: like a run's; a person who rejected the gate at the form gets a cancel's."""

    action: EndAction | None = None
    rejected_by: str = ""
    blast_radius: BlastRadius | None = None

    @property
    def is_rejection(self) -> bool:
        """A person rejected the gate at the form: the workflow was cancelled."""
        return self.action == "cancelled"


class Preview(Result):
    """``rollback`` or ``cancel_workflow`` without ``confirm``: what it would do, nothing changed."""

    action: Literal["preview"]
    workflow_id: str
    blast_radius: BlastRadius
    hint: str = ""


class RollbackResult(RunResult):
    action: EndAction | None = None
    blast_radius: BlastRadius | None = None

    # A rollback's outcome and error are set after the record's other keys.
    def _tail(self) -> tuple[str, ...]:
        first = tuple(k for k in super()._tail() if k not in ("outcome", "error"))
        return (*first, "outcome", "error")

    @property
    def is_incomplete(self) -> bool:
        return self.action == "rollback_incomplete"


class CancelResult(RunResult):
    """``cancel_workflow``; a rejection at the CLI or console also names ``rejected_by``."""

    action: EndAction | None = None
    rejected_by: str = ""
    blast_radius: BlastRadius | None = None


# --- creating and editing ----------------------------------------------------------------------
class PlannedStep(Result):
    index: int
    action: str
    skill: str
    tool: str

    @property
    def is_gate(self) -> bool:
        """An approval gate (``action: require_approval``)."""
        return self.action == GATE_ACTION


class CreateResult(Result):
    workflow_id: str
    workflow_type: str
    state: WorkflowState
    steps: list[PlannedStep]
    saved_as_template: bool = False
    message: str = ""
    template_file: str = ""


class FromTemplateResult(Result):
    workflow_id: str
    workflow_type: str
    state: WorkflowState
    steps: list[PlannedStep]
    params: dict[str, Any] = Field(default_factory=dict)
    message: str = ""


class DesignResult(Result):
    workflow_id: str
    state: WorkflowState
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
    state: WorkflowState
    steps: list[DraftStep]
    approval_gate_violations: list[GateViolation] = Field(default_factory=list)
    message: str = ""


class ConfirmDraftResult(Result):
    workflow_id: str
    workflow_type: str
    state: WorkflowState
    steps_count: int
    saved_as_template: bool = False
    message: str = ""
    template_file: str = ""


# --- reads ---------------------------------------------------------------------------------------
class Finding(Result):
    severity: Severity
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


class DeniedStep(Result):
    """A step the policy in force denies (``explain``'s ``denied``)."""

    step_index: int
    tool: str
    rule: str
    reason: str = ""
    why: list[str] = Field(default_factory=list)


class GateDemand(Result):
    """What the policy asks of one gate (``explain``'s ``approvals``): the rule whose demand
    applies (``rule`` None: none does), its quorum, approvers and validity."""

    gate_step: int
    rule: str | None = None
    quorum: int | None = None
    approvers: list[str] = Field(default_factory=list)
    requester_may_approve: bool = True
    max_validity_minutes: float | None = None
    step_index: int | None = None
    why: list[str] = Field(default_factory=list)


class WindowEntry(Result):
    """A change window or blackout governing a step; the last of a step's also says whether the
    step may run now (``open_now``) and when it may next (``next_opening``, None: never)."""

    step_index: int
    window: str
    blackout: bool = False
    active_now: bool = False
    approvers: list[str] = Field(default_factory=list)
    open_now: bool | None = None
    next_opening: str | None = None


class HeldObject(Result):
    """An object a write step names that another workflow holds (conflict locks)."""

    step_index: int | None = None
    workflow_id: str = ""
    state: WorkflowState | None = None
    owner: str = ""
    object: str = ""
    message: str = ""


class ConflictsNote(Result):
    mode: Literal["refuse", "wait"]
    conflicting: list[HeldObject] = Field(default_factory=list)


class PolicyExplanation(Result):
    """Which rules of the policy in force apply to a workflow's steps and gates, and why
    (``vmware-pilot policy explain``; ``review_workflow``'s ``policy``)."""

    workflow_id: str = ""
    policy_digest: str
    denied: list[DeniedStep] = Field(default_factory=list)
    approvals: list[GateDemand] = Field(default_factory=list)
    windows: list[WindowEntry] = Field(default_factory=list)
    conflicts: ConflictsNote

    @property
    def says_nothing(self) -> bool:
        """No step denied, no window, no gate with a rule: the policy asks nothing of the plan."""
        return not (self.denied or self.windows or any(a.rule for a in self.approvals))


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
    verdict: ReviewVerdict
    findings: list[Finding]
    summary: ReviewSummary
    # With a policy in force: which rules apply to the plan (``vmware-pilot policy explain``).
    policy: PolicyExplanation | None = None

    @property
    def needs_revision(self) -> bool:
        return self.verdict == "needs_revision"


class TemplateParameter(Result):
    """One input of a template, built-in (``templates.params.parameters_of`` its model) or custom
    (its YAML ``parameters`` block): what ``list_workflows`` lists, what a hint names (``text``)
    and, for a custom template, what binding checks. Written out as ``{name, type, required,
    description}`` plus ``default`` when it is optional and ``enum`` when only some values are
    accepted; build it with ``declared`` so that holds."""

    name: str
    type: str
    required: bool
    description: str = ""
    default: Any = None
    enum: list[Any] = Field(default_factory=list)
    # Whether an optional parameter has a default (an optional one without is listed with
    # ``default: null`` but left out when binding); not on the wire.
    _has_default: bool = PrivateAttr(default=False)

    @classmethod
    def declared(
        cls,
        name: str,
        type: str,
        required: bool,
        description: str = "",
        default: Any = None,
        has_default: bool = False,
        enum: Sequence[Any] | None = None,
    ) -> Self:
        """A parameter as declared: ``default`` kept (and listed) only when it is optional."""
        fields: dict[str, Any] = {
            "name": name,
            "type": type,
            "required": required,
            "description": description,
        }
        if not required:
            fields["default"] = default
        if enum is not None:
            fields["enum"] = list(enum)
        parameter = cls(**fields)
        parameter._has_default = has_default and not required
        return parameter

    @property
    def has_default(self) -> bool:
        return self._has_default

    def text(self) -> str:
        """``name (type, required)``, ``name (type, default 5)``, ``…, one of 'a', 'b')``."""
        if self.required:
            text = f"{self.name} ({self.type}, required)"
        elif self.has_default:
            text = f"{self.name} ({self.type}, default {self.default!r})"
        else:
            text = f"{self.name} ({self.type}, optional)"
        if self.enum:
            return f"{text[:-1]}, one of {', '.join(map(repr, self.enum))})"
        return text


class TemplateExample(Result):
    tool: str
    arguments: dict[str, Any]


class TemplateInfo(Result):
    """A template as ``list_workflows`` lists it; a custom file that cannot be used has ``error``."""

    name: str
    type: TemplateKind
    description: str = ""
    file: str = ""
    steps: int = 0
    parameters: list[TemplateParameter] = Field(default_factory=list)
    example: TemplateExample | None = None
    error: str = ""

    def _key_order(self) -> list[str]:
        declared = super()._key_order()
        if self.error:  # a custom file that cannot be used
            order: tuple[str, ...] = ("name", "file", "type", "error")
        elif self.type == "custom":
            order = ("name", "description", "file", "steps", "type", "parameters", "example")
        else:
            return declared
        return [*(k for k in order if k in declared), *(k for k in declared if k not in order)]

    @property
    def is_usable(self) -> bool:
        return not self.error


class ActiveWorkflow(Result):
    """One listed workflow; ``expired`` (only when true): it waits at a gate that expired."""

    id: str
    type: str
    state: WorkflowState
    created_at: str
    updated_at: str
    expired: bool = False

    @property
    def is_waiting(self) -> bool:
        return self.state is WorkflowState.AWAITING_APPROVAL

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


class ListResult(Result):
    templates: list[TemplateInfo]
    active_workflows: list[ActiveWorkflow]
    active_total: int = 0
    next_offset: int | None = None


class CatalogTool(Result):
    risk: Risk
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
