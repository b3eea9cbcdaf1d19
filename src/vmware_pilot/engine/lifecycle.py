"""Ending operations: rollback and cancel (preview first, act on confirm) and rejecting a gate."""

from __future__ import annotations

import asyncio

from vmware_pilot import telemetry
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.context import ServiceContext
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.errors import (
    InvalidInput,
    StateRefused,
)
from vmware_pilot.results import BlastRadius, CancelResult, Preview, RollbackResult, RunResult
from vmware_pilot.safety.blast import cancel_blast_radius, rollback_blast_radius

__all__ = ["Lifecycle"]

W = WorkflowState


def _preview(wf: Workflow, radius: BlastRadius, what: str, tool: str) -> Preview:
    return Preview(
        action="preview",
        workflow_id=wf.id,
        blast_radius=radius,
        hint=f"{what} Show blast_radius to the user; call {tool} again with confirm=True only after "
        "their explicit decision.",
    )


class Lifecycle:
    """Rollback and cancel show their blast radius and change nothing until confirmed."""

    def __init__(self, core: ServiceContext) -> None:
        self.core = core

    def reject(self, actor: Actor, workflow_id: str, reason: str, rejected_by: str = "") -> CancelResult:
        """Cancel a workflow waiting at a gate because a person rejected it (audited ``rejected``)."""
        wf = self.core.load_for_gate(workflow_id)
        if wf.state is not W.AWAITING_APPROVAL:
            raise StateRefused(
                f"Workflow '{wf.id}' is not waiting at an approval gate (state: {wf.state.value}); only a "
                "gate can be rejected",
                hint="cancel_workflow (`vmware-pilot cancel`) stops a workflow in any other state.",
                workflow_id=wf.id,
                state=wf.state.value,
            )
        if not reason.strip():
            raise InvalidInput(
                "A rejection needs a reason; nothing was changed",
                field="reason",
                hint="Say why, e.g. --reason 'wrong host'. It is written to the audit trail.",
            )
        radius = BlastRadius.model_validate(
            cancel_blast_radius(wf, self.core.catalog, acknowledge_unknown_effects=False)
        )
        self.core.refuse_unless_clear("reject", wf, radius)
        who = actor.label if actor.authenticated else (rejected_by.strip() or actor.label)
        gate = gate_records.pending_gate(wf)
        # On the database's clock, as the gate's reached_at was recorded.
        waited = (
            gate_records.waited_seconds(wf, gate.index, self.core.store.now()) if gate is not None else None
        )
        out = self.core.runner.cancel(wf, actor, reason, rejected_by=who)
        telemetry.count("gate_decisions", decision="rejected")
        if waited is not None:
            telemetry.observe("gate_wait_seconds", waited, decision="rejected")
        return CancelResult.extending(out, action="cancelled", rejected_by=who, blast_radius=radius)

    async def rollback(
        self,
        actor: Actor,
        workflow_id: str,
        confirm: bool = False,
        acknowledge_unknown_effects: bool = False,
    ) -> RollbackResult | Preview:
        wf = await self.core.runner.settle(self.core.load_for_gate(workflow_id), actor)
        radius = BlastRadius.model_validate(
            rollback_blast_radius(
                wf, self.core.catalog, acknowledge_unknown_effects=acknowledge_unknown_effects
            )
        )
        if not confirm:
            return _preview(wf, radius, "Nothing was rolled back.", "rollback")
        self.core.refuse_unless_clear("roll back", wf, radius)
        out = await self.core.detached(self._rollback(actor, wf, acknowledge_unknown_effects))
        action = "rollback_incomplete" if out.is_failed else "rolled_back"
        return RollbackResult.extending(out, action=action, blast_radius=radius)

    async def _rollback(self, actor: Actor, wf: Workflow, include_unknown: bool) -> RunResult:
        async with self.core.exclusive(wf, "roll back"):
            return await self.core.runner.rollback(self.core.load(wf.id), actor, include_unknown)

    async def cancel_workflow(
        self,
        actor: Actor,
        workflow_id: str,
        reason: str = "",
        confirm: bool = False,
        acknowledge_unknown_effects: bool = False,
    ) -> CancelResult | Preview:
        wf = await self.core.runner.settle(self.core.load_for_gate(workflow_id), actor)
        radius = BlastRadius.model_validate(
            cancel_blast_radius(
                wf, self.core.catalog, acknowledge_unknown_effects=acknowledge_unknown_effects
            )
        )
        if not confirm:
            return _preview(
                wf,
                radius,
                "Nothing was cancelled. Steps in left_in_place stay applied (rollback reverses what can be "
                "reversed).",
                "cancel_workflow",
            )
        self.core.refuse_unless_clear("cancel", wf, radius)
        out = await asyncio.to_thread(self.core.runner.cancel, wf, actor, reason)
        return CancelResult.extending(out, action="cancelled", blast_radius=radius)
