"""The exception tree every layer raises.

::

    PilotError                       message + hint + structured fields for the client
    ├── WorkflowNotFound             no workflow with that id
    ├── InvalidTransition            (state, event) pair not in the transition table
    ├── StateRefused                 a tool or engine guard refused the workflow's current state
    ├── InvalidInput                 bad arguments: names the field and what to do
    │   ├── ArgumentError            a tool call refused at the door (unknown tool, limit, schema)
    │   ├── StepValidationError      a step dict is malformed (names step index and field)
    │   └── TemplateParamError       a template parameter is missing, unknown or mistyped
    ├── AccessRefused                the caller's role does not allow this tool or approval
    ├── RunawayRefused               the same write call repeated too often in a short time
    ├── PolicyRefused                the policy file denies a step, or who may approve a gate
    ├── StartupRefused               the settings, or a home, database or file they name, cannot be used
    ├── TemplateError                unknown template, unloadable YAML, name clash
    ├── ApprovalGateRefused          the approval-gate rule refused a plan (carries violations + fix)
    ├── ReviewBlocked                run refused on blocking review findings
    ├── StepReferenceError           a ``__from_step_N__`` reference cannot be resolved
    ├── SecretUnavailable            a secret did not survive persistence / env var missing
    ├── StoreError
    │   ├── DatabaseUnavailable      database unreachable or timed out: retry (retryable)
    │   ├── ConcurrencyConflict      stale expected version: reload and retry (retryable)
    │   ├── CorruptRecord            a stored row cannot be decoded
    │   └── SchemaTooNew             database written by a newer vmware-pilot
    ├── AuditChainBroken             audit verification found a bad event
    └── DispatchError                calling a skill's tool failed before or while sending
        ├── DispatchRefused          nothing was sent (cannot start, handshake failed, preflight)
        └── EffectUnknown            sent, but the outcome is unknown (timeout, lost connection)

Every refusal is one of these, raised. ``payload()`` is its body for a client: ``error`` (what
happened), the ``fields`` a client keys on, then ``hint`` (what to do next).
``server/errors.refusal_result`` is the one place that turns one into a tool result, and
``cli/refusals.exit_code`` the one place that turns one into an exit code.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "NOT_FOUND_HINT",
    "QUOTE_CHARS",
    "AccessRefused",
    "ApprovalGateRefused",
    "ArgumentError",
    "AuditChainBroken",
    "ConcurrencyConflict",
    "CorruptRecord",
    "DatabaseUnavailable",
    "DispatchError",
    "DispatchRefused",
    "EffectUnknown",
    "InvalidInput",
    "InvalidTransition",
    "PilotError",
    "PolicyRefused",
    "ReviewBlocked",
    "RunawayRefused",
    "SchemaTooNew",
    "SecretUnavailable",
    "StartupRefused",
    "StateRefused",
    "StepReferenceError",
    "StepValidationError",
    "StoreError",
    "TemplateError",
    "TemplateParamError",
    "WorkflowNotFound",
    "excerpt",
]

QUOTE_CHARS = 200
"""The most characters of a caller's input that a refusal quotes."""


