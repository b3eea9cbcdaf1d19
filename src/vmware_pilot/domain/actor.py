"""Who is acting: resolved once by the transport and passed explicitly to the engine."""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Actor", "ActorKind", "identity_key"]

ActorKind = Literal["os", "token", "oidc"]

# An OAuth caller's label: `oidc:<subject>`, or `Alice Example (oidc:<subject>)` with a display
# name. Subjects have no spaces or parentheses (checked when the token is accepted), so the match
# anchored at the end is always the real subject, whatever the display name holds.
_OIDC_BARE = re.compile(r"^oidc:([^\s()]+)$")
_OIDC_NAMED = re.compile(r" \(oidc:([^\s()]+)\)$")


def identity_key(label: str) -> str:
    """What tells two recorded callers apart: an OAuth caller's subject (its display name may
    change between two tokens), otherwise the label itself, without case."""
    text = label.strip()
    found = _OIDC_BARE.match(text) or _OIDC_NAMED.search(text)
    return f"oidc:{found.group(1)}" if found else text.casefold()


@dataclass(frozen=True, slots=True)
class Actor:
    """An identity. ``label`` is what the audit trail and ``created_by`` record.

    ``os``: the account running Pilot (stdio, CLI). ``token``: a static bearer token, ``name`` is
    its name and ``role`` its role. ``oidc``: an OAuth access token, ``name`` is its subject,
    ``display`` the person's name from the token and ``groups`` the values of its roles claim.
    ``via``: the agent (MCP client) the call came through, as it named itself; said next to who
    asked, never part of who it is (not compared).
    """

    name: str
    kind: ActorKind = "os"
    role: str = "admin"
    display: str = ""
    groups: tuple[str, ...] = ()
    via: str = field(default="", compare=False)

    @property
    def label(self) -> str:
        if self.kind == "token":
            return f"token:{self.name}"
        if self.kind == "oidc":
            return f"{self.display} (oidc:{self.name})" if self.display else f"oidc:{self.name}"
        return self.name

    @property
    def authenticated(self) -> bool:
        """True when the transport proved who this is (a token), so a name the caller types
        (an approver) cannot stand in for it."""
        return self.kind != "os"

    def is_same_person(self, other: str) -> bool:
        """True when ``other`` names this actor: a token caller with or without ``token:``; an
        OAuth caller by its subject (``sub``, ``oidc:sub`` or a label ending in ``(oidc:sub)``)."""
        text = other.strip()
        if self.kind == "oidc":
            return text == self.name or identity_key(text) == f"oidc:{self.name}"
        if self.kind == "token" and text.startswith("token:"):
            text = text[len("token:") :]
        return text == self.name

    @classmethod
    def os_user(cls) -> Actor:
        """The account this process runs as, from its user id (``LOGNAME``/``USER`` cannot change it:
        an approval recorded as a person must not be a name anyone can set in the environment)."""
        try:
            import pwd
        except ImportError:  # not POSIX: the login name is all there is
            try:
                return cls(name=getpass.getuser(), kind="os")
            except (KeyError, OSError):
                return cls(name="", kind="os")
        uid = os.getuid()
        try:
            return cls(name=pwd.getpwuid(uid).pw_name, kind="os")
        except KeyError:  # an account without a passwd entry (e.g. a container's arbitrary uid)
            return cls(name=f"uid-{uid}", kind="os")
