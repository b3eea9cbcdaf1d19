"""Custom roles for network callers, read from ``roles.yaml`` in the pilot home.

Format (each role needs both keys; ``groups`` is optional)::

    roles:
      operator:               # a name like a token name; not "admin" or "reader"
        approve: others       # any | others (four-eyes) | none
        tools: "*"            # "*" (all 13 tools), read (the four read tools) or a list of tool names
    groups:                   # OAuth callers: identity-provider group → role (~: no role)
      vmware-operators: operator

An OAuth caller's role comes from its groups: a group listed under ``groups`` gives the role named
there, and any other group named like a role gives that role. Several roles combine (every tool
any of them allows; the most permissive approve rule). With no role, the caller is refused.

The file must belong to the user running Pilot and not be writable by others. It is read again
whenever its bytes change. A broken file disables every custom role (callers holding one are
refused with the reason) while ``admin`` and ``reader`` keep working.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError
from vmware_pilot.safety.duties import (
    APPROVE_RULES,
    BUILTIN_ROLES,
    READ_TOOLS,
    ApproveRule,
    Role,
    is_valid_name,
)

__all__ = [
    "ROLES_FILE",
    "RoleBook",
    "RoleUnusable",
    "RolesListing",
    "combine",
    "parse_roles",
    "parse_roles_file",
]

ROLES_FILE = "roles.yaml"
_KEYS = {"approve", "tools"}


class RoleUnusable(PilotError):
    """A caller's role is unknown or its definition cannot be used."""


@dataclass(frozen=True)
class RolesListing:
    """Every usable role and, when the file is broken, why the custom ones are off."""

    roles: dict[str, Role]
    problem: str = ""
    groups: dict[str, str | None] = field(default_factory=dict)


def _parse_role(name: str, spec: Any, tool_names: Collection[str]) -> Role:
    if not is_valid_name(name):
        raise ValueError(f"role name {name!r} is not valid (letters, digits, '.', '_', '-'; 1-64)")
    if name in BUILTIN_ROLES:
        raise ValueError(f"role {name!r} is built in and cannot be redefined")
    if not isinstance(spec, Mapping) or set(spec) != _KEYS:
        raise ValueError(f"role {name!r} needs exactly the keys approve and tools")
    approve = spec["approve"]
    if approve not in APPROVE_RULES:
        raise ValueError(f"role {name!r}: approve must be one of any, others, none (got {approve!r})")
    tools = spec["tools"]
    chosen: frozenset[str] | None
    if tools == "*":
        chosen = None
    elif tools == "read":
        chosen = READ_TOOLS
    elif isinstance(tools, list) and tools and all(isinstance(t, str) for t in tools):
        unknown = sorted(set(tools) - set(tool_names))
        if unknown:
            raise ValueError(f"role {name!r}: unknown tool(s) {', '.join(unknown)}")
        chosen = frozenset(tools)
    else:
        raise ValueError(f'role {name!r}: tools must be "*", read, or a non-empty list of tool names')
    return Role(name, cast(ApproveRule, approve), chosen)


def _parse_groups(spec: Any, roles: Collection[str]) -> dict[str, str | None]:
    if not isinstance(spec, Mapping):
        raise ValueError("groups must map group names to role names")
    groups: dict[str, str | None] = {}
    for group, role in spec.items():
        if not isinstance(group, str) or not 0 < len(group) <= 256:
            raise ValueError(f"group {group!r} must be a name of 1-256 characters")
        if role is not None and (not isinstance(role, str) or role not in roles):
            raise ValueError(f"group {group!r} maps to {role!r}, which is not a role (or ~ for none)")
        groups[group] = role
    return groups


