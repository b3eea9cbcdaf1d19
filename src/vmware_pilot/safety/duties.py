"""Roles and separation of duties over the network: which tools a caller may use, who may approve.

Pure rules, no I/O. Built-in roles are ``admin`` (every tool, approves any workflow) and
``reader`` (the read tools only, never approves): which tools each may call is the tool table's
(``vmware_pilot.tooltable``). Custom roles come from the roles file.
``approve: others`` is the four-eyes rule: nobody approves a workflow they created or edited.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Workflow
from vmware_pilot.tooltable import READ_TOOLS

__all__ = [
    "ADMIN",
    "APPROVE_RULES",
    "BUILTIN_ROLES",
    "NAME_PATTERN",
    "READER",
    "READ_TOOLS",
    "ApproveRule",
    "Role",
    "approval_refusal",
    "approve_refusal",
    "is_valid_name",
    "tool_refusal",
]

ApproveRule = Literal["any", "others", "none"]
APPROVE_RULES: tuple[ApproveRule, ...] = ("any", "others", "none")

# Token and role names: what a person types, safe in a file line, a log and a header.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_NAME = re.compile(rf"^{NAME_PATTERN}$")


def is_valid_name(name: str) -> bool:
    """A token or role name: a letter or digit, then up to 63 letters, digits, ``.``, ``_`` or ``-``."""
    return bool(_NAME.match(name))


@dataclass(frozen=True, slots=True)
class Role:
    """What a caller may do. ``tools`` None means every tool."""

    name: str
    approve: ApproveRule
    tools: frozenset[str] | None = None

    def may_call(self, tool: str) -> bool:
        if tool == "approve" and self.approve == "none":
            return False
        return self.tools is None or tool in self.tools

    def visible(self, tools: Iterable[str]) -> list[str]:
        """The tools this role sees in tools/list, in the given order."""
        return [t for t in tools if self.may_call(t)]


ADMIN = Role("admin", "any")
READER = Role("reader", "none", READ_TOOLS)
BUILTIN_ROLES: dict[str, Role] = {ADMIN.name: ADMIN, READER.name: READER}


def tool_refusal(role: Role, tool: str) -> str | None:
    """Why ``role`` may not call ``tool``, or None when it may."""
    if role.may_call(tool):
        return None
    if tool == "approve":
        return f"Role '{role.name}' may not call approve: its approve rule is 'none'"
    if role.tools is not None and role.tools <= READ_TOOLS:
        return f"Role '{role.name}' may not call {tool}: the role only reads, and {tool} changes workflows"
    return f"Role '{role.name}' may not call {tool}: the tool is not among the role's tools"


def approve_refusal(role: Role, actor: Actor, wf: Workflow) -> str | None:
    """Why ``actor`` may not approve ``wf`` through any door that knows the caller's role (the MCP
    approve tool over the network, the web console): the role's tools, then its approve rule."""
    return tool_refusal(role, "approve") or approval_refusal(role, actor, wf)


def approval_refusal(role: Role, actor: Actor, wf: Workflow) -> str | None:
    """Why ``actor`` (with ``role``) may not approve ``wf``, or None when it may.

    ``others`` refuses the creator, every author (edited or confirmed the draft, or named by its
    YAML template) and a workflow with no recorded creator; the caller's name counts with or
    without the ``token:`` prefix.
    """
    if role.approve == "any":
        return None
    if role.approve == "none":
        return f"Role '{role.name}' may not approve workflows"
    if not wf.created_by.strip():
        return (
            f"Role '{role.name}' approves only workflows someone else created, and workflow "
            f"'{wf.id}' has no recorded creator"
        )
    if actor.is_same_person(wf.created_by):
        return f"Role '{role.name}' approves only workflows someone else created; you created '{wf.id}'"
    if any(actor.is_same_person(author) for author in wf.authors):
        return f"Role '{role.name}' approves only workflows someone else wrote; you edited '{wf.id}'"
    return None
