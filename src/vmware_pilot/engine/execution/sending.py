"""Sending steps: resolve a step's references and secrets, call the dispatcher, turn every
exception into an outcome, and record the outcomes of a step or a parallel group of reads under
the run's lease and the step lease (engine/execution/runlease.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from vmware_pilot import telemetry
from vmware_pilot.dispatch.protocol import BeforeSend, OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.refs import resolve_refs
from vmware_pilot.engine import acknowledge
from vmware_pilot.engine.execution import conductor
from vmware_pilot.engine.execution.runlease import RunLease, StepLease, release_lease
from vmware_pilot.engine.secrets import (
    find_masked_secrets,
    resolve_secret_refs,
    scrub_values,
    secret_values,
)
from vmware_pilot.errors import DispatchRefused, EffectUnknown, PilotError, SecretUnavailable, StateRefused
from vmware_pilot.ownership import this_process
from vmware_pilot.store.leases import LeaseLost

if TYPE_CHECKING:
    from vmware_pilot.engine.execution.parts import RunnerView

__all__ = ["StepSender"]

_log = logging.getLogger(__name__)
S = StepStatus
_NO_DISPATCH_UNDO = "No dispatch configured: Pilot cannot run this undo and is refusing to fake execution"


class StepSender:
    """Sends a run's steps to the dispatcher and records their outcomes: a step (or a parallel
    group of reads) under the run's and the step's leases, or one call (``call_step``, also used
    by undo, inspection and settling)."""

    def __init__(self, runner: RunnerView) -> None:
        self.runner = runner

    async def run_batch(self, wf: Workflow, batch: list[int], actor: Actor) -> tuple[Workflow, bool]:
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
        owner, fence = await self.runner.take_step_lease(wf, wf.steps[batch[0]])
        claim = StepLease(owner, fence)

        def mark_running(w: Workflow) -> None:
            if w.run_owner is not None and w.run_owner.owner == owner:
                return  # this very save, committed before its answer was lost, retried
            conductor.mark_running(w, batch, self.runner.store.now())
            w.run_owner = this_process(owner)

        run.step = claim
        try:
            wf, _ = await self.runner.save(wf, mark_running)
            outcomes = await self._send_all(run, wf, batch)

            record = functools.partial(self.record, indices=batch, outcomes=outcomes, actor=actor)

            # One save for the whole group: each member's outcome and audit event, in step order;
            # patient, as the outcome is known and must not be lost to a database blip.
            wf, ok = await self.runner.save(wf, record, patient=True)
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
            await release_lease(self.runner, wf.id, owner, claim.fence)
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
        if self.runner.dispatcher is not None:
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
        if self.runner.dispatcher is None:
            return StepOutcome(OutcomeKind.FAILED, None, _NO_DISPATCH_UNDO)
        try:
            stored = step.rollback_params if reverse else step.params
            params = resolve_refs(self.runner.vault.restore(wf.id, index, field, stored), wf.steps, bound)
            secrets = secret_values(params, self.runner.environ)
            params = resolve_secret_refs(params, self.runner.environ)
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
            outcome = await self.runner.dispatcher.call(step.skill, tool, params, before_send)
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

    def record(
        self, w: Workflow, indices: Sequence[int], outcomes: Sequence[StepOutcome], actor: Actor
    ) -> bool:
        """Record the outcomes (``engine.execution.conductor.record_outcomes``); the run gives up its claim
        on the workflow once no step of it is in flight."""
        ok = conductor.record_outcomes(w, indices, outcomes, actor.label, self.runner.store.now())
        if not any(s.status is S.RUNNING for s in w.steps):
            w.run_owner = None
        return ok
