"""The caller's role applied, in one place for every door that knows roles (MCP over the network,
the web console): which tools a call may use, what a page or resource may show, who may approve
which workflow. The rules themselves are ``safety.duties``; this turns them into the refusals
(``AccessRefused``, with a hint saying how to get the right) every door gives in the same words."""

from __future__ import annotations

from collections.abc import Collection

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Workflow
from vmware_pilot.errors import AccessRefused
from vmware_pilot.safety.duties import Role, approval_refusal, tool_refusal

__all__ = ["APPROVE_HINT", "approve_refusal", "call_refusal", "read_refusal"]

APPROVE_HINT = (
    "Have someone whose role allows approving (approve: any, or approve: others for a workflow "
    "they did not create or edit) approve it."
)


def _how(actor: Actor) -> str:
    """Where an administrator changes ``actor``'s role."""
    return (
        "a group of yours mapped to it in the roles file"
        if actor.kind == "oidc"
        else f"`vmware-pilot token set-role {actor.name} ROLE`"
    )


def call_refusal(actor: Actor, role: Role, tool: str) -> AccessRefused | None:
    """Why ``actor`` (with ``role``) may not call ``tool`` at all, or None when it may."""
    reason = tool_refusal(role, tool)
    if reason is None:
        return None
    return AccessRefused(
        f"{reason}.",
        hint=f"Ask an administrator for a role that includes {tool} ({_how(actor)}), or use a tool "
        "this role lists.",
        role=role.name,
        tool=tool,
    )


def approve_refusal(actor: Actor, role: Role, wf: Workflow) -> AccessRefused | None:
    """Why ``actor`` (with ``role``) may not approve ``wf`` by its approve rule (``approve: none``,
    or ``approve: others`` on a workflow the caller created or edited); whether the role has the
    ``approve`` tool at all is ``call_refusal``'s, asked first."""
    reason = approval_refusal(role, actor, wf)
    if reason is None:
        return None
    return AccessRefused(f"{reason}.", hint=APPROVE_HINT, role=role.name, tool="approve")


def read_refusal(actor: Actor, role: Role, tools: Collection[str]) -> AccessRefused | None:
    """Why ``actor`` (with ``role``) may not see what ``tools`` show, or None when any one of them
    is the role's: the one rule for reads outside the tools themselves (resources, completions,
    subscriptions, the web console's pages)."""
    if any(tool_refusal(role, tool) is None for tool in tools):
        return None
    first = next(iter(tools))
    return AccessRefused(
        f"{tool_refusal(role, first)}.",
        hint=f"Ask an administrator for a role that includes {' or '.join(tools)} ({_how(actor)}).",
        role=role.name,
    )
