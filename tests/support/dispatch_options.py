"""Dispatcher options pointing at the fake skill (the stdio dispatcher and trace tests)."""

from __future__ import annotations

import shlex
import sys

from tests.support import FAKE_SKILL
from vmware_pilot.dispatch.stdio import DispatchOptions


def command(mode: str = "ok") -> str:
    return shlex.join([sys.executable, str(FAKE_SKILL), mode])


def options(**changes: object) -> DispatchOptions:
    base: dict[str, object] = {
        "call_timeout": 10.0,
        "start_timeout": 20.0,
        "idle_seconds": 60.0,
        "pool_size": 4,
        "overrides": {"aiops": command()},
    }
    base.update(changes)
    return DispatchOptions(**base)  # type: ignore[arg-type]
