"""Saving a workflow's changes: ``Saver.commit`` applies a change function, recomputes
``diff_report`` and saves with the expected version; on a conflict it reloads and applies it again,
so a concurrent writer is never overwritten. Inside a run every save carries the run's lease fences
(engine/execution/runlease.py). A patient save (``Saver.save(..., patient=True)``, for a step's
known outcome) is retried on a database that is away for up to a lease time while the leases are
held.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.diff import build_diff_report
from vmware_pilot.engine.execution.runlease import RunLease
from vmware_pilot.errors import ConcurrencyConflict, DatabaseUnavailable, PilotError, StoreError
from vmware_pilot.store.leases import Fence
from vmware_pilot.store.protocol import Store

__all__ = [
    "COMMIT_ATTEMPTS",
    "DEFAULT_LEASE_SECONDS",
    "Saver",
    "WorkflowEvents",
    "stopped_by_outage",
    "timed",
]

_log = logging.getLogger(__name__)
T = TypeVar("T")

COMMIT_ATTEMPTS = 8
# How long a step may stay in flight in a Pilot on another host before it counts as crashed:
# the default dispatch timeout plus the default start-up timeout.
DEFAULT_LEASE_SECONDS = 30.0


class _Patience:
    """How long a patient save waits out a database that is away: backoff (on the event loop, no
    worker thread held) up to a deadline a lease time after the first failure, then the failure
    is raised."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline: float | None = None
        self.delay = 0.1

    async def wait(self, exc: PilotError) -> None:
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.seconds
            _log.warning(
                "the database is away (%s); retrying the save for up to %g s", exc.message, self.seconds
            )
        if now + self.delay > self.deadline:
            raise exc
        await asyncio.sleep(self.delay)
        self.delay = min(self.delay * 2, 2.0)


@dataclass
class _Applied(Generic[T]):
    """A change applied to a workflow in memory, ready to be saved: what the save must know."""

    before: WorkflowState
    result: T
    version: int
    events: list[tuple[Any, str, str]]  # (time, action, actor) of its new audit events
    notices: list[tuple[str, str, bytes]]

    def landed(self, stored: Workflow) -> bool:
        """Whether this save was committed although its caller saw the database fail: the stored
        record is the next version and ends with these audit events."""
        events = self.events
        if not events or stored.version != self.version + 1 or len(stored.audit_log) < len(events):
            return False
        tail = stored.audit_log[len(stored.audit_log) - len(events) :]
        return [(e.ts, e.action, e.actor) for e in tail] == events


def stopped_by_outage(workflow_id: str, exc: PilotError) -> StoreError:
    """What a caller is told when the database went away after a run had changed the workflow:
    never "nothing was changed"."""
    return StoreError(
        f"The workflow database became unavailable while Pilot was running workflow '{workflow_id}', "
        f"after the run had changed it ({exc.message}); the run stopped there",
        hint=f"Something was changed: do not simply retry. Once the database is back, "
        f"get_workflow_status('{workflow_id}') shows what is recorded; a step left running is "
        "taken over when this run's lease expires (a write as interrupted, effect unknown).",
        workflow_id=workflow_id,
    )


def timed(store: Store, record: Callable[..., T], *args: Any) -> Callable[[Workflow], T]:
    """A conductor recording as a change for ``commit``: the time (the database's clock) is read
    each time it is applied."""
    return lambda w: record(w, *args, store.now())


class WorkflowEvents(Protocol):
    """Told after each committed change of a workflow's state (e.g. to send notifications)."""

    def notices(self, before: WorkflowState, wf: Workflow) -> list[tuple[str, str, bytes]]:
        """The outbox rows (event id, workflow id, body) to write with this change's save."""
        ...

    def workflow_changed(self, before: WorkflowState, wf: Workflow) -> None: ...


