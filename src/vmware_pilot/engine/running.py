"""Running a workflow: the states that cannot run refused, the plan's review and approval-gate rule
applied, then the run detached from the calling request under the workflow's lock and run lease,
carried out by the runner (``engine.execution.runner``)."""

from __future__ import annotations

import asyncio
import logging

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.context import ServiceContext
from vmware_pilot.engine.execution.runlease import holding_run
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.errors import ApprovalGateRefused, ReviewBlocked, StateRefused
from vmware_pilot.results import RunResult
from vmware_pilot.safety import gating
from vmware_pilot.safety.review import PLAN_KINDS, blocking_findings, review

__all__ = ["Running"]

_log = logging.getLogger("vmware_pilot.engine.service")
W = WorkflowState


class Running:
    """``run_workflow`` of ``PilotService``, over the service's shared context."""

    def __init__(self, core: ServiceContext) -> None:
        self.core = core

    async def _review_gate(self, actor: Actor, wf: Workflow, force: bool) -> Workflow:
        """Refuse ungated custom plans always and blocking findings unless a built-in is forced."""
        if not wf.steps:
            raise StateRefused(
                f"Workflow '{wf.id}' has no steps: there is nothing to run",
                hint="cancel_workflow this one and create a workflow with at least one step.",
                workflow_id=wf.id,
                state=wf.state.value,
            )
        catalog = self.core.catalog
        # Review reads every step's text: off the event loop, so a big plan holds up nobody.
        result = await asyncio.to_thread(review, wf, catalog)
        blocking = blocking_findings(result)
        if self.core.is_custom(wf):
            try:
                gating.enforce(
                    wf,
                    catalog,
                    verb="run",
                    retry="cancel_workflow this one and create_workflow the corrected steps",
                    extra="force=True does not override this for a custom workflow.",
                )
            except ApprovalGateRefused as exc:
                first = exc.fields["fix"]["insert_before_step"]
                exc.fields["blocking_findings"] = [
                    f for f in blocking if f["kind"] in ("ungated_destructive", "ungated_unclassified")
                ]
                exc.hint = (
                    f"Add a require_approval step before step {first}; force=True cannot stand in for a "
                    "missing gate in a custom workflow."
                )
                raise
        broken = blocking_findings(result, PLAN_KINDS)
        if broken:
            raise ReviewBlocked(
                f"Refusing to run workflow '{wf.id}': {broken[0]['message']}",
                blocking_findings=broken,
                hint="force=True cannot make this plan right. cancel_workflow this one and create the "
                "corrected steps as a new workflow.",
            )
        if not blocking:
            return wf
        if not force:
            kinds = ", ".join(f"{f['kind']}@step{f['step_index']}" for f in blocking)
            raise ReviewBlocked(
                f"Refusing to run workflow '{wf.id}': review found {len(blocking)} blocking safety "
                f"finding(s) — {kinds}",
                blocking_findings=blocking,
                hint="Fix the plan (a new workflow with a require_approval gate where needed), or re-run "
                "with force=True only after a human explicitly confirmed these findings.",
            )
        detail = ", ".join(f"{f['kind']}@step{f['step_index']}" for f in blocking)

        def log_forced(w: Workflow) -> None:
            w.log(
                "forced_run",
                f"force=True bypassed {len(blocking)} blocking review finding(s): {detail}",
                actor.label,
            )

        _log.warning("forced run of %s by %s: %s", wf.id, actor.label, detail)
        wf, _ = await self.core.runner.save(wf, log_forced)
        return wf

    async def run_workflow(
        self, actor: Actor, workflow_id: str, force: bool = False, progress: ProgressFn | None = None
    ) -> RunResult:
        wf = self.core.load(workflow_id)
        if wf.state is W.CANCELLED:
            raise StateRefused(
                f"Workflow '{wf.id}' is CANCELLED: it is terminal and will never run.",
                hint="Create a new workflow for the same goal.",
                state=wf.state.value,
            )
        if wf.state not in (W.PENDING, W.RUNNING):
            raise StateRefused(
                f"Workflow '{wf.id}' cannot be run (state: {wf.state.value})",
                hint={
                    W.DRAFT: "Confirm the draft first with confirm_draft.",
                    W.AWAITING_APPROVAL: "It is waiting at a gate: call approve (or cancel_workflow).",
                }.get(wf.state, "get_workflow_status shows what happened; create a new workflow to retry."),
            )
        return await self.core.detached(self._run(actor, wf, force, progress))

    async def _run(self, actor: Actor, wf: Workflow, force: bool, progress: ProgressFn | None) -> RunResult:
        # The run lease first: the workflow becomes 'running' only under it (engine/execution/runlease.py).
        async with self.core.exclusive(wf, "run"), holding_run(self.core.runner, wf.id, wf.state.value):
            wf = self.core.load(wf.id)
            self.core.refuse_denied(wf.steps, "run", wf.id)
            self.core.runner.refuse_handback(wf, actor)
            wf = await self._review_gate(actor, wf, force)
            crashed = await self.core.runner.detect_crash(wf, actor)
            if crashed is not None:
                return crashed[1]
            refusal = await self.core.runner.preflight_error(wf)
            if refusal is not None:
                raise refusal
            return await self.core.runner.run_until_checkpoint(wf, actor, progress)
