"""Counting the caller's role check (``safety.roles.call_refusal``) wherever it is called from: the
module's own name and every name a module of the package bound to it by importing it."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from vmware_pilot.safety import roles


def count_role_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tools each role check asked about, from now on (in call order)."""
    calls: list[str] = []
    real = roles.call_refusal

    def counted(actor: Any, role: Any, tool: str) -> Any:
        calls.append(tool)
        return real(actor, role, tool)

    for name, module in list(sys.modules.items()):
        if name.startswith("vmware_pilot") and getattr(module, "call_refusal", None) is real:
            monkeypatch.setattr(module, "call_refusal", counted)
    return calls
