"""A scripted dispatcher: the engine's unit tests use it to produce outcomes on demand.

Real dispatch against real companion skills is tested in tests/lab; this stands in only where a
test needs a precise outcome (a failure after a success, an unknown effect) at a precise step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vmware_pilot.dispatch.protocol import BeforeSend, OutcomeKind, StepOutcome
from vmware_pilot.domain.model import Step
from vmware_pilot.engine.targets import READ_TOOLS
from vmware_pilot.errors import DispatchRefused, EffectUnknown

# The reads Pilot makes of a gate's targets before showing it (engine.inspection).
INSPECTION_READS = READ_TOOLS

Script = Callable[[str, str, dict[str, Any]], StepOutcome]


@dataclass
class ScriptedDispatcher:
    """Answers each (skill, tool) from ``answers``; default: success echoing the params."""

    answers: dict[str, Any] = field(default_factory=dict)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    preflight_problems: list[str] = field(default_factory=list)
    delay: float = 0.0
    closed: bool = False
    in_flight: int = 0
    max_in_flight: int = 0
    # Input schemas by tool, as the skill's server would list them (None: unknown, ask the catalog).
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def step_calls(self) -> list[tuple[str, str, dict[str, Any]]]:
        """The calls that ran steps or undos: ``calls`` without the gate inspection's reads."""
        return [c for c in self.calls if (c[0], c[1]) not in INSPECTION_READS]

    prepared: list[dict[str, int]] = field(default_factory=list)

    async def prepare(self, demand: Mapping[str, int]) -> None:
        self.prepared.append(dict(demand))

    async def preflight(self, steps: Sequence[Step]) -> list[str]:
        return list(self.preflight_problems)

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        if before_send is not None:  # as a real dispatcher does once its session is ready
            await before_send()
        self.calls.append((skill, tool, params))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        answer = self.answers.get(tool, StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True, **params}))
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            result: StepOutcome = answer(skill, tool, params)
            return result
        assert isinstance(answer, StepOutcome)
        return answer

    async def tool_schema(self, skill: str, tool: str) -> dict[str, Any] | None:
        return self.schemas.get(tool)

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class SteppedDispatcher(ScriptedDispatcher):
    """A skill whose session is ready, and whose sent calls answer, when the test sets ``ready``
    and ``answer`` (per tool; a tool not named is ready / answers at once). ``sent`` lists the
    calls that went out, after ``before_send``."""

    ready: dict[str, asyncio.Event] = field(default_factory=dict)
    answer: dict[str, asyncio.Event] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    went_out: asyncio.Event = field(default_factory=asyncio.Event)
    sent: list[str] = field(default_factory=list)

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        self.arrived.set()
        if tool in self.ready:
            await self.ready[tool].wait()  # the session is starting
        if before_send is not None:
            await before_send()
        self.sent.append(tool)
        self.went_out.set()
        if tool in self.answer:
            await self.answer[tool].wait()  # the call is in flight
        return await super().call(skill, tool, params)


def failed(message: str) -> StepOutcome:
    return StepOutcome(OutcomeKind.FAILED, {"error": message}, message)


def unknown(message: str) -> EffectUnknown:
    return EffectUnknown(message)


def refused(message: str) -> DispatchRefused:
    return DispatchRefused(message)
