"""Who is acting: resolved once by the transport and passed explicitly to the engine."""

from __future__ import annotations

import getpass
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
        try:
            name = getpass.getuser()
        except (KeyError, OSError):
            name = ""
        return cls(name=name, kind="os")