class Saver:
    """Saves the changes of workflows: every change goes through ``commit`` (or ``save``, its form
    for the event loop), which recomputes ``diff_report``, writes the change's notifications in
    the same transaction, and reapplies it on a version conflict. The runner is one."""

    def __init__(
        self,
        store: Store,
        catalog: Callable[[], Catalog],
        events: WorkflowEvents | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.store = store
        self._catalog = catalog
        self.events = events
        self.lease_seconds = lease_seconds

    @property
    def catalog(self) -> Catalog:
        return self._catalog()

    def commit(
        self, wf: Workflow, change: Callable[[Workflow], T], fences: Sequence[Fence] = ()
    ) -> tuple[Workflow, T]:
        """Apply ``change`` and save; on a version conflict reload and apply it again. The save
        carries ``fences`` and, inside a run, the run's (``RunLease.fences``, read at each
        attempt): LeaseLost (nothing written) once another process took a lease."""
        for _ in range(COMMIT_ATTEMPTS):
            applied = self._apply(wf, change)
            try:
                self._write(wf, applied, fences)
            except ConcurrencyConflict:
                _log.info("workflow %s changed concurrently; reloading and reapplying", wf.id)
                wf = self.store.workflows.load(wf.id)
                continue
            return self._announce(wf, applied)
        raise ConcurrencyConflict(wf.id, wf.version, None)

    def _apply(self, wf: Workflow, change: Callable[[Workflow], T]) -> _Applied[T]:
        before = wf.state
        result = change(wf)
        wf.diff_report = build_diff_report(wf, self.catalog)
        # Written in the save's transaction: a crash after the commit loses no notification. Asked
        # of every change: a state change, and events such as a partial approval or an expired gate.
        notices = self.events.notices(before, wf) if self.events is not None else []
        events = [(e.ts, e.action, e.actor) for e in wf.new_events]
        return _Applied(before, result, wf.version, events, notices)

    def _write(self, wf: Workflow, applied: _Applied[Any], fences: Sequence[Fence]) -> None:
        run = RunLease.current()
        self.store.workflows.save(wf, [*fences, *(run.fences() if run is not None else ())], applied.notices)

    def _announce(self, wf: Workflow, applied: _Applied[T]) -> tuple[Workflow, T]:
        if self.events is not None and (wf.state is not applied.before or applied.notices):
            self.events.workflow_changed(applied.before, wf)
        return wf, applied.result

    async def save(
        self,
        wf: Workflow,
        change: Callable[[Workflow], T],
        fences: Sequence[Fence] = (),
        *,
        patient: bool = False,
    ) -> tuple[Workflow, T]:
        """``commit`` in a worker thread, for code on the event loop: a save that waits for the
        database's write lock (another process's transaction) must not stall every other caller.
        ``patient``: a database that is away is retried with backoff for up to a lease time
        (the run's heartbeat holds its leases meanwhile): the workflow is reloaded, and ``change``
        applied again unless the stored record shows this attempt's commit landed (only its
        answer was lost)."""
        if not patient:
            return await asyncio.to_thread(self.commit, wf, change, fences)
        waiting = _Patience(self.lease_seconds)
        conflicts = 0
        while True:
            applied = await asyncio.to_thread(self._apply, wf, change)
            try:
                await asyncio.to_thread(self._write, wf, applied, fences)
            except ConcurrencyConflict:
                conflicts += 1
                if conflicts >= COMMIT_ATTEMPTS:
                    raise
                wf = await self._reload(wf.id, waiting)
                continue
            except DatabaseUnavailable as exc:
                await waiting.wait(exc)
                wf = await self._reload(wf.id, waiting)
                if not applied.landed(wf):
                    continue
            return self._announce(wf, applied)

    async def _reload(self, workflow_id: str, waiting: _Patience) -> Workflow:
        while True:
            try:
                return await asyncio.to_thread(self.store.workflows.load, workflow_id)
            except DatabaseUnavailable as exc:
                await waiting.wait(exc)
