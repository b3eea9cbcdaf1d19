"""Counting the approval's precheck (``engine.execution.approval.precheck``) wherever it is called
from: the module's own name and every name a module of the package bound to it by importing it."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from vmware_pilot.engine.execution import approval


def count_prechecks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the workflows each precheck ran on, from now on (in call order)."""
    calls: list[str] = []
    real = approval.precheck

    def counted(wf: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(wf.id)
        return real(wf, *args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("vmware_pilot") and getattr(module, "precheck", None) is real:
            monkeypatch.setattr(module, "precheck", counted)
    return calls