def parse_roles_file(text: str, tool_names: Collection[str]) -> tuple[dict[str, Role], dict[str, str | None]]:
    """The custom roles and the group mapping a roles file defines; raises ``ValueError`` naming
    the first problem."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML ({exc})") from None
    if doc is None:
        return {}, {}
    if not isinstance(doc, Mapping) or not doc or not set(doc) <= {"roles", "groups"}:
        raise ValueError("the file holds roles (role names to their definition) and optionally groups")
    specs = doc.get("roles") or {}
    if not isinstance(specs, Mapping):
        raise ValueError("roles must map role names to their definition")
    roles = {str(n): _parse_role(str(n), spec, tool_names) for n, spec in specs.items()}
    groups = _parse_groups(doc.get("groups") or {}, {*BUILTIN_ROLES, *roles})
    return roles, groups


def parse_roles(text: str, tool_names: Collection[str]) -> dict[str, Role]:
    """The custom roles a roles file defines; raises ``ValueError`` naming the first problem."""
    return parse_roles_file(text, tool_names)[0]


def combine(roles: Collection[Role]) -> Role:
    """One role allowing what any of ``roles`` allows (they must not be empty)."""
    ordered = sorted(roles, key=lambda r: r.name)
    if len(ordered) == 1:
        return ordered[0]
    tools: frozenset[str] | None = frozenset()
    for role in ordered:
        tools = None if tools is None or role.tools is None else tools | role.tools
    approve = next(rule for rule in APPROVE_RULES if any(r.approve == rule for r in ordered))
    return Role("+".join(r.name for r in ordered), approve, tools)


class RoleBook:
    """Built-in roles plus those of the roles file, looked up by name on every call."""

    def __init__(self, path: Path, tool_names: Collection[str]) -> None:
        self.path = path
        self._tools = tuple(tool_names)
        self._guard = threading.Lock()
        self._data: bytes | None = None
        self._custom: dict[str, Role] = {}
        self._groups: dict[str, str | None] = {}
        self._problem = ""

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._data, self._custom, self._groups, self._problem = None, {}, {}, ""
            return
        except OSError as exc:  # a home under a file, a folder it may not enter
            self._data, self._custom, self._groups = None, {}, {}
            self._problem = f"{self.path} cannot be read ({exc})"
            return
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            self._data, self._custom, self._groups = None, {}, {}
            self._problem = (
                f"{self.path} must belong to the user running Pilot and not be writable by others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); fix it with chmod 600"
            )
            return
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            self._data, self._custom, self._groups = None, {}, {}
            self._problem = f"{self.path} cannot be read ({exc})"
            return
        if data == self._data:
            return
        self._data = data
        try:
            self._custom, self._groups = parse_roles_file(data.decode("utf-8", "replace"), self._tools)
            self._problem = ""
        except ValueError as exc:
            self._custom, self._groups, self._problem = {}, {}, f"{self.path}: {exc}"

    def listing(self) -> RolesListing:
        with self._guard:
            self._refresh()
            return RolesListing({**BUILTIN_ROLES, **self._custom}, self._problem, dict(self._groups))

    def lookup(self, name: str) -> Role:
        """The role called ``name``; raises ``RoleUnusable`` with what to do when there is none."""
        listing = self.listing()
        role = listing.roles.get(name)
        if role is not None:
            return role
        if listing.problem:
            raise RoleUnusable(
                f"Role '{name}' cannot be used: the roles file is broken ({listing.problem})",
                hint="Fix the roles file (`vmware-pilot token roles` shows the problem); built-in roles "
                "admin and reader keep working.",
                role=name,
            )
        raise RoleUnusable(
            f"Role '{name}' is not defined",
            hint=f"Define it in {self.path}, or give the token another role with "
            "`vmware-pilot token set-role NAME ROLE`.",
            role=name,
        )

    def role_of(self, actor: Actor) -> Role:
        """A network caller's role: an OAuth caller's from its groups, a token's by its name."""
        return self.for_groups(actor.groups) if actor.kind == "oidc" else self.lookup(actor.role)

    def for_groups(self, groups: Collection[str]) -> Role:
        """The role of an OAuth caller in ``groups``; raises ``RoleUnusable`` when they give none
        or the roles file is broken (its group mapping is then unknown, so nothing is assumed)."""
        listing = self.listing()
        if listing.problem:
            raise RoleUnusable(
                f"OAuth callers are refused while the roles file is broken ({listing.problem})",
                hint="Fix the roles file (`vmware-pilot token roles` shows the problem).",
            )
        names = {listing.groups.get(g, g) for g in groups}
        found = [listing.roles[n] for n in sorted(n for n in names if n is not None and n in listing.roles)]
        if not found:
            shown = ", ".join(sorted(groups)[:10]) or "none"
            raise RoleUnusable(
                f"None of your groups ({shown}) gives a role in this Pilot",
                hint=f"Ask an administrator to map one of your groups to a role under groups: in {self.path}, "
                "or to add you to a group named like a role (admin, reader or a custom one).",
            )
        return combine(found)
