"""The run lease: which Pilot process is walking a workflow, between its steps as well as during them.

A step's lease (ownership.py) covers one call in flight and is released when its outcome is
recorded, so it cannot tell a replica that died between two steps from one that is about to take
the next. The run lease can: every run and approval takes it (row ``run:<workflow id>`` of the
same ``leases`` table, on the database's clock) before the workflow can become ``running``, holds
it while the walk goes on and releases it when the run stops at a gate, an end or a refusal. A
workflow that is ``running`` while its run lease has expired was left by a Pilot that is gone;
the sweeper (engine/sweeper.py) takes the lease (exactly one process can) and continues
the run.

Fencing. Every save a run makes carries the run lease's fence, and the step lease's while a step
is in flight (``RunLease.fences``; the runner reads the run being walked from ``current()``): a
save under a fence another process has superseded writes nothing (store/leases.py). A call is
sent only after ``before_send`` has held both leases in one transaction, after the skill's
session is ready; the heartbeat holds them every third of the lease time. Holding renews a live
lease and takes a lapsed one again with the next fence when nobody took it meanwhile (after a
pause or a database outage); when another process took it, the run has lost it: every call not
yet sent is cancelled, and nothing more is saved. A call already sent stays ``running`` in the
store and is recorded as unknown (``interrupted``) by whoever takes over; it is never sent again.

The runner's ``LeaseBook`` knows the runs this Pilot is walking (its sweeper never takes them for
a dead Pilot's) and the leases whose release failed (taken back at once by the next run here,
instead of blocking the workflow for a lease time).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from vmware_pilot.errors import DispatchRefused, PilotError, StateRefused
from vmware_pilot.ownership import new_run_owner, owner_is_this_process
from vmware_pilot.store.leases import Fence, LeaseLost
from vmware_pilot.store.protocol import Store

__all__ = ["LeaseBook", "Leasing", "RunLease", "StepLease", "holding_run", "run_key", "take_lease"]

_log = logging.getLogger(__name__)
_PREFIX = "run:"
_KEY_MAX = 64  # leases.workflow_id
_CURRENT: contextvars.ContextVar[RunLease | None] = contextvars.ContextVar("run_lease", default=None)


@dataclass
class LeaseBook:
    """One runner's leases: ``runs`` it is walking now (by workflow id), and ``unreleased``
    leases (key → owner) whose release failed: retried in the background (``retries``) until
    done or expired, and taken back at once by this runner's next run of that key."""

    runs: dict[str, RunLease] = field(default_factory=dict)
    unreleased: dict[str, str] = field(default_factory=dict)
    retries: set[asyncio.Task[None]] = field(default_factory=set)


class Leasing(Protocol):
    """What a run lease needs of the runner (engine/execution/runner.py)."""

    store: Store
    lease_seconds: float
    leases: LeaseBook


def run_key(workflow_id: str) -> str:
    """The ``leases`` row of a workflow's run lease."""
    key = _PREFIX + workflow_id
    if len(key) <= _KEY_MAX:
        return key
    return _PREFIX + hashlib.sha256(workflow_id.encode()).hexdigest()[: _KEY_MAX - len(_PREFIX)]


async def take_lease(runner: Leasing, key: str) -> tuple[str, int] | None:
    """Take lease ``key`` (free or expired) as a new owner, or back from an earlier run here whose
    release failed; (owner, fence), or None while another owner holds it unexpired."""
    store, seconds = runner.store, runner.lease_seconds
    owner = new_run_owner()
    fence = await asyncio.to_thread(store.leases.acquire_lease, key, owner, seconds)
    mine = runner.leases.unreleased.get(key)
    if fence is None and mine is not None:
        owner = mine  # the same owner takes its own lease again (the next fence)
        fence = await asyncio.to_thread(store.leases.acquire_lease, key, owner, seconds)
    if fence is None:
        return None
    runner.leases.unreleased.pop(key, None)
    return owner, fence


