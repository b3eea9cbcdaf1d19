"""An approval carried out: ``Approver.approve`` records an approval of the pending gate after
``engine.execution.approval.precheck`` and the policy (``policy_demand``) accept it, and at the
last approval the gate needs releases it and continues the run.
"""

from __future__ import annotations

import asyncio
import functools
from datetime import datetime
from typing import TYPE_CHECKING

from vmware_pilot import telemetry
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Outcome, StepStatus
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine import guard, windows
from vmware_pilot.engine.execution import approval, gate_records
from vmware_pilot.engine.execution.saving import COMMIT_ATTEMPTS, stopped_by_outage
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.errors import ConcurrencyConflict, DatabaseUnavailable, PilotError
from vmware_pilot.policy.model import Policy
from vmware_pilot.results import RunResult

if TYPE_CHECKING:
    from vmware_pilot.engine.execution.parts import RunnerView

__all__ = ["Approver"]

S = StepStatus


class Approver:
    """Carries out an approval of a gate (``engine.execution.approval`` decides and records): the
    policy's demand, the refusals before anything changes, the save, and the run it releases."""

    def __init__(self, runner: RunnerView) -> None:
        self.runner = runner

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
        dispatching = self.runner.dispatcher is not None
        try:
            for _ in range(COMMIT_ATTEMPTS):
                now = await asyncio.to_thread(self.runner.store.now)
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
                policy = self.runner.policy()
                guard.refuse_denied(policy, wf.steps, self.runner.catalog, "approve", wf.id)
                required, judged = self.policy_demand(wf, gate, actor, who, now, policy, required)
                refused = windows.exception_refusal(policy, wf, gate, actor, self.runner.catalog, now)
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
                    refusal = await self.runner.preflight_error(wf, exclude=[s.index for s in unrun])
                    if refusal is not None:
                        raise refusal
                    self.runner.answers.refuse_handback(wf, to, start=gate_index + 1)
                    await self.runner.take_objects(wf, "approve")
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
                    wf, released = await self.runner.save(wf, change)
                    break
                except approval.QuorumReached:
                    if not holds_run:
                        raise
                    # Another Pilot recorded an approval since the load: this one is the last now.
                    wf = await asyncio.to_thread(self.runner.store.workflows.load, wf.id)
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
        demand = guard.demand_of(recorded, guard.gate_rule(policy, wf, gate.index, self.runner.catalog))
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
            out = self.runner.answers.result(wf, actor, Outcome.AWAITING_APPROVAL, approvals_missing=missing)
            if out.has("message"):
                return out
            return out.but(message=approval.waiting_message(who, gate_index, missing))
        if to is actor:
            return await self.runner.run_until_checkpoint(wf, actor, progress)
        ran = await self.runner.run_until_checkpoint(wf, to, progress)
        stored = await asyncio.to_thread(self.runner.store.workflows.load, wf.id)
        return self.runner.answers.released_result(stored, to, ran.outcome)


def _count_gate_refusal(exc: PilotError) -> None:
    """An approval refused because its plan changed since the gate was shown (a drift stop). An
    expired gate counts once, as a decision, when its expiry is recorded (``notice_expiry``)."""
    if exc.fields.get("refused") == "plan_changed":
        telemetry.count("drift_stops")
