"""The async runner: carries out what the conductor decides, against the store and the dispatcher.

``engine/execution/conductor.py`` decides each next action of a run and how its outcome changes the
workflow, with no I/O; the runner walks a run from one action to the next, and leaves each other
job to one part: saving a change (``saving.Saver``, which the runner is), sending a step and
recording its outcome (``sending.StepSender``), answering the caller and handing steps out
(``answers.Answers``), an approval (``approving.Approver``, composed from what
``engine/execution/approval.py`` decides), and rollback, cancel and a gate's expiry
(``closing.Closer``, from what ``engine/execution/undo.py`` decides). None of them calls back into
another's decisions.

Inside a run every save carries the run's lease fences and every call is sent only under them
(engine/execution/runlease.py). Without a dispatcher (hand-back mode) executable steps are recorded
``not_executed`` and handed to the caller in ``pending_dispatch``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence

from vmware_pilot import telemetry
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.dispatch.judge import one_line
from vmware_pilot.dispatch.protocol import Dispatcher, OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Outcome, StepStatus
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine import conflicts, guard, windows
from vmware_pilot.engine.diff import build_diff_report
from vmware_pilot.engine.execution import conductor, gate_records, holds, settling
from vmware_pilot.engine.execution.answers import Answers
from vmware_pilot.engine.execution.approving import Approver
from vmware_pilot.engine.execution.closing import EXPIRY_ACTOR, Closer
from vmware_pilot.engine.execution.conductor import NOT_EXECUTED_REASON
from vmware_pilot.engine.execution.holds import PreWriteCheck
from vmware_pilot.engine.execution.runlease import LeaseBook, release_lease, take_lease
from vmware_pilot.engine.execution.saving import (
    DEFAULT_LEASE_SECONDS,
    Saver,
    WorkflowEvents,
    stopped_by_outage,
    timed,
)
from vmware_pilot.engine.execution.sending import StepSender
from vmware_pilot.engine.inspection import inspect_gate
from vmware_pilot.engine.progress import ProgressFn, describe, report
from vmware_pilot.engine.secrets import SecretVault
from vmware_pilot.errors import DatabaseUnavailable, DispatchRefused, PilotError, StateRefused
from vmware_pilot.ownership import refuse_held
from vmware_pilot.policy.model import EMPTY, Policy
from vmware_pilot.results import RunResult
from vmware_pilot.safety.classify import classify_step
from vmware_pilot.store.protocol import Store
from vmware_pilot.twin.rehearse import Rehearser

__all__ = ["EXPIRY_ACTOR", "NOT_EXECUTED_REASON", "Runner", "WorkflowEvents"]

_log = logging.getLogger(__name__)
S = StepStatus


class Runner(Saver):
    """Walks a run: from the first pending step to the next gate, the end, or a failure; and the
    entry points that start, continue, approve, undo and end one (each carried out by its part)."""

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
        super().__init__(store, catalog, events, lease_seconds)
        # Asked in order right before each write step is sent (engine/execution/holds.py).
        self.checks = list(checks)
        # The policy in force (policy/source.py), asked at each gate and approval.
        self.policy = policy
        # VMWARE_PILOT_GATE_EXPIRY_MINUTES: the longest a gate releasing destructive steps waits.
        self.gate_expiry_minutes = gate_expiry_minutes
        self.dispatcher = dispatcher
        self.vault = vault
        self.environ: Mapping[str, str] = environ if environ is not None else {}
        self.leases = LeaseBook()
        self.sender = StepSender(self)
        self.answers = Answers(self)
        self.approver = Approver(self)
        self.closer = Closer(self)
        # The parts' entry points the service, the sweeper, inspection and settling call.
        self.call_step = self.sender.call_step
        self.refuse_handback = self.answers.refuse_handback
        self.approve = self.approver.approve
        self.policy_demand = self.approver.policy_demand
        self.rollback = self.closer.rollback
        self.cancel = self.closer.cancel
        self.notice_expiry = self.closer.notice_expiry

    # --- leases (ownership.py) -----------------------------------------------------------
    def refuse_if_running_elsewhere(self, wf: Workflow, step: Step) -> None:
        """Refuse while ``step`` (found running) is under another run's unexpired lease."""
        refuse_held(wf, step, self.store.leases.lease(wf.id))

    async def take_step_lease(self, wf: Workflow, step: Step) -> tuple[str, int]:
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
        owner, fence = await self.take_step_lease(wf, stuck)
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
        return wf, self.answers.result(wf, actor, Outcome.FAILED, error=settling.crash_error(wf.steps[index]))

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

    async def preflight_error(self, wf: Workflow, exclude: Sequence[int] = ()) -> DispatchRefused | None:
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
                            self.sender.record, indices=(action.index,), outcomes=(refused,), actor=actor
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
                return self.answers.result(wf, actor, Outcome.AWAITING_APPROVAL)
            if isinstance(action, conductor.Finish):
                wf, _ = await self.save(wf, timed(self.store, conductor.finish, action, actor.label))
                if action.outcome is Outcome.COMPLETED:
                    await report(progress, total, total, "workflow completed")
                return self.answers.result(wf, actor, action.outcome)
            if isinstance(action, conductor.HandBack):
                wf = await self._record_handback(wf, list(action.indices), actor)
            else:
                wf, held = await self._hold_write(wf, action, actor)
                if held is not None:
                    action = held
                    continue
                members = list(action.indices)
                await report(progress, done, total, describe(wf, members))
                wf, failed = await self.sender.run_batch(wf, members, actor)
                if failed:  # a write left interrupted: read whether it took effect
                    wf = await self.settle(wf, actor, members)
                ok = not failed
                done += len(members)
                await report(progress, done, total, describe(wf, members, finished=True))
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
        wf, gate = await self.save(wf, timed(self.store, holds.reopen, action.index, hold, actor.label))
        return wf, conductor.Fail() if gate is None else conductor.StopAtGate(gate)

    async def _record_handback(self, wf: Workflow, indices: list[int], actor: Actor) -> Workflow:
        wf, _ = await self.save(wf, timed(self.store, conductor.record_handback, indices, actor))
        return wf

    def is_read(self, step: Step) -> bool:
        return classify_step(step, self.catalog)[0] == "read"

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

    async def _finish_failed(self, wf: Workflow, actor: Actor) -> RunResult:
        wf, _ = await self.save(wf, conductor.fail)
        bad = [s for s in wf.steps if s.status in (S.FAILED, S.INTERRUPTED)]
        error = "; ".join(
            f"step {s.index} ({s.skill}.{s.tool}) {s.status.value}: "
            f"{one_line((s.result or {}).get('error', '')) if isinstance(s.result, dict) else ''}"
            f"{settling.said(s)}"
            for s in bad
        )
        return self.answers.result(wf, actor, Outcome.FAILED, error=error)

    def _reach_gate(
        self, w: Workflow, *, index: int, actor: str, rule: guard.GateRule | None, default: float | None
    ) -> None:
        record = rule.record() if rule is not None else None
        conductor.reach_gate(w, index, actor, self.store.now(), record, default)
