"""The sweeper: continues the runs of Pilot processes that died, from any other process.

Every network server, and the stdio server with dispatch, sweeps every ``sweep_seconds``: it
lists the workflows in state ``running`` and, for each whose run lease (engine/execution/runlease.py) has
expired, takes that lease (fenced: exactly one process wins it) and continues the run through the
runner's public entry points, as the dead process would have:

- read steps left ``running`` (their call was in flight) are set back to ``pending`` and run again;
- a write left ``running`` has an unknown effect: ``Runner.detect_crash`` marks it ``interrupted``
  and fails the workflow, as a run or rollback by hand would; it is never started again;
- then ``Runner.run_until_checkpoint`` walks on to the next gate, the end, or a failure.

Without a dispatcher (hand-back mode) there is nothing Pilot could continue: no sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.protocol import Dispatcher
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine.execution.runlease import LeaseBook, RunLease, release_lease, take_lease
from vmware_pilot.errors import DatabaseUnavailable, DispatchRefused, PilotError, StateRefused
from vmware_pilot.ownership import RUN_OWNER_KEY
from vmware_pilot.safety.classify import classify_step
from vmware_pilot.store.leases import Fence
from vmware_pilot.store.protocol import Store

__all__ = ["SWEEPER", "EntryPoints", "Sweeper", "sweeping"]

_log = logging.getLogger(__name__)
S = StepStatus
# Who the audit trail names for what the sweeper does.
SWEEPER = Actor("vmware-pilot (continuing the run of a Pilot that stopped)")
_PAGE = 100


class EntryPoints(Protocol):
    """The runner's public entry points the sweeper continues a run with (engine/execution/runner.py)."""

    store: Store
    lease_seconds: float
    leases: LeaseBook
    dispatcher: Dispatcher | None

    @property
    def catalog(self) -> Catalog: ...

    async def save(
        self,
        wf: Workflow,
        change: Callable[[Workflow], Any],
        fences: Sequence[Fence] = (),
        *,
        patient: bool = False,
    ) -> tuple[Workflow, Any]: ...

    def refuse_if_running_elsewhere(self, wf: Workflow, step: Step) -> None: ...

    async def detect_crash(self, wf: Workflow, actor: Actor) -> tuple[Workflow, dict[str, Any]] | None: ...

    async def dispatch_refusal(self, wf: Workflow) -> DispatchRefused | None: ...

    async def run_until_checkpoint(self, wf: Workflow, actor: Actor) -> dict[str, Any]: ...


class Sweeper:
    """Finds ``running`` workflows whose Pilot is gone and continues them (see the module doc).

    ``runner`` gives the runner when first needed (the stdio server builds its app on demand)."""

    def __init__(
        self, runner: Callable[[], EntryPoints | None], interval: float, actor: Actor = SWEEPER
    ) -> None:
        self._runner = runner
        self.interval = interval
        self.actor = actor
        self._told: set[str] = set()  # workflows whose refusal was logged once already

    async def run(self) -> None:
        """Sweep every ``interval`` seconds until cancelled; a failing sweep is logged, not fatal."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except DatabaseUnavailable:  # the store logs an outage once, not each sweep
                continue
            except PilotError as exc:
                _log.warning("sweep for workflows left running failed: %s", exc.message)
            except Exception:
                _log.exception("sweep for workflows left running raised")

    async def sweep(self) -> list[str]:
        """One pass over every ``running`` workflow (page by page); the ids of the workflows
        this process continued."""
        runner = await asyncio.to_thread(self._runner)
        if runner is None or runner.dispatcher is None:
            return []
        running: list[str] = []
        while True:
            page = await asyncio.to_thread(
                runner.store.list_all, limit=_PAGE, offset=len(running), states=[WorkflowState.RUNNING]
            )
            running.extend(summary["id"] for summary in page)
            if len(page) < _PAGE:
                break
        continued = []
        for workflow_id in dict.fromkeys(running):  # a page may repeat one that moved meanwhile
            if await self.continue_run(runner, workflow_id):
                continued.append(workflow_id)
        return continued

    async def continue_run(self, runner: EntryPoints, workflow_id: str) -> bool:
        """Continue ``workflow_id`` if it is ``running`` under an expired run lease; True when this
        process did (the run may end failed: a write in flight is marked interrupted). A run this
        Pilot is walking itself is never taken, whatever its lease looks like (it holds it again
        or stops on its own)."""
        if workflow_id in runner.leases.runs:
            return False
        held = await RunLease.take(runner, workflow_id)
        if held is None:  # its run is alive, somewhere
            return False
        async with held.walking():
            return await self._continue(runner, workflow_id)

    async def _continue(self, runner: EntryPoints, workflow_id: str) -> bool:
        try:
            wf = await asyncio.to_thread(runner.store.load, workflow_id)
            if wf.state is not WorkflowState.RUNNING:  # it stopped just before we took the lease
                return False
            wf = await self._rerun_reads(runner, wf)
            crashed = await runner.detect_crash(wf, self.actor)
            if crashed is not None:
                _log.warning("workflow %s failed: %s", wf.id, crashed[1].get("error", ""))
                return True
            refusal = await runner.dispatch_refusal(wf)
            if refusal is not None:
                raise refusal
            _log.warning("continuing workflow %s, left running by a Pilot process that stopped", wf.id)
            out = await runner.run_until_checkpoint(wf, self.actor)
            _log.warning("workflow %s continued: %s", wf.id, out.get("outcome"))
            self._told.discard(workflow_id)
            return True
        except (PilotError, DispatchRefused) as exc:
            # e.g. a step's own lease still lasts (StateRefused), or the skill cannot be started:
            # left as it is, for the next sweep.
            level = (
                logging.INFO
                if isinstance(exc, StateRefused) or workflow_id in self._told
                else logging.WARNING
            )
            self._told.add(workflow_id)
            _log.log(level, "could not continue workflow %s yet: %s", workflow_id, exc.message)
            return False

    async def _rerun_reads(self, runner: EntryPoints, wf: Workflow) -> Workflow:
        """Set read steps left ``running`` back to ``pending`` (under their step lease, so the
        process that ran them writes nothing more for them); a write left running stays for
        ``detect_crash``."""
        stuck = [s for s in wf.steps if s.status is S.RUNNING]
        if not stuck or any(classify_step(s, runner.catalog)[0] != "read" for s in stuck):
            return wf
        taken = await take_lease(runner, wf.id)
        if taken is None:
            runner.refuse_if_running_elsewhere(wf, stuck[0])  # raises while that lease lasts
            return wf
        owner, fence = taken
        indices = [s.index for s in stuck]

        def rearm(w: Workflow) -> None:
            for index in indices:
                step = w.steps[index]
                if step.status is not S.RUNNING:
                    continue
                step.status = S.PENDING
                step.started_at = None
                step.completed_at = None
                w.log(
                    "read_step_restarted",
                    f"Step {index}: {step.tool} (a read) was in flight when its Pilot process stopped; "
                    "it runs again",
                    self.actor.label,
                )
            w.extra.pop(RUN_OWNER_KEY, None)

        try:
            wf, _ = await runner.save(wf, rearm, [(wf.id, fence)])
        finally:
            await release_lease(runner, wf.id, owner, fence)
        return wf


@contextlib.asynccontextmanager
async def sweeping(sweeper: Sweeper | None) -> AsyncIterator[None]:
    """Run ``sweeper`` in the background for the block (None: no sweeper)."""
    if sweeper is None:
        yield
        return
    task = asyncio.create_task(sweeper.run(), name="pilot-sweeper")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
