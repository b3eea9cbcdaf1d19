"""The dispatcher seam: how the runner asks a skill's server to run one tool."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from vmware_pilot.domain.model import Step

__all__ = ["BeforeSend", "Dispatcher", "OutcomeKind", "StepOutcome"]

# Awaited once the skill's session is ready, right before the request is written; raising there
# sends nothing (the runner checks and renews its leases there: engine/execution/runlease.py).
BeforeSend = Callable[[], Awaitable[None]]


class OutcomeKind(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREVIEW_ONLY = "preview_only"  # the tool only previewed: counts as failed
    EFFECT_UNKNOWN = "effect_unknown"  # sent, but whether it took effect is unknown


@dataclass(frozen=True, slots=True)
class StepOutcome:
    kind: OutcomeKind
    payload: Any = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.kind is OutcomeKind.SUCCEEDED


class Dispatcher(Protocol):
    """Runs tools in the skills' own MCP servers. Absent (None) means hand-back mode."""

    async def preflight(self, steps: Sequence[Step]) -> list[str]:
        """Problems that would stop any of ``steps`` from starting; empty when all can start."""
        ...

    async def prepare(self, demand: Mapping[str, int]) -> None:
        """Open sessions ahead, in the background (returns at once): ``demand`` maps a skill to how
        many calls a coming parallel group will make to it at once."""
        ...

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        """Call ``tool`` on ``skill``; raises DispatchRefused when nothing was sent. ``before_send``
        is awaited after the session is ready and right before the request goes out (again before
        a retry on a new session); whatever it raises propagates and nothing is sent."""
        ...

    async def aclose(self) -> None: ...