def excerpt(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` when it has at most ``limit`` characters; else its start, marked and with its length.

    Every message that quotes something a caller sent goes through this, so a refusal never
    carries a huge input back.
    """
    if len(text) <= limit:
        return text
    return f"{text[: max(limit - 1, 0)]}… ({len(text)} characters)"


class PilotError(Exception):
    """Base of every error vmware-pilot raises on purpose.

    ``fields`` are structured keys merged into the client payload next to ``error`` and
    ``hint``; their order is kept.
    """

    retryable: bool = False

    def __init__(self, message: str, *, hint: str = "", **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.fields: dict[str, Any] = fields

    def payload(self) -> dict[str, Any]:
        """The refusal payload: ``error`` first, then the structured fields, then ``hint``."""
        out: dict[str, Any] = {"error": self.message}
        out.update(self.fields)
        if self.hint:
            out["hint"] = self.hint
        return out


NOT_FOUND_HINT = "Use list_workflows() to see the workflows and their ids."


class WorkflowNotFound(PilotError):
    def __init__(self, workflow_id: str) -> None:
        super().__init__(
            f"Workflow '{excerpt(workflow_id)}' not found",
            hint=NOT_FOUND_HINT,
        )
        self.workflow_id = workflow_id


class InvalidTransition(PilotError):
    def __init__(self, workflow_id: str, state: str, event: str) -> None:
        super().__init__(
            f"Workflow '{excerpt(workflow_id)}' cannot {event.replace('_', ' ')} from state '{state}'",
            hint="get_workflow_status shows the current state and what it allows.",
            workflow_id=workflow_id,
            state=state,
        )
        self.state = state
        self.event = event


class StateRefused(PilotError):
    """A guard refused because of the workflow's state (payload shape is the caller's choice)."""


class StepsNotExecuted(StateRefused):
    """An approval refused because steps before the gate were handed out and Pilot has no record
    that they ran (field ``not_executed_before_gate``: their ``{index, skill, tool}``)."""

    def __init__(self, message: str, *, workflow_id: str, state: str, steps: list[dict[str, Any]]) -> None:
        super().__init__(message, workflow_id=workflow_id, state=state, not_executed_before_gate=steps)
        self.steps = steps


class AlreadyApproved(StateRefused):
    """An approval refused because this approver already approved the gate (fields ``refused``:
    ``same_approver``, and ``approvals``: who approved so far)."""

    def __init__(
        self, message: str, *, hint: str, workflow_id: str, state: str, approvals: list[str]
    ) -> None:
        super().__init__(
            message,
            hint=hint,
            workflow_id=workflow_id,
            state=state,
            refused="same_approver",
            approvals=approvals,
        )
        self.approvals = approvals


class InvalidInput(PilotError):
    def __init__(self, message: str, *, field: str = "", hint: str = "", **fields: Any) -> None:
        super().__init__(message, hint=hint, **fields)
        self.field = field


class ArgumentError(InvalidInput):
    """A tool call refused before it runs: an unknown tool name, arguments over a limit, or
    arguments the tool's input schema rejects. The payload names the ``field`` right after
    ``error`` (``name`` for an unknown tool, a path such as ``steps[3].params`` otherwise)."""

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.message, "field": self.field}
        out.update(self.fields)
        if self.hint:
            out["hint"] = self.hint
        return out


class StepValidationError(InvalidInput):
    def __init__(self, message: str, *, step_index: int, field: str, hint: str = "") -> None:
        super().__init__(message, field=field, hint=hint, step_index=step_index, field_name=field)
        self.step_index = step_index


class TemplateParamError(InvalidInput):
    pass


class AccessRefused(PilotError):
    """The caller's role does not allow the call (fields: ``role``, and ``tool`` for a tool call)."""


class RunawayRefused(PilotError):
    """The same write call (tool, arguments, caller) came too often within the window."""


class PolicyRefused(PilotError):
    """The policy in force refuses this (fields: ``refused``, ``rule``, ``policy_digest``): a denied
    step at any door, or an approver the gate's policy rule does not accept."""


class StartupRefused(PilotError):
    """A command could not start: its settings, or a home, database or file they name, cannot be
    used. Nothing ran; the fix is in the environment (a usage error for the command line)."""


class TemplateError(PilotError):
    pass


class ApprovalGateRefused(PilotError):
    """Carries ``approval_gate_violations`` and ``fix`` (and, from run, ``blocking_findings``)."""


class ReviewBlocked(PilotError):
    pass


class StepReferenceError(PilotError):
    pass


class SecretUnavailable(PilotError):
    pass


class StoreError(PilotError):
    pass


class DatabaseUnavailable(StoreError):
    """The database could not be reached or timed out; nothing was committed: retry."""

    retryable = True

    def __init__(self, message: str, *, hint: str = "", **fields: Any) -> None:
        super().__init__(message, hint=hint, retryable=True, **fields)


class ConcurrencyConflict(StoreError):
    retryable = True

    def __init__(self, workflow_id: str, expected: int, actual: int | None) -> None:
        super().__init__(
            f"Workflow '{workflow_id}' was changed by someone else (expected version {expected}, "
            f"found {actual})",
            hint="Reload the workflow and try again.",
            workflow_id=workflow_id,
        )
        self.workflow_id = workflow_id
        self.expected = expected
        self.actual = actual


class CorruptRecord(StoreError):
    def __init__(self, workflow_id: str, reason: str) -> None:
        super().__init__(
            f"Workflow '{workflow_id}' could not be read ({reason}); nothing changed",
            hint="The stored record is damaged. `vmware-pilot audit verify --workflow "
            f"{workflow_id}` shows its history; create a new workflow for the same goal.",
            workflow_id=workflow_id,
        )
        self.workflow_id = workflow_id
        self.reason = reason


class SchemaTooNew(StoreError):
    pass


class AuditChainBroken(PilotError):
    pass


class DispatchError(PilotError):
    pass


class DispatchRefused(DispatchError):
    """Nothing was sent to the skill: safe to retry."""


class EffectUnknown(DispatchError):
    """The call was sent but its outcome is unknown; ``payload`` is whatever came back."""

    def __init__(self, message: str, *, payload: Any = None, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.result_payload = payload
