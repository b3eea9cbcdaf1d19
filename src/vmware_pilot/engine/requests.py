"""What a door asks the engine for: one request object per decision, built once by the door (the MCP
tool, the operator CLI, the web console) and passed down unchanged.

A request carries who is asking (``caller``, and ``role`` where the door knows roles) and the
arguments; the service applies every check itself, once per call (the caller's role, the approvals
policy's door, the approval's precheck, the policy in force). Callbacks that belong to the door
(progress reporting, asking the person) are passed next to the request, not inside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vmware_pilot.domain.actor import Actor

if TYPE_CHECKING:  # a door loads this module before anything of the engine (server/tools.py)
    from vmware_pilot.engine.policy import ApprovalChannel
    from vmware_pilot.safety.duties import Role

__all__ = ["ApproveRequest", "RejectRequest"]


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
    name recorded (empty: the caller)."""

    caller: Actor
    workflow_id: str
    reason: str
    role: Role | None = None
    rejected_by: str = ""
