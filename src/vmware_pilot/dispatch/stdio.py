"""StdioDispatcher: runs each step's tool in its skill's own MCP server, over pooled sessions.

Per skill, up to ``pool_size`` long-lived sessions are reused across steps and workflows. A call
takes an idle session at once when there is one; otherwise it waits for the first session that
becomes free, whether another call releases it or a new one finishes starting. New sessions start
in the background, one at a time per skill: the first when a call needs it; more while calls
wait only when the queue would outlast a server's start-up (starting a server is CPU-bound and
slows the calls in flight); and those ``prepare`` asked for, ahead of a parallel group, while no
call waits. So a parallel group on a cold pool is no slower than its steps in sequence, and on a
warm pool its members run side by side.

A dead session is replaced (and a call that finds its reused server gone before the request was
sent is retried once on a new one), an idle one is closed after ``idle_seconds``, all are closed
at shutdown. ``per_call=True`` starts a fresh server for every call instead (isolation).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vmware_pilot.dispatch.judge import judge
from vmware_pilot.dispatch.locate import SkillCommand, locate
from vmware_pilot.dispatch.protocol import BeforeSend, StepOutcome
from vmware_pilot.dispatch.session import SessionClosed, SkillSession
from vmware_pilot.domain.model import Step
from vmware_pilot.errors import DispatchRefused, EffectUnknown

__all__ = ["DispatchOptions", "StdioDispatcher"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DispatchOptions:
    call_timeout: float = 1800.0
    start_timeout: float = 60.0
    idle_seconds: float = 300.0
    pool_size: int = 4
    per_call: bool = False
    overrides: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Pool:
    """A skill's started sessions (busy or idle) and the bookkeeping of the ones starting."""

    command: SkillCommand
    sessions: list[SkillSession] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    starting: int = 0
    waiting: int = 0
    wanted: int = 0  # sessions asked for ahead (prepare), until that many are open
    failures: int = 0
    failure: tuple[str, str] = ("", "")  # the last failed start: message, hint
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    start_seconds: float | None = None  # how long starting a server took lately (moving average)
    call_seconds: float | None = None  # how long a call took lately (moving average)

    def busy(self) -> int:
        return sum(1 for s in self.sessions if s.busy)

    def worth_starting(self) -> bool:
        """Whether one more server, started now, would take a waiting call sooner than the open
        ones get through the queue: the queue's time must exceed a server's start-up time."""
        if self.start_seconds is None or self.call_seconds is None:
            return False
        queue = self.waiting * self.call_seconds / max(1, len(self.sessions))
        return queue > self.start_seconds


def _average(previous: float | None, sample: float) -> float:
    return sample if previous is None else 0.7 * previous + 0.3 * sample


