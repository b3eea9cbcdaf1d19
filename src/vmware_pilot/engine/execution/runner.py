"""The async runner: carries out what the conductor decides, against the store and the dispatcher.

``engine/execution/conductor.py`` decides each next action of a run and how its outcome changes the
workflow, with no I/O; the runner takes the leases, calls the dispatcher, saves and builds the
results. Approve, rollback and cancel are composed here from what ``engine/execution/approval.py`` and
``engine/execution/undo.py`` decide and record, so neither of them calls back into the runner.

Every change goes through ``commit``: apply a change function, recompute ``diff_report`` and save
with the expected version; on a conflict reload and apply it again, so a concurrent writer is
never overwritten. Inside a run every save carries the run's lease fences and every call is sent
only under them (engine/execution/runlease.py). The save of a step's known outcome is patient:
retried on a database that is away for up to a lease time while the leases are held. Without a
dispatcher (hand-back mode) executable steps are recorded ``not_executed`` and handed to the
caller in ``pending_dispatch``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Generic, Protocol, TypeVar

from vmware_pilot import telemetry
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.judge import one_line
from vmware_pilot.dispatch.protocol import BeforeSend, Dispatcher, OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Outcome, StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.refs import resolve_refs
from vmware_pilot.engine import acknowledge, conflicts, guard, handout, windows
from vmware_pilot.engine.diff import build_diff_report
from vmware_pilot.engine.execution import approval, conductor, gate_records, holds, settling, undo
from vmware_pilot.engine.execution.conductor import NOT_EXECUTED_REASON
from vmware_pilot.engine.execution.holds import PreWriteCheck
from vmware_pilot.engine.execution.runlease import LeaseBook, RunLease, StepLease, release_lease, take_lease
from vmware_pilot.engine.inspection import inspect_gate
from vmware_pilot.engine.progress import ProgressFn, report
from vmware_pilot.engine.secrets import (
    SecretVault,
    find_masked_secrets,
    resolve_secret_refs,
    scrub_values,
    secret_values,
)
from vmware_pilot.errors import (
    ConcurrencyConflict,
    DatabaseUnavailable,
    DispatchRefused,
    EffectUnknown,
    PilotError,
    SecretUnavailable,
    StateRefused,
    StoreError,
)
from vmware_pilot.ownership import refuse_held, this_process
from vmware_pilot.policy.model import EMPTY, Policy
from vmware_pilot.results import RunResult
from vmware_pilot.safety.classify import classify_step
from vmware_pilot.store.leases import Fence, LeaseLost
from vmware_pilot.store.protocol import Store
from vmware_pilot.twin.rehearse import Rehearser

__all__ = ["NOT_EXECUTED_REASON", "Runner", "WorkflowEvents"]

_log = logging.getLogger(__name__)
T = TypeVar("T")
S = StepStatus

_HANDBACK_MESSAGE = (
    "Workflow NOT completed: Pilot executed nothing. Perform each step in pending_dispatch yourself, "
    "in order, with the skill's own tool. A Pilot started with --dispatch will not run steps "
    "handed out here."
)
_NO_DISPATCH_UNDO = "No dispatch configured: Pilot cannot run this undo and is refusing to fake execution"
_COMMIT_ATTEMPTS = 8
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


def _timed(store: Store, record: Callable[..., T], *args: Any) -> Callable[[Workflow], T]:
    """A conductor recording as a change for ``commit``: the time (the database's clock) is read
    each time it is applied."""
    return lambda w: record(w, *args, store.now())


class WorkflowEvents(Protocol):
    """Told after each committed change of a workflow's state (e.g. to send notifications)."""

    def notices(self, before: WorkflowState, wf: Workflow) -> list[tuple[str, str, bytes]]:
        """The outbox rows (event id, workflow id, body) to write with this change's save."""
        ...

    def workflow_changed(self, before: WorkflowState, wf: Workflow) -> None: ...


class Runner:
    # Rehearses a gate's released steps on a twin of the inventory (engine.inspection); app sets it.
    twin: Rehearser | None = None

    def __init__(
        self,
        store: Store,
        catalog: Callable[[], Catalog],
        dispatcher: Dispatcher | None,
        vault: SecretVault,
        environ: Mapping[str, str] | None = None,
        events: WorkflowEvents | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        checks: Sequence[PreWriteCheck] = (),
        policy: Callable[[], Policy] = lambda: EMPTY,
        gate_expiry_minutes: float = 0.0,
    ) -> None:
        self.store = store
        # Asked in order right before each write step is sent (engine/execution/holds.py).
        self.checks = list(checks)
        # The policy in force (policy/source.py), asked at each gate and approval.
        self.policy = policy
        self.lease_seconds = lease_seconds
        # VMWARE_PILOT_GATE_EXPIRY_MINUTES: the longest a gate releasing destructive steps waits.
        self.gate_expiry_minutes = gate_expiry_minutes
        self.events = events
        self._catalog = catalog
        self.dispatcher = dispatcher
        self.vault = vault
        self.environ: Mapping[str, str] = environ if environ is not None else {}
        self.leases = LeaseBook()

    @property
    def catalog(self) -> Catalog:
        return self._catalog()

    # --- persistence ------------------------------------------------------------------------
    def commit(
        self, wf: Workflow, change: Callable[[Workflow], T], fences: Sequence[Fence] = ()
    ) -> tuple[Workflow, T]:
        """Apply ``change`` and save; on a version conflict reload and apply it again. The save
        carries ``fences`` and, inside a run, the run's (``RunLease.fences``, read at each
        attempt): LeaseLost (nothing written) once another process took a lease."""
        for _ in range(_COMMIT_ATTEMPTS):
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
                if conflicts >= _COMMIT_ATTEMPTS:
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

    # --- leases (ownership.py) -----------------------------------------------------------
    def refuse_if_running_elsewhere(self, wf: Workflow, step: Step) -> None:
        """Refuse while ``step`` (found running) is under another run's unexpired lease."""
        refuse_held(wf, step, self.store.leases.lease(wf.id))

    async def _take_lease(self, wf: Workflow, step: Step) -> tuple[str, int]:
        """The step lease (row: the workflow id), or the refusal while another run holds it."""
        taken = await take_lease(self, wf.id)
        if taken is None:
            refuse_held(wf, step, await asyncio.to_thread(self.store.leases.lease, wf.id))
            raise StateRefused(  # the lease was released between the two reads: just retry
                f"Workflow '{wf.id}' was busy in another Pilot process; nothing was changed",
                hint="Try again.",
                workflow_id=wf.id,
                state=wf.state.value,
            )
        return taken

    def create(self, wf: Workflow) -> None:
        self.vault.remember(wf)
        wf.diff_report = build_diff_report(wf, self.catalog)
        self.store.workflows.create(wf)

    # --- results ----------------------------------------------------------------------------
    def result(self, wf: Workflow, actor: Actor, outcome: Outcome | None = None, **extra: Any) -> RunResult:
        """WF + outcome (+ pending_dispatch and message whenever a step handed to ``actor`` is
        not_executed; steps handed to someone else are listed under ``with_another_caller``)."""
        found: dict[str, Any] = {}
        if outcome is not None:
            found["outcome"] = outcome
        mine, others = handout.pending_dispatch(self.vault, wf, actor)
        if mine:
            found["pending_dispatch"] = [self._with_agent_checks(wf, entry) for entry in mine]
            found["message"] = _HANDBACK_MESSAGE
        if others:
            found["with_another_caller"] = others
        if wf.state is WorkflowState.AWAITING_APPROVAL:
            found["pending_gate"] = gate_records.gate_view(
                wf, self.catalog, self.store.now(), self.dispatcher is not None
            ).gate
        return RunResult(**wf.to_dict(), **{**found, **extra})

    def _with_agent_checks(self, wf: Workflow, entry: dict[str, Any]) -> dict[str, Any]:
        """A handed-out step with, for a write, what the pre-write checks would have checked
        (``agent_checks``): without a dispatcher that is the agent's to do."""
        said = [c.handed_out(wf, entry["index"], self.catalog) for c in self.checks if c.handed_out]
        return {**entry, "agent_checks": [s for s in said if s]} if any(said) else entry

    def released_result(self, wf: Workflow, agent: Actor, outcome: Outcome | None = None) -> RunResult:
        """What a person who approved at the CLI or console is shown after a run without dispatch
        handed the released steps to ``agent`` (``approval.recipient``): the steps are listed under
        ``with_another_caller`` (never as the person's own ``pending_dispatch``), ``released_to``
        names the agent, and ``message`` says what happens next."""
        mine, _ = handout.pending_dispatch(self.vault, wf, agent)
        found: dict[str, Any] = {}
        if wf.state is WorkflowState.AWAITING_APPROVAL:
            found["pending_gate"] = gate_records.gate_view(
                wf, self.catalog, self.store.now(), self.dispatcher is not None
            ).gate
        held = [
            {**s.ref(), "handed_to": handout.holder(wf, s)} for s in wf.steps if s.status is S.NOT_EXECUTED
        ]
        if held:
            found["with_another_caller"] = held
        if outcome is not None:
            found["outcome"] = outcome
        if not mine:
            return RunResult(**wf.to_dict(), **found)
        who = agent.label or "the agent that runs the workflow (not known to Pilot)"
        nxt = (
            "Its next run_workflow of this workflow returns them in pending_dispatch"
            if wf.state is WorkflowState.PENDING
            else "get_workflow_status shows them; the next gate waits for approval"
        )
        return RunResult(
            **wf.to_dict(),
            **found,
            released_to=agent.label,
            message=(
                f"Approved. Pilot runs nothing without dispatch: the {len(mine)} step(s) this gate "
                f"released were handed to the agent that runs workflow '{wf.id}' ({who}), not to you. "
                f"{nxt}; that agent performs them with the skills' own tools. Nothing ran yet."
            ),
        )

    def refuse_handback(self, wf: Workflow, actor: Actor, start: int = 0) -> None:
        """Without a dispatcher: refuse, before anything changes, a walk from ``start`` that would
        hand ``actor`` steps already with another caller, or a literal secret not theirs."""
        if self.dispatcher is None:
            handout.refuse_walk(wf, actor, start)

    async def take_objects(self, wf: Workflow, verb: str) -> None:
        """Take the objects the workflow's write steps name (engine/conflicts.py), or refuse
        ``verb`` (nothing changed) while another workflow holds one of them; in ``wait`` mode
        the run goes on and its first write waits (``conflicts.conflict_check``) when it can."""
        hold = await asyncio.to_thread(conflicts.take, self.store, wf, self.catalog)
        if hold is None:
            return
        waiting = self.policy().conflicts.mode == "wait"
        if waiting and conflicts.can_wait(wf, self.catalog):
            return
        raise conflicts.held_refusal(wf, hold, verb, waiting=waiting)

    # --- runs -------------------------------------------------------------------------------
    async def detect_crash(self, wf: Workflow, actor: Actor) -> tuple[Workflow, RunResult] | None:
        """A step left 'running' by a dead process: mark it interrupted and fail the workflow."""
        stuck = next((s for s in wf.steps if s.status is S.RUNNING), None)
        if stuck is None:
            return None
        await asyncio.to_thread(self.refuse_if_running_elsewhere, wf, stuck)
        index = stuck.index
        # Taking the expired lease bumps its fence: the run that held it can no longer record
        # the step's outcome over this verdict.
        owner, fence = await self._take_lease(wf, stuck)
        telemetry.count("lease_takeovers")

        def change(w: Workflow) -> bool:
            # False when its run recorded the outcome just before.
            marked = conductor.mark_interrupted(w, index, actor.label, self.store.now())
            if marked:
                w.run_owner = None
            return marked

        try:
            wf, marked = await self.save(wf, change, [(wf.id, fence)])
        finally:
            await release_lease(self, wf.id, owner, fence)
        if not marked:
            return None
        wf = await self.settle(wf, actor, [index])
        return wf, self.result(wf, actor, Outcome.FAILED, error=settling.crash_error(wf.steps[index]))

    async def settle(self, wf: Workflow, actor: Actor, indices: Sequence[int] | None = None) -> Workflow:
        """Settle interrupted steps by reading their targets (``engine.execution.settling``); a
        problem there is logged and never stops the caller."""
        if not any(settling.needs_settling(s) for s in wf.steps):
            return wf
        try:
            return await settling.settle(self, wf, actor, indices, self.lease_seconds)
        except (PilotError, DispatchRefused) as exc:
            _log.warning("could not settle the interrupted steps of %s: %s", wf.id, exc.message)
        except Exception:
            _log.exception("settling the interrupted steps of %s raised", wf.id)
        return await asyncio.to_thread(self.store.workflows.load, wf.id)

    async def dispatch_refusal(self, wf: Workflow, exclude: Sequence[int] = ()) -> DispatchRefused | None:
        """With a dispatcher: the refusal to raise before changing anything, or None
        (docs/contract.md#dispatch-refusals)."""
        if self.dispatcher is None:
            return None
        handed = [s.ref() for s in wf.steps if s.status is S.NOT_EXECUTED and s.index not in exclude]
        if handed:
            return DispatchRefused(
                "Refusing to run: these steps were handed out earlier by a Pilot without --dispatch "
                "and may already have been performed. Cancel this workflow, check the target "
                "system, and create a new workflow.",
                workflow_id=wf.id,
                state=wf.state.value,
                handed_out=handed,
            )
        todo = [s for s in wf.steps if s.status is S.PENDING and not s.is_gate]
        problems = await self.dispatcher.preflight(todo)
        if problems:
            return DispatchRefused(
                "Nothing was run — these steps could not be started: " + " | ".join(problems),
                workflow_id=wf.id,
                state=wf.state.value,
            )
        return None

    async def run_until_checkpoint(
        self, wf: Workflow, actor: Actor, progress: ProgressFn | None = None
    ) -> RunResult:
        """Walk from the first pending step to the next gate, the end, or a failure: carry out
        the conductor's actions (``engine.execution.conductor.next_action``) one after the other."""

        def start(w: Workflow) -> None:
            self.refuse_handback(w, actor)  # again on the stored record: another process may race
            conductor.start_run(w, actor.label, self.store.now())

        if self.dispatcher is not None:
            now = await asyncio.to_thread(self.store.now)
            closed = windows.ungated_refusal(self.policy(), wf, self.catalog, now)
            if closed is not None:
                raise closed
        await self.take_objects(wf, "run")
        wf, _ = await self.save(wf, start)
        try:
            return await self._walk(wf, actor, progress)
        except DatabaseUnavailable as exc:  # raised after 'start' committed: something changed
            raise stopped_by_outage(wf.id, exc) from exc

    async def _walk(self, wf: Workflow, actor: Actor, progress: ProgressFn | None) -> RunResult:
        dispatching = self.dispatcher is not None
        walk = conductor.Walk()
        action = conductor.next_action(wf, walk, dispatching=dispatching, is_read=self.is_read)
        if not isinstance(action, conductor.Fail):
            # Optional for dispatchers: one without it opens sessions when the calls come.
            prepare = getattr(self.dispatcher, "prepare", None)
            if prepare is not None:
                await prepare(conductor.group_demand(wf, self.is_read))
        total = sum(1 for s in wf.steps if not s.is_gate)
        done = sum(1 for s in wf.steps if not s.is_gate and s.status not in (S.PENDING, S.NOT_EXECUTED))
        while True:
            ok = True
            if isinstance(action, conductor.Fail):
                if action.index is not None:  # a record from before plans were checked
                    refused = StepOutcome(OutcomeKind.FAILED, None, action.reason)
                    wf, _ = await self.save(
                        wf,
                        functools.partial(
                            self._record, indices=(action.index,), outcomes=(refused,), actor=actor
                        ),
                    )
                return await self._finish_failed(wf, actor)
            if isinstance(action, conductor.StopAtGate):
                # Read the targets first, so the gate (and its notification) shows their state.
                wf = await self.inspect(wf, actor)
                rule = guard.gate_rule(self.policy(), wf, action.index, self.catalog)
                default = gate_records.default_expiry(
                    wf, action.index, self.catalog, self.gate_expiry_minutes
                )
                wf, _ = await self.save(
                    wf,
                    functools.partial(
                        self._reach_gate, index=action.index, actor=actor.label, rule=rule, default=default
                    ),
                )
                await report(progress, done, total, f"step {action.index}: waiting for approval")
                return self.result(wf, actor, Outcome.AWAITING_APPROVAL)
            if isinstance(action, conductor.Finish):
                wf, _ = await self.save(wf, _timed(self.store, conductor.finish, action, actor.label))
                if action.outcome is Outcome.COMPLETED:
                    await report(progress, total, total, "workflow completed")
                return self.result(wf, actor, action.outcome)
            if isinstance(action, conductor.HandBack):
                wf = await self._record_handback(wf, list(action.indices), actor)
            else:
                wf, held = await self._hold_write(wf, action, actor)
                if held is not None:
                    action = held
                    continue
                members = list(action.indices)
                await report(progress, done, total, self._describe(wf, members))
                wf, failed = await self._run_batch(wf, members, actor)
                if failed:  # a write left interrupted: read whether it took effect
                    wf = await self.settle(wf, actor, members)
                ok = not failed
                done += len(members)
                await report(progress, done, total, self._describe(wf, members, finished=True))
            walk = conductor.after(walk, action, ok)
            action = conductor.next_action(wf, walk, dispatching=dispatching, is_read=self.is_read)

    async def _hold_write(
        self, wf: Workflow, action: conductor.RunStep | conductor.RunGroup, actor: Actor
    ) -> tuple[Workflow, conductor.StopAtGate | conductor.Fail | None]:
        """Before a write step is sent, the pre-write checks (engine/execution/holds.py): on a hold
        the step is not sent and the run stops at the gate that released it (or fails, without
        one); None: send it. Reads (and read groups) are never checked."""
        if (
            not self.checks
            or not isinstance(action, conductor.RunStep)
            or self.is_read(wf.steps[action.index])
        ):
            return wf, None
        hold = await holds.first_hold(self.checks, holds.WriteContext(self, wf, action.index, actor))
        if hold is None:
            return wf, None
        telemetry.count("write_holds", kind=hold.kind)
        wf, gate = await self.save(wf, _timed(self.store, holds.reopen, action.index, hold, actor.label))
        return wf, conductor.Fail() if gate is None else conductor.StopAtGate(gate)

    async def _record_handback(self, wf: Workflow, indices: list[int], actor: Actor) -> Workflow:
        wf, _ = await self.save(wf, _timed(self.store, conductor.record_handback, indices, actor))
        return wf

    def is_read(self, step: Step) -> bool:
        return classify_step(step, self.catalog)[0] == "read"

    @staticmethod
    def _describe(wf: Workflow, batch: list[int], finished: bool = False) -> str:
        names = ", ".join(f"{wf.steps[i].skill}.{wf.steps[i].tool}" for i in batch)
        label = f"steps {batch[0]}-{batch[-1]}" if len(batch) > 1 else f"step {batch[0]}"
        if finished:
            statuses = ", ".join(wf.steps[i].status.value for i in batch)
            return f"{label}: {names} → {statuses}"
        return f"{label}: running {names}"

    async def _run_batch(self, wf: Workflow, batch: list[int], actor: Actor) -> tuple[Workflow, bool]:
        """Run a step (or a parallel group of read steps) and record every member's outcome,
        under the run's lease and the step lease (engine/execution/runlease.py): each call is
        sent only once both were held right before it; losing them cancels the calls not sent
        and saves nothing more."""
        run = RunLease.current()
        if run is None:
            raise StateRefused(
                f"Workflow '{wf.id}': a step runs only under the workflow's run lease; nothing was run",
                workflow_id=wf.id,
                state=wf.state.value,
            )
        owner, fence = await self._take_lease(wf, wf.steps[batch[0]])
        claim = StepLease(owner, fence)

        def mark_running(w: Workflow) -> None:
            if w.run_owner is not None and w.run_owner.owner == owner:
                return  # this very save, committed before its answer was lost, retried
            conductor.mark_running(w, batch, self.store.now())
            w.run_owner = this_process(owner)

        run.step = claim
        try:
            wf, _ = await self.save(wf, mark_running)
            outcomes = await self._send_all(run, wf, batch)

            record = functools.partial(self._record, indices=batch, outcomes=outcomes, actor=actor)

            # One save for the whole group: each member's outcome and audit event, in step order;
            # patient, as the outcome is known and must not be lost to a database blip.
            wf, ok = await self.save(wf, record, patient=True)
            failed = not ok
        except LeaseLost as exc:
            raise StateRefused(
                f"{exc.message}: its lease was taken over while the step was in flight. No call "
                "was sent after that; a call already sent is recorded by the Pilot that took over "
                "(a write as interrupted, effect unknown) and never sent again",
                hint=exc.hint,
                workflow_id=wf.id,
            ) from exc
        finally:
            run.step = None
            # Also after the run lease was lost: the taker may then judge the step at once (a
            # release only frees the lease while it is still this owner's at this fence).
            await release_lease(self, wf.id, owner, claim.fence)
        return wf, failed

    async def _send_all(self, run: RunLease, wf: Workflow, batch: list[int]) -> list[StepOutcome]:
        """Each member's call as a task, each sent only through ``run.before_send``; the ones not
        yet sent are cancelled when the run loses its lease (then LeaseLost)."""
        calls = [
            asyncio.create_task(self.call_step(wf, index, bound=index, before_send=run.before_send))
            for index in batch
        ]
        run.unsent.update(calls)
        try:
            answers = await asyncio.gather(*calls, return_exceptions=True)
        finally:
            run.unsent.difference_update(calls)
        if run.lost is not None:
            raise run.lost
        outcomes: list[StepOutcome] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
            outcomes.append(answer)
        return outcomes

    async def inspect(self, wf: Workflow, actor: Actor) -> Workflow:
        """Read the pending gate's targets and previews (``engine.inspection``); a problem there is
        logged and never stops the run or the approval."""
        if self.dispatcher is None:
            return wf
        try:
            return await inspect_gate(self, wf, actor)
        except (PilotError, DispatchRefused) as exc:
            _log.warning("could not inspect the gate of %s: %s", wf.id, exc.message)
        except Exception:
            _log.exception("inspecting the gate of %s raised", wf.id)
        return self.store.workflows.load(wf.id)

    async def call_step(
        self,
        wf: Workflow,
        index: int,
        *,
        bound: int,
        reverse: bool = False,
        preview: bool = False,
        before_send: BeforeSend | None = None,
    ) -> StepOutcome:
        """Resolve references and secrets, then dispatch; every exception but LeaseLost (raised
        by ``before_send``: nothing sent) becomes an outcome. ``preview`` calls the step's tool
        with ``confirm: false`` (the caller checked it declares it). Measured (``telemetry``): its
        duration by skill, tool and outcome; a failure by kind."""
        started = time.monotonic()
        telemetry.workflow_id.set(wf.id)
        step = wf.steps[index]
        skill, tool = step.skill, (step.rollback_tool if reverse else step.tool)
        with telemetry.span(
            f"tools/call {tool}",
            "client",
            {
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": tool,
                "gen_ai.operation.name": "execute_tool",
                "vmware_pilot.workflow_id": wf.id,
                "vmware_pilot.step": index,
                "vmware_pilot.skill": skill,
                "vmware_pilot.undo": reverse,
            },
        ) as current:
            outcome = await self._call_step(
                wf, index, bound=bound, reverse=reverse, preview=preview, before_send=before_send
            )
            if current is not None:
                current.set_attribute("vmware_pilot.outcome", outcome.kind.value)
        if self.dispatcher is not None:
            kind = outcome.kind.value
            telemetry.observe(
                "step_duration_seconds", time.monotonic() - started, skill=skill, tool=tool, outcome=kind
            )
            if outcome.kind in (OutcomeKind.FAILED, OutcomeKind.EFFECT_UNKNOWN):
                telemetry.count("dispatch_errors", skill=skill, kind=kind)
        return outcome

    async def _call_step(
        self,
        wf: Workflow,
        index: int,
        *,
        bound: int,
        reverse: bool = False,
        preview: bool = False,
        before_send: BeforeSend | None = None,
    ) -> StepOutcome:
        step = wf.steps[index]
        field = "rollback_params" if reverse else "params"
        tool = step.rollback_tool if reverse else step.tool
        if self.dispatcher is None:
            return StepOutcome(OutcomeKind.FAILED, None, _NO_DISPATCH_UNDO)
        try:
            stored = step.rollback_params if reverse else step.params
            params = resolve_refs(self.vault.restore(wf.id, index, field, stored), wf.steps, bound)
            secrets = secret_values(params, self.environ)
            params = resolve_secret_refs(params, self.environ)
            masked = find_masked_secrets(params)
            if masked:
                raise SecretUnavailable(
                    f"Step {index} needs secret(s) {', '.join(masked)}, but the store keeps secrets masked "
                    "and the live value did not survive a restart of Pilot",
                    hint="Cancel this workflow and create it again with the secret re-supplied "
                    '(better: as a reference {"$env": "VAR"}).',
                )
            if preview:
                params = {**params, "confirm": False}
            elif not reverse:  # what the skill asks echoed from the preview the approver saw
                params = acknowledge.with_echo(step.skill, tool, params, acknowledge.gate_preview(wf, index))
            outcome = await self.dispatcher.call(step.skill, tool, params, before_send)
            return StepOutcome(
                outcome.kind, scrub_values(outcome.payload, secrets), scrub_values(outcome.message, secrets)
            )
        except EffectUnknown as exc:
            return StepOutcome(OutcomeKind.EFFECT_UNKNOWN, exc.result_payload, exc.message)
        except LeaseLost:
            raise
        except (PilotError, DispatchRefused) as exc:
            return StepOutcome(OutcomeKind.FAILED, None, exc.message)
        except Exception as exc:  # a dispatcher bug must not leave the step 'running'
            _log.exception("dispatch of step %s of %s raised", index, wf.id)
            return StepOutcome(OutcomeKind.FAILED, None, f"{type(exc).__name__}: {exc}")

    def _record(
        self, w: Workflow, indices: Sequence[int], outcomes: Sequence[StepOutcome], actor: Actor
    ) -> bool:
        """Record the outcomes (``engine.execution.conductor.record_outcomes``); the run gives up its claim
        on the workflow once no step of it is in flight."""
        ok = conductor.record_outcomes(w, indices, outcomes, actor.label, self.store.now())
        if not any(s.status is S.RUNNING for s in w.steps):
            w.run_owner = None
        return ok

    async def _finish_failed(self, wf: Workflow, actor: Actor) -> RunResult:
        wf, _ = await self.save(wf, conductor.fail)
        bad = [s for s in wf.steps if s.status in (S.FAILED, S.INTERRUPTED)]
        error = "; ".join(
            f"step {s.index} ({s.skill}.{s.tool}) {s.status.value}: "
            f"{one_line((s.result or {}).get('error', '')) if isinstance(s.result, dict) else ''}"
            f"{settling.said(s)}"
            for s in bad
        )
        return self.result(wf, actor, Outcome.FAILED, error=error)

    # --- approval ---------------------------------------------------------------------------
    async def approve(
        self,
        wf: Workflow,
        actor: Actor,
        approver: str,
        acknowledge_not_executed: bool,
        progress: ProgressFn | None = None,
        *,
        expected_digest: str = "",
        channel: str = "mcp",
        gate_step: int | None = None,
        holds_run: bool = True,
        acknowledge_failure: str = "",
        comment: str = "",
        admitted: approval.Admitted | None = None,
    ) -> RunResult:
        """Record an approval of the pending gate (after the caller's checks); at the last one the
        approvals the gate requires, release it and continue the run. ``engine.execution.approval`` decides
        and records (docs/contract.md#approve, plus digest, expiry, quorum and ``gate_step``); this
        carries it out, on the database's clock. ``holds_run`` False (another Pilot holds the run
        lease, e.g. recording another approval of the gate): recorded only when it is not the
        last approval the gate needs; the last raises ``approval.QuorumReached``, nothing recorded.
        ``admitted``: the service's precheck of this approval (made once, before the door asked
        anyone): not repeated for the first attempt; ``approval.record`` checks the stored record
        again in the save (state, gate, expiry, plan, four eyes, predicted failure). An attempt
        after another approval landed checks again."""
        who = approver.strip()
        dispatching = self.dispatcher is not None
        try:
            for _ in range(_COMMIT_ATTEMPTS):
                now = await asyncio.to_thread(self.store.now)
                if admitted is None:
                    admitted = approval.precheck(
                        wf,
                        approver,
                        acknowledge_not_executed,
                        expected_digest,
                        now=now,
                        gate_step=gate_step,
                        acknowledge_failure=acknowledge_failure,
                    )
                gate, digest, so_far, required = admitted
                admitted = None  # a further attempt reloaded the workflow: checked again
                policy = self.policy()
                guard.refuse_denied(policy, wf.steps, self.catalog, "approve", wf.id)
                required, judged = self.policy_demand(wf, gate, actor, who, now, policy, required)
                refused = windows.exception_refusal(policy, wf, gate, actor, self.catalog, now)
                if refused is not None:
                    raise refused
                last = so_far + 1 >= required
                if last and not holds_run:
                    raise approval.QuorumReached(
                        f"The approval by {who} completes the quorum of the gate at step {gate.index}",
                        workflow_id=wf.id,
                    )
                unrun = [s for s in wf.steps[: gate.index] if s.status is S.NOT_EXECUTED]
                gate_index = gate.index
                to = approval.recipient(wf, actor, channel, dispatching)
                if last:
                    refusal = await self.dispatch_refusal(wf, exclude=[s.index for s in unrun])
                    if refusal is not None:
                        raise refusal
                    self.refuse_handback(wf, to, start=gate_index + 1)
                    await self.take_objects(wf, "approve")
                change = functools.partial(
                    approval.record,
                    gate_index=gate_index,
                    who=who,
                    digest=digest,
                    required=required,
                    channel=channel,
                    actor=actor,
                    to=to,
                    dispatching=dispatching,
                    now=now,
                    release=last,
                    acknowledge_failure=acknowledge_failure,
                    policy_digest=policy.digest if judged else "",
                    comment=comment,
                )
                try:
                    wf, released = await self.save(wf, change)
                    break
                except approval.QuorumReached:
                    if not holds_run:
                        raise
                    # Another Pilot recorded an approval since the load: this one is the last now.
                    wf = await asyncio.to_thread(self.store.workflows.load, wf.id)
            else:
                raise ConcurrencyConflict(wf.id, wf.version, None)
        except PilotError as exc:
            _count_gate_refusal(exc)
            raise
        if released:
            waited = gate_records.waited_seconds(wf, gate_index, now)
            telemetry.count("gate_decisions", decision="approved")
            if waited is not None:
                telemetry.observe("gate_wait_seconds", waited, decision="approved")
        try:
            return await self._after_approval(wf, actor, to, gate_index, who, required, released, progress)
        except DatabaseUnavailable as exc:  # the approval is recorded: something changed
            raise stopped_by_outage(wf.id, exc) from exc

    def _reach_gate(
        self, w: Workflow, *, index: int, actor: str, rule: guard.GateRule | None, default: float | None
    ) -> None:
        record = rule.record() if rule is not None else None
        conductor.reach_gate(w, index, actor, self.store.now(), record, default)

    def policy_demand(
        self, wf: Workflow, gate: Step, actor: Actor, who: str, now: datetime, policy: Policy, required: int
    ) -> tuple[int, bool]:
        """The approvals gate ``gate`` needs under the stricter of the policy rule recorded when the
        run reached it and the rule of the policy in force now, and whether a policy judged it (a
        policy is in force, or the gate recorded a rule: the approval records the policy's digest);
        refuses (``PolicyRefused``) an approver either rule does not accept, or a gate past either
        rule's validity."""
        record = gate_records.gate_record(wf, gate.index)
        recorded = guard.GateRule.from_record(record.policy if record else None)
        demand = guard.demand_of(recorded, guard.gate_rule(policy, wf, gate.index, self.catalog))
        refusal = guard.approval_refusal(demand, wf, gate, actor, who, now, record)
        if refusal is not None:
            raise refusal
        return max(required, demand.quorum), recorded is not None or not policy.is_empty

    async def _after_approval(
        self,
        wf: Workflow,
        actor: Actor,
        to: Actor,
        gate_index: int,
        who: str,
        required: int,
        released: bool,
        progress: ProgressFn | None,
    ) -> RunResult:
        if not released:
            missing = approval.approvals_missing(wf, gate_index, required)
            out = self.result(wf, actor, Outcome.AWAITING_APPROVAL, approvals_missing=missing)
            if out.has("message"):
                return out
            return out.but(message=approval.waiting_message(who, gate_index, missing))
        if to is actor:
            return await self.run_until_checkpoint(wf, actor, progress)
        ran = await self.run_until_checkpoint(wf, to, progress)
        stored = await asyncio.to_thread(self.store.workflows.load, wf.id)
        return self.released_result(stored, to, ran.outcome)

    # --- rollback and cancel ----------------------------------------------------------------
    async def rollback(self, wf: Workflow, actor: Actor, include_unknown: bool = False) -> RunResult:
        """Undo every step Pilot recorded as success, last first; a failed undo never stops the rest
        (``engine.execution.undo`` decides and records). ``include_unknown`` (the caller acknowledged unknown
        effects) also attempts the undo of steps whose effect is unknown."""
        wf, _ = await self.save(wf, functools.partial(undo.start_rollback, actor=actor))
        for index in undo.to_undo(wf, include_unknown):
            what = undo.undo_of(wf.steps[index], self.catalog)
            if what == undo.SKIP:
                continue
            if isinstance(what, dict):
                wf, _ = await self.save(wf, functools.partial(undo.append_result, entry=what))
                continue
            outcome = await self.call_step(wf, index, bound=index + 1, reverse=True)
            wf, _ = await self.save(
                wf, functools.partial(undo.record_undo, index=index, outcome=outcome, actor=actor)
            )
        wf, _ = await self.save(wf, functools.partial(undo.finish_rollback, actor=actor))
        bad = undo.incomplete(wf)
        if bad:
            return self.result(wf, actor, Outcome.FAILED, error=undo.rollback_error(bad))
        return self.result(wf, actor)

    def notice_expiry(self, wf: Workflow) -> Workflow:
        """Record, once, that the gate ``wf`` waits at expired (``gate_records.mark_expired``: the
        audit event ``gate_expired`` and its webhook), on the database's clock. Whichever Pilot
        notices first records it; the others find it recorded (the save is version-checked)."""
        if not gate_records.expiry_unnoticed(wf, self.store.now()):
            return wf

        def change(w: Workflow) -> None:
            if not gate_records.mark_expired(w, EXPIRY_ACTOR, self.store.now()):
                raise _NothingToRecord

        try:
            wf, _ = self.commit(wf, change)
        except _NothingToRecord:  # another Pilot recorded it first
            return self.store.workflows.load(wf.id)
        telemetry.count("gate_decisions", decision="expired")
        return wf

    def cancel(self, wf: Workflow, actor: Actor, reason: str, rejected_by: str = "") -> RunResult:
        """Move to the terminal 'cancelled' state (``engine.execution.undo.cancel``); pending steps become
        skipped and the literal secrets held for the workflow are forgotten."""
        wf, _ = self.commit(
            wf, functools.partial(undo.cancel, actor=actor, reason=reason, rejected_by=rejected_by)
        )
        self.vault.forget(wf.id)
        return self.result(wf, actor, Outcome.CANCELLED)


class _NothingToRecord(Exception):
    """A change found nothing left to record (another process recorded it): nothing is saved."""


# Who the audit trail names for what Pilot records on its own (a gate's expiry).
EXPIRY_ACTOR: Final = "vmware-pilot"


def _count_gate_refusal(exc: PilotError) -> None:
    """An approval refused because its plan changed since the gate was shown (a drift stop). An
    expired gate counts once, as a decision, when its expiry is recorded (``notice_expiry``)."""
    if exc.fields.get("refused") == "plan_changed":
        telemetry.count("drift_stops")
