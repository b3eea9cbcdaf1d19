"""Custom roles for network callers, read from ``roles.yaml`` in the pilot home.

Format (every key required, no others)::

    roles:
      operator:               # a name like a token name; not "admin" or "reader"
        approve: others       # any | others (four-eyes) | none
        tools: "*"            # "*" (all 13 tools), read (the four read tools) or a list of tool names

The file must belong to the user running Pilot and not be writable by others. It is read again
whenever its bytes change. A broken file disables every custom role (callers holding one are
refused with the reason) while ``admin`` and ``reader`` keep working.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from vmware_pilot.errors import PilotError
from vmware_pilot.safety.duties import (
    APPROVE_RULES,
    BUILTIN_ROLES,
    READ_TOOLS,
    ApproveRule,
    Role,
    is_valid_name,
)

__all__ = ["ROLES_FILE", "RoleBook", "RoleUnusable", "RolesListing", "parse_roles"]

ROLES_FILE = "roles.yaml"
_KEYS = {"approve", "tools"}


class RoleUnusable(PilotError):
    """A caller's role is unknown or its definition cannot be used."""


@dataclass(frozen=True)
class RolesListing:
    """Every usable role and, when the file is broken, why the custom ones are off."""

    roles: dict[str, Role]
    problem: str = ""


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


def parse_roles(text: str, tool_names: Collection[str]) -> dict[str, Role]:
    """The custom roles a roles file defines; raises ``ValueError`` naming the first problem."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML ({exc})") from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping) or set(doc) != {"roles"} or not isinstance(doc["roles"], Mapping):
        raise ValueError("the file must hold one key, roles, mapping role names to their definition")
    return {str(n): _parse_role(str(n), spec, tool_names) for n, spec in doc["roles"].items()}


class RoleBook:
    """Built-in roles plus those of the roles file, looked up by name on every call."""

    def __init__(self, path: Path, tool_names: Collection[str]) -> None:
        self.path = path
        self._tools = tuple(tool_names)
        self._guard = threading.Lock()
        self._data: bytes | None = None
        self._custom: dict[str, Role] = {}
        self._problem = ""

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._data, self._custom, self._problem = None, {}, ""
            return
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            self._data, self._custom = None, {}
            self._problem = (
                f"{self.path} must belong to the user running Pilot and not be writable by others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}); fix it with chmod 600"
            )
            return
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            self._data, self._custom, self._problem = None, {}, f"{self.path} cannot be read ({exc})"
            return
        if data == self._data:
            return
        self._data = data
        try:
            self._custom, self._problem = parse_roles(data.decode("utf-8", "replace"), self._tools), ""
        except ValueError as exc:
            self._custom, self._problem = {}, f"{self.path}: {exc}"

    def listing(self) -> RolesListing:
        with self._guard:
            self._refresh()
            return RolesListing({**BUILTIN_ROLES, **self._custom}, self._problem)

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
