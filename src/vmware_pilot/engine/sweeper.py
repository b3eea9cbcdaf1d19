"""The sweeper: continues the runs of Pilot processes that died, from any other process.

Every network server, and the stdio server with dispatch, sweeps every ``sweep_seconds``: it
lists the workflows in state ``running`` and, for each whose run lease (engine/execution/runlease.py) has
expired, takes that lease (fenced: exactly one process wins it) and continues the run through the
runner's public entry points, as the dead process would have:

- read steps left ``running`` (their call was in flight) are set back to ``pending`` and run again;
- a write left ``running`` has an unknown effect: ``Runner.detect_crash`` marks it ``interrupted``
  and fails the workflow, as a run or rollback by hand would; it is never started again;
- then ``Runner.run_until_checkpoint`` walks on to the next gate, the end, or a failure.

It also resumes runs held before a write (engine/execution/holds.py) by a hold that lifts by
itself (``RESUMABLE``: the policy's change window, engine/windows.py; an object another workflow
held, engine/conflicts.py): when the hold's check lets the step through now (on the database's
clock), it takes the run lease, releases the gate the hold opened again (``release_held``:
audited, the approvals given before the hold named) and walks on as an approval would.

Without a dispatcher (hand-back mode) there is nothing Pilot could continue: no sweep.

Every ``EXPIRY_EVERY`` seconds (or each sweep, if less often) a sweep also records the expiry of
waiting gates that expired without anyone noticing (``Closer.notice_expiry``), so the webhook
``gate_expired`` goes out even when nobody looks at the workflow.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.protocol import Dispatcher, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Event, StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine.execution import gate_records, holds
from vmware_pilot.engine.execution.holds import PreWriteCheck
from vmware_pilot.engine.execution.runlease import LeaseBook, RunLease, release_lease, take_lease
from vmware_pilot.errors import DatabaseUnavailable, DispatchRefused, PilotError, StateRefused
from vmware_pilot.results import RunResult
from vmware_pilot.safety.classify import classify_step
from vmware_pilot.store.leases import Fence
from vmware_pilot.store.protocol import Store

__all__ = [
    "EXPIRY_EVERY",
    "RESUMABLE",
    "RESUMER",
    "SWEEPER",
    "EntryPoints",
    "Sweeper",
    "release_held",
    "sweeping",
]

_log = logging.getLogger(__name__)
S = StepStatus
# Who the audit trail names for what the sweeper does.
SWEEPER = Actor("vmware-pilot (continuing the run of a Pilot that stopped)")
RESUMER = Actor("vmware-pilot (resuming a held run: its hold lifted)")
# The kinds of hold that lift by themselves (engine/windows.py, engine/conflicts.py).
RESUMABLE = frozenset({"window", "conflict"})
_PAGE = 100
# Seconds between two looks for gates that expired unnoticed (or the sweep's interval, if longer).
EXPIRY_EVERY = 60.0


class EntryPoints(Protocol):
    """The runner's public entry points the sweeper continues a run with (engine/execution/runner.py)."""

    store: Store
    lease_seconds: float
    leases: LeaseBook
    dispatcher: Dispatcher | None
    checks: list[PreWriteCheck]

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

    async def call_step(
        self, wf: Workflow, index: int, *, bound: int, reverse: bool = False, preview: bool = False
    ) -> StepOutcome: ...

    async def detect_crash(self, wf: Workflow, actor: Actor) -> tuple[Workflow, RunResult] | None: ...

    async def preflight_error(self, wf: Workflow) -> DispatchRefused | None: ...

    async def run_until_checkpoint(self, wf: Workflow, actor: Actor) -> RunResult: ...

    def notice_expiry(self, wf: Workflow) -> Workflow: ...


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
        self._expiry_due = 0.0  # when (monotonic) the next look for expired gates is due

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
        if runner is None:
            return []
        if time.monotonic() >= self._expiry_due:
            self._expiry_due = time.monotonic() + max(self.interval, EXPIRY_EVERY)
            await self.notice_expired_gates(runner)
        if runner.dispatcher is None:
            return []
        running: list[str] = []
        while True:
            page = await asyncio.to_thread(
                runner.store.workflows.list_all,
                limit=_PAGE,
                offset=len(running),
                states=[WorkflowState.RUNNING],
            )
            running.extend(summary["id"] for summary in page)
            if len(page) < _PAGE:
                break
        continued = []
        for workflow_id in dict.fromkeys(running):  # a page may repeat one that moved meanwhile
            if await self.continue_run(runner, workflow_id):
                continued.append(workflow_id)
        return continued + await self.resume_held(runner)

    async def resume_held(self, runner: EntryPoints) -> list[str]:
        """Resume every run held at a gate by a hold that lifted (see the module doc); the ids."""
        resumed = []
        for workflow_id in await _waiting_ids(runner):
            if workflow_id in runner.leases.runs:
                continue
            try:
                if await self._resume(runner, workflow_id):
                    resumed.append(workflow_id)
            except (PilotError, DispatchRefused) as exc:
                _log.info("could not resume workflow %s yet: %s", workflow_id, exc.message)
        return resumed

    async def _lifted(self, runner: EntryPoints, wf: Workflow) -> tuple[int, str] | None:
        """(gate, hold kind) when ``wf`` waits at a gate a resumable hold opened and that hold's
        check lets the held step through now."""
        gate = gate_records.pending_gate(wf)
        held = holds.hold_of(gate_records.gate_record(wf, gate.index)) if gate is not None else None
        if gate is None or held is None or held.kind not in RESUMABLE:
            return None
        kind, index = held.kind, held.step
        checks = [c for c in runner.checks if c.kind == kind]
        if not checks or not 0 <= index < len(wf.steps):
            return None
        still = await holds.first_hold(checks, holds.WriteContext(runner, wf, index, self.actor))
        return None if still is not None else (gate.index, kind)

    async def _resume(self, runner: EntryPoints, workflow_id: str) -> bool:
        wf = await asyncio.to_thread(runner.store.workflows.load, workflow_id)
        if await self._lifted(runner, wf) is None:  # cheap first look, without the lease
            return False
        held = await RunLease.take(runner, workflow_id)
        if held is None:
            return False
        async with held.walking():
            wf = await asyncio.to_thread(runner.store.workflows.load, workflow_id)
            lifted = await self._lifted(runner, wf)  # again, under the run lease
            if lifted is None:
                return False
            change = functools.partial(
                release_held, gate_index=lifted[0], kind=lifted[1], actor=RESUMER.label, store=runner.store
            )
            wf, released = await runner.save(wf, change)
            if not released:
                return False
            out = await runner.run_until_checkpoint(wf, RESUMER)
            _log.warning("workflow %s resumed (its %s hold lifted): %s", wf.id, lifted[1], out.outcome)
            return True

    async def notice_expired_gates(self, runner: EntryPoints) -> list[str]:
        """Record the expiry of every waiting gate that expired unnoticed (``Closer.notice_expiry``:
        once per gate across every Pilot, announced by the webhook ``gate_expired``); their ids."""
        noticed = []
        for workflow_id in await _waiting_ids(runner):
            try:
                wf = await asyncio.to_thread(runner.store.workflows.load, workflow_id)
                version = wf.version
                after = await asyncio.to_thread(runner.notice_expiry, wf)
            except DatabaseUnavailable:
                raise
            except PilotError as exc:
                _log.warning("could not record the expiry of %s's gate: %s", workflow_id, exc.message)
                continue
            if after.version != version:
                noticed.append(workflow_id)
        return noticed

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
            wf = await asyncio.to_thread(runner.store.workflows.load, workflow_id)
            if wf.state is not WorkflowState.RUNNING:  # it stopped just before we took the lease
                return False
            wf = await self._rerun_reads(runner, wf)
            crashed = await runner.detect_crash(wf, self.actor)
            if crashed is not None:
                _log.warning("workflow %s failed: %s", wf.id, crashed[1].error)
                return True
            refusal = await runner.preflight_error(wf)
            if refusal is not None:
                raise refusal
            _log.warning("continuing workflow %s, left running by a Pilot process that stopped", wf.id)
            out = await runner.run_until_checkpoint(wf, self.actor)
            _log.warning("workflow %s continued: %s", wf.id, out.outcome)
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
            w.run_owner = None

        try:
            wf, _ = await runner.save(wf, rearm, [(wf.id, fence)])
        finally:
            await release_lease(runner, wf.id, owner, fence)
        return wf


