"""What a door asks the engine for: one request object per decision, built once by the door (the MCP
tool, the operator CLI, the web console) and passed down unchanged.

A request carries who is asking (``caller``, and ``role`` where the door knows roles) and the
arguments; the service applies every check itself, once per call (the caller's role, the approvals
policy's door, the approval's precheck, the policy in force). Callbacks that belong to the door
(progress reporting, asking the person) are passed next to the request, not inside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vmware_pilot.domain.actor import Actor

if TYPE_CHECKING:  # a door loads this module before anything of the engine (server/tools.py)
    from vmware_pilot.engine.policy import ApprovalChannel
    from vmware_pilot.safety.duties import Role

__all__ = [
    "ApproveRequest",
    "CancelRequest",
    "ConfirmDraftRequest",
    "CreateRequest",
    "DesignRequest",
    "FromTemplateRequest",
    "RejectRequest",
    "Request",
    "RollbackRequest",
    "RunRequest",
    "UpdateDraftRequest",
]

# The requests below put the arguments first, in the order the tool lists them, and then the door
# and the caller's role: ``door`` is ``mcp`` (the tool), ``cli`` (a person at the terminal) or
# ``console`` (the signed-in person), named in the log line of a refusal; ``role`` is the caller's
# role at a door that knows roles (None: no roles, e.g. stdio or the CLI), checked by the service
# against the operation's tool (``safety.roles.call_refusal``) before anything else happens.


@dataclass(frozen=True, slots=True)
class ApproveRequest:
    """Approve the gate workflow ``workflow_id`` waits at.

    ``door``: ``mcp`` (the tool, subject to the approvals policy), ``cli`` (a person at the
    terminal) or ``console`` (the signed-in person). ``role``: the caller's role at a door that
    knows roles (None: no roles, e.g. stdio or the CLI). ``approver``: the name the agent gives
    (an authenticated caller is always the approver). ``expected_digest``: the plan digest the
    person was shown; ``gate_step``: the gate they mean. ``acknowledge_failure``: the approver's
    reason for approving although the gate's prediction says the run fails. ``comment``: the
    approver's words, recorded with the approval."""

    caller: Actor
    workflow_id: str
    door: ApprovalChannel = "mcp"
    role: Role | None = None
    approver: str = ""
    acknowledge_not_executed: bool = False
    expected_digest: str = ""
    gate_step: int | None = None
    acknowledge_failure: str = ""
    comment: str = ""


@dataclass(frozen=True, slots=True)
class RejectRequest:
    """Reject the gate workflow ``workflow_id`` waits at (the workflow is cancelled) with ``reason``.
    ``role``: the caller's role at a door that knows roles (None: no roles); ``rejected_by``: the
    name recorded (empty: the caller); ``door``: ``cli`` or ``console`` (MCP rejects with
    ``cancel_workflow``)."""

    caller: Actor
    workflow_id: str
    reason: str
    role: Role | None = None
    rejected_by: str = ""
    door: ApprovalChannel = "console"


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Create a workflow named ``name`` from ``steps`` (``create_workflow``), kept as a template
    too with ``save_as_template``."""

    caller: Actor
    name: str
    description: str
    steps: list[dict[str, Any]]
    save_as_template: bool = False
    door: ApprovalChannel = "mcp"
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class FromTemplateRequest:
    """Create a workflow from the template ``workflow_type`` with ``params``."""

    caller: Actor
    workflow_type: str
    params: dict[str, Any]
    door: ApprovalChannel = "mcp"
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class DesignRequest:
    """Draft a workflow for ``goal`` within ``constraints`` (``design_workflow``)."""

    caller: Actor
    goal: str
    constraints: str = ""
    door: ApprovalChannel = "mcp"
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class UpdateDraftRequest:
    """Change the draft ``workflow_id``: what is not empty (``steps``: not None) replaces what it
    had."""

    caller: Actor
    workflow_id: str
    name: str = ""
    description: str = ""
    steps: list[dict[str, Any]] | None = None
    door: ApprovalChannel = "mcp"
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class ConfirmDraftRequest:
    """Make the draft ``workflow_id`` a workflow that can run (and a template with
    ``save_as_template``)."""

    caller: Actor
    workflow_id: str
    save_as_template: bool = False
    door: ApprovalChannel = "mcp"
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class RunRequest:
    """Run ``workflow_id`` up to its next gate or its end; ``force``: past a review that says it
    needs revision."""

    caller: Actor
    workflow_id: str
    force: bool = False
    door: ApprovalChannel = "mcp"
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class RollbackRequest:
    """Roll ``workflow_id`` back: without ``confirm`` only its preview (the blast radius);
    ``acknowledge_unknown_effects``: go ahead although some steps' effects are unknown."""

    caller: Actor
    workflow_id: str
    confirm: bool = False
    acknowledge_unknown_effects: bool = False
    door: ApprovalChannel = "mcp"
    role: Role | None = None


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """Cancel ``workflow_id`` with ``reason``: without ``confirm`` only its preview (the blast
    radius); ``acknowledge_unknown_effects`` as for ``RollbackRequest``."""

    caller: Actor
    workflow_id: str
    reason: str = ""
    confirm: bool = False
    acknowledge_unknown_effects: bool = False
    door: ApprovalChannel = "mcp"
    role: Role | None = None


Request = (
    ApproveRequest
    | RejectRequest
    | CreateRequest
    | FromTemplateRequest
    | DesignRequest
    | UpdateDraftRequest
    | ConfirmDraftRequest
    | RunRequest
    | RollbackRequest
    | CancelRequest
)
"""Any request a door hands the service."""
