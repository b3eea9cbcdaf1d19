"""Who is acting: resolved once by the transport and passed explicitly to the engine."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Literal

__all__ = ["Actor", "ActorKind"]

ActorKind = Literal["os", "token"]


@dataclass(frozen=True, slots=True)
class Actor:
    """An identity. ``label`` is what the audit trail and ``created_by`` record."""

    name: str
    kind: ActorKind = "os"
    role: str = "admin"

    @property
    def label(self) -> str:
        return f"token:{self.name}" if self.kind == "token" else self.name

    def is_same_person(self, other: str) -> bool:
        """True when ``other`` names this actor (``token:`` prefix optional for token callers)."""
        text = other.strip()
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