async def release_lease(runner: Leasing, key: str, owner: str, fence: int) -> None:
    """Release; when that fails (the database is away) it is retried in the background for up to
    a lease time, and the next run here takes it back meanwhile: a failed release never holds
    the workflow up for a lease time."""
    try:
        await asyncio.to_thread(runner.store.leases.release_lease, key, owner, fence)
    except PilotError as exc:
        book = runner.leases
        book.unreleased[key] = owner
        _log.warning("could not release the lease %s (retrying): %s", key, exc.message)
        task = asyncio.create_task(_release_later(runner, key, owner, fence), name=f"release-{key}")
        book.retries.add(task)
        task.add_done_callback(book.retries.discard)


async def _release_later(runner: Leasing, key: str, owner: str, fence: int) -> None:
    deadline = time.monotonic() + runner.lease_seconds  # by then it has expired anyway
    delay = 0.2
    while time.monotonic() < deadline:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)
        try:
            # Only while it is still (owner, fence): a run here that took it back has the next fence.
            await asyncio.to_thread(runner.store.leases.release_lease, key, owner, fence)
        except PilotError:
            continue
        if runner.leases.unreleased.get(key) == owner:
            del runner.leases.unreleased[key]
        return


@dataclass
class StepLease:
    """The step lease (row: the workflow id) of the call(s) in flight."""

    owner: str
    fence: int