def release_held(w: Workflow, *, gate_index: int, kind: str, actor: str, store: Store) -> bool:
    """Release gate ``gate_index``, opened again by a ``kind`` hold that lifted (a change for the
    runner's save): the gate passes as approved by the approvals given before the hold, audited
    as ``hold_lifted``; False (nothing changed) when the stored record waits no longer so."""
    gate = gate_records.pending_gate(w) if w.state is WorkflowState.AWAITING_APPROVAL else None
    record = gate_records.gate_record(w, gate_index)
    held = holds.hold_of(record)
    if gate is None or gate.index != gate_index or record is None or held is None or held.kind != kind:
        return False
    names = gate_records.approver_names(record.earlier[-1] if record.earlier else None)
    now = store.now()
    gate.status = S.SUCCESS
    gate.result = {"approved_by": ", ".join(names), "hold_lifted": kind}
    gate.completed_at = now
    fire(w, Event.APPROVE)
    w.log(
        "hold_lifted",
        f"The {kind} hold of step {held.step} lifted: the gate at step {gate_index} passes again as "
        f"approved by {', '.join(names) or 'nobody named'}, and the run goes on",
        actor,
        at=now,
    )
    return True


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


async def _waiting_ids(runner: EntryPoints) -> list[str]:
    """The ids of every workflow waiting at a gate, read page by page, each once."""
    waiting: list[str] = []
    while True:
        page = await asyncio.to_thread(
            runner.store.workflows.list_all,
            limit=_PAGE,
            offset=len(waiting),
            states=[WorkflowState.AWAITING_APPROVAL],
        )
        waiting.extend(summary["id"] for summary in page)
        if len(page) < _PAGE:
            return list(dict.fromkeys(waiting))