class StdioDispatcher:
    def __init__(
        self,
        options: DispatchOptions,
        *,
        env: dict[str, str] | None = None,
        known_skills: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.options = options
        self.env = env
        self._known_skills = known_skills
        self._pools: dict[str, _Pool] = {}
        self._schemas: dict[str, dict[str, dict[str, Any]]] = {}
        self._reaper: asyncio.Task[None] | None = None
        self.started = 0  # servers started, for tests and benchmarks

    def _locate(self, skill: str) -> SkillCommand:
        known = self._known_skills() if self._known_skills is not None else None
        return locate(skill, self.options.overrides, known_skills=known)

    async def preflight(self, steps: Sequence[Step]) -> list[str]:
        problems: list[str] = []
        for step in steps:
            try:
                self._locate(step.skill)
            except DispatchRefused as exc:
                problems.append(f"step {step.index} ({step.skill}.{step.tool}): {exc.message}. {exc.hint}")
        return problems

    async def _start(self, command: SkillCommand) -> SkillSession:
        session = SkillSession(command, self.env)
        try:
            await session.start(self.options.start_timeout)
        except asyncio.CancelledError:
            await session.close()
            raise
        self.started += 1
        _log.info("started %s (%s)", command.display(), session.server_info)
        return session

    def _pool(self, command: SkillCommand) -> _Pool:
        pool = self._pools.get(command.skill)
        if pool is None:
            pool = self._pools[command.skill] = _Pool(command)
        return pool

    async def prepare(self, demand: Mapping[str, int]) -> None:
        """Start sessions in the background so that ``demand[skill]`` calls can run at once later."""
        if self.options.per_call:
            return
        self._ensure_reaper()
        for skill, count in demand.items():
            try:
                pool = self._pool(self._locate(skill))
            except DispatchRefused:
                continue  # preflight reports it; the call refuses it
            async with pool.changed:
                pool.wanted = max(pool.wanted, min(count, self.options.pool_size))
                self._grow(pool)

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        command = self._locate(skill)
        if self.options.per_call:
            session = await self._start(command)
            try:
                if before_send is not None:
                    await before_send()
                result = await session.call(tool, params, self.options.call_timeout)
            finally:
                await session.close()
            return judge(skill, tool, result)
        pool = self._pool(command)
        for attempt in (1, 2):
            session = await self._acquire(pool)
            reused = session.calls > 0
            broken = False
            began = time.monotonic()
            try:
                if before_send is not None:  # the session is ready: nothing else stands before the send
                    await before_send()
                result = await session.call(tool, params, self.options.call_timeout)
            except SessionClosed:
                broken = True  # the server exited while idle: nothing was sent
                if reused and attempt == 1:
                    continue
                raise
            except (EffectUnknown, DispatchRefused):
                broken = True  # a stuck or dead server is never reused
                raise
            finally:
                await self._release(pool, session, broken, time.monotonic() - began)
            return judge(skill, tool, result)
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def tool_schema(self, skill: str, tool: str) -> dict[str, Any] | None:
        """``tool``'s input schema as the skill's own server lists it (cached per skill for the life
        of this dispatcher); None when the server does not list that tool."""
        command = self._locate(skill)
        if command.skill not in self._schemas:
            if self.options.per_call:
                session = await self._start(command)
                try:
                    schemas = await session.input_schemas(self.options.start_timeout)
                finally:
                    await session.close()
            else:
                pool = self._pool(command)
                session = await self._acquire(pool)
                broken = False
                try:
                    schemas = await session.input_schemas(self.options.start_timeout)
                except DispatchRefused:
                    broken = True
                    raise
                finally:
                    await self._release(pool, session, broken)
            self._schemas[command.skill] = schemas
        return self._schemas[command.skill].get(tool)

    def _grow(self, pool: _Pool) -> None:
        """Start one more session, in the background, one at a time, within pool_size: the first one
        when a call waits or ``prepare`` asked; another while calls wait only when the queue would
        take longer than a start (a start competes for the CPU with the calls in flight); the ones
        ``prepare`` asked for while no call waits. Called holding ``pool.changed``."""
        opened = len(pool.sessions)
        if pool.starting or opened >= self.options.pool_size:
            return
        if opened == 0:
            needed = pool.waiting > 0 or pool.wanted > 0
        elif pool.waiting:
            needed = pool.worth_starting()
        else:
            needed = pool.wanted > opened
        if not needed:
            return
        pool.starting += 1
        task = asyncio.create_task(self._start_into(pool), name=f"start-{pool.command.skill}")
        pool.tasks.add(task)
        task.add_done_callback(pool.tasks.discard)

    async def _start_into(self, pool: _Pool) -> None:
        began = time.monotonic()
        try:
            session = await self._start(pool.command)
        except Exception as exc:  # the waiting calls report it
            refused = exc if isinstance(exc, DispatchRefused) else None
            async with pool.changed:
                pool.starting -= 1
                pool.failures += 1
                pool.wanted = 0
                pool.failure = (
                    (refused.message, refused.hint)
                    if refused is not None
                    else (f"{pool.command.display()} could not be started ({exc}); nothing was run", "")
                )
                pool.changed.notify_all()
            return
        except BaseException:
            async with pool.changed:
                pool.starting -= 1
                pool.changed.notify_all()
            raise
        async with pool.changed:
            pool.starting -= 1
            pool.start_seconds = _average(pool.start_seconds, time.monotonic() - began)
            pool.sessions.append(session)
            if len(pool.sessions) >= pool.wanted:
                pool.wanted = 0
            self._grow(pool)
            pool.changed.notify_all()

    async def _acquire(self, pool: _Pool) -> SkillSession:
        """An idle session now, or the first one that becomes free (released or newly started)."""
        self._ensure_reaper()
        async with pool.changed:
            failures = pool.failures
            while True:
                for dead in [s for s in pool.sessions if not s.busy and not s.alive]:
                    pool.sessions.remove(dead)
                    await dead.close()
                idle = next((s for s in pool.sessions if not s.busy), None)
                if idle is not None:
                    idle.busy = True
                    return idle
                if pool.failures != failures and not pool.starting and not pool.busy():
                    message, hint = pool.failure
                    raise DispatchRefused(message, hint=hint)
                pool.waiting += 1
                try:
                    self._grow(pool)
                    await pool.changed.wait()
                finally:
                    pool.waiting -= 1

    async def _release(
        self, pool: _Pool, session: SkillSession, broken: bool, took: float | None = None
    ) -> None:
        """Give ``session`` back; ``took`` (seconds of a tool call) feeds the pool's call average,
        None for work that is not a call (listing the tools' schemas)."""
        async with pool.changed:
            session.busy = False
            if took is not None:
                pool.call_seconds = _average(pool.call_seconds, took)
            if broken and session in pool.sessions:
                pool.sessions.remove(session)
            self._grow(pool)
            pool.changed.notify_all()
        if broken:
            await session.close()

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap(), name="skill-session-reaper")

    async def _reap(self) -> None:
        interval = max(0.05, min(30.0, self.options.idle_seconds / 2))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for pool in self._pools.values():
                async with pool.changed:
                    stale = [
                        s
                        for s in pool.sessions
                        if not s.busy and (not s.alive or now - s.last_used >= self.options.idle_seconds)
                    ]
                    for session in stale:
                        pool.sessions.remove(session)
                for session in stale:
                    await session.close()

    def open_sessions(self) -> dict[str, int]:
        """Live sessions per skill."""
        return {skill: sum(1 for s in p.sessions if s.alive) for skill, p in self._pools.items()}

    async def aclose(self) -> None:
        """Close every session (starting ones too). The dispatcher stays usable: a later call, on
        this event loop or another, starts afresh."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(BaseException):
                await self._reaper
        for pool in self._pools.values():
            starting = list(pool.tasks)
            for task in starting:
                task.cancel()
            for task in starting:
                with contextlib.suppress(BaseException):
                    await task
            sessions, pool.sessions = pool.sessions, []
            for session in sessions:
                await session.close()
        # A pool's condition belongs to the event loop that used it: a later loop starts afresh.
        self._pools.clear()
        self._schemas.clear()