@dataclass(eq=False)
class RunLease:
    """A run lease this process holds, kept by a heartbeat task until ``release``."""

    runner: Leasing
    workflow_id: str
    owner: str
    fence: int
    step: StepLease | None = None
    lost: LeaseLost | None = None
    unsent: set[asyncio.Task[object]] = field(default_factory=set)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _begun: int = 0  # holds begun so far
    _confirmed: int = 0  # the number of the last hold that succeeded
    _heartbeat: asyncio.Task[None] | None = None

    @staticmethod
    def current() -> RunLease | None:
        """The run lease of the run this task is walking (None outside a run)."""
        return _CURRENT.get()

    @classmethod
    async def take(cls, runner: Leasing, workflow_id: str) -> RunLease | None:
        """Take the run lease (free or expired) and start holding it; None while another
        process's run holds it unexpired."""
        taken = await take_lease(runner, run_key(workflow_id))
        if taken is None:
            return None
        held = cls(runner, workflow_id, *taken)
        held._heartbeat = asyncio.create_task(held._keep())
        return held

    @contextlib.asynccontextmanager
    async def walking(self) -> AsyncIterator[RunLease]:
        """The block walks this run: its saves carry the fences, this Pilot's sweeper leaves it
        alone; the lease is released at the end."""
        token = _CURRENT.set(self)
        self.runner.leases.runs[self.workflow_id] = self
        try:
            yield self
        finally:
            _CURRENT.reset(token)
            if self.runner.leases.runs.get(self.workflow_id) is self:
                del self.runner.leases.runs[self.workflow_id]
            await self.release()

    def fences(self) -> list[Fence]:
        """What every save of this run is made under: the run lease's fence, and the step
        lease's while a step is in flight. A lost lease still gives its (stale) fence: the save
        is refused by the store, never made without one."""
        out: list[Fence] = [(run_key(self.workflow_id), self.fence)]
        if self.step is not None:
            out.append((self.workflow_id, self.step.fence))
        return out

    async def hold(self) -> None:
        """Hold the run lease and the step lease in one transaction (renewed if live, taken
        again if lapsed and still ours); LeaseLost once another process took either.
        DatabaseUnavailable (and other store errors) propagate: the caller decides.

        Callers that wait while a hold is made share the next one that *begins* after they
        asked (the members of a parallel group go out together, not one hold after another);
        a hold that began before a caller asked never counts for it."""
        asked = self._begun
        await asyncio.sleep(0)  # the members of a group ready at this same moment ask too
        async with self._lock:
            if self.lost is not None:
                raise self.lost
            if self._confirmed > asked:  # a hold that began after this caller asked succeeded
                return
            self._begun += 1
            begun = self._begun
            step = self.step
            held = [(run_key(self.workflow_id), self.owner, self.fence)]
            if step is not None:
                held.append((self.workflow_id, step.owner, step.fence))
            kept = await asyncio.to_thread(
                self.runner.store.leases.hold_leases, held, self.runner.lease_seconds
            )
            if kept is None:
                lost = LeaseLost(self.workflow_id, self.fence, None)
                self.lose(lost)
                raise lost
            if kept[0] != self.fence or (step is not None and kept[1] != step.fence):
                _log.warning("the leases of %s had lapsed; this process took them again", self.workflow_id)
            self.fence = kept[0]
            if step is not None:
                step.fence = kept[1]
            self._confirmed = begun

    def lose(self, lost: LeaseLost) -> None:
        """Another process took over: cancel every call not yet sent."""
        if self.lost is None:
            _log.warning("the run of %s was taken over by another Pilot process", self.workflow_id)
        self.lost = lost
        for task in list(self.unsent):
            task.cancel()

    async def before_send(self) -> None:
        """Right before a call is written (``Dispatcher.call``'s ``before_send``): hold the
        leases, retrying a database that is away for up to a lease time, then count the call as
        sent. Raises LeaseLost, or DispatchRefused when the leases could not be confirmed:
        either way nothing is sent."""
        deadline = time.monotonic() + self.runner.lease_seconds
        delay = 0.1
        while True:
            try:
                await self.hold()
                break
            except LeaseLost:
                raise
            except PilotError as exc:
                if not exc.retryable or time.monotonic() + delay > deadline:
                    raise DispatchRefused(
                        f"Pilot could not confirm it still holds the lease of workflow "
                        f"'{self.workflow_id}' ({exc.message}); the call was not sent",
                        hint="Check the database; get_workflow_status shows where the run stands.",
                    ) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        task = asyncio.current_task()
        if task is not None:
            self.unsent.discard(task)

    async def _keep(self) -> None:
        """The heartbeat: hold the leases every third of their time until released or lost."""
        seconds = self.runner.lease_seconds
        failing = False
        while True:
            await asyncio.sleep(seconds / 3)
            try:
                await self.hold()
            except LeaseLost:
                return
            except PilotError as exc:  # the database is away: keep trying (taken again if lapsed)
                if not failing:
                    _log.warning("could not hold the run lease of %s: %s", self.workflow_id, exc.message)
                failing = True
                continue
            if failing:
                _log.warning("holding the run lease of %s again", self.workflow_id)
            failing = False

    async def release(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
        if self.lost is None:
            await release_lease(self.runner, run_key(self.workflow_id), self.owner, self.fence)


@contextlib.asynccontextmanager
async def holding_run(runner: Leasing, workflow_id: str, state: str) -> AsyncIterator[RunLease]:
    """Walk ``workflow_id`` under its run lease for the block; refuse (nothing changed) while
    another Pilot process's run holds it."""
    held = await RunLease.take(runner, workflow_id)
    if held is None:
        lease = await asyncio.to_thread(runner.store.leases.lease, run_key(workflow_id))
        owner = lease.owner if lease else ""
        host, _, rest = owner.partition("/")
        left = max(1, round(lease.remaining)) if lease else 1
        where = (
            "another run in this Pilot process"
            if owner_is_this_process(owner)
            else f"another Pilot process (pid {rest.partition('/')[0]} on {host})"
        )
        raise StateRefused(
            f"Workflow '{workflow_id}' is running in {where}. Nothing was changed",
            hint=f"Poll get_workflow_status('{workflow_id}') until that run stops, then try again. If "
            f"that process died, its run lease expires within {left} s and another Pilot continues it.",
            workflow_id=workflow_id,
            state=state,
        )
    async with held.walking():
        yield held
