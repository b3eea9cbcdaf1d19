"""What every door shows a person about a waiting gate, and the gate's expiry noticed once.

``Gates`` reads: the gate view (``pending_gate``; ``show_gate`` after reading the targets again),
the decision summary (``decision``), what one caller may do there (``eligibility``), the three
together for a page that shows them all with one prediction (``gate_page``), and the expiry of a
waiting gate recorded once across every Pilot (``notice_expiry``, ``flag_expired``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine import decision as decisions
from vmware_pilot.engine import guard
from vmware_pilot.engine.context import ServiceContext
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.execution.approval import release_notice
from vmware_pilot.engine.gateview import GateView
from vmware_pilot.engine.policy import ApprovalChannel
from vmware_pilot.errors import PilotError, PolicyRefused, StateRefused
from vmware_pilot.results import ActiveWorkflow, Decision, Eligibility, Prediction
from vmware_pilot.safety.duties import Role

__all__ = ["GatePage", "Gates", "WaitingGate", "waiting_gate"]

_log = logging.getLogger("vmware_pilot.engine.service")
W = WorkflowState


@dataclass(frozen=True, slots=True)
class WaitingGate:
    """The gate a workflow waits at, as a page or a list row shows it: its step, the plan digest
    now, who approved it so far, its expiry (on the database's clock) and the stored prediction."""

    index: int
    digest: str
    approvers: tuple[str, ...]
    expires_at: datetime | None
    expired: bool
    prediction: Prediction | None


def waiting_gate(wf: Workflow, now: datetime | None = None) -> WaitingGate | None:
    """The gate ``wf`` waits at (None: it waits at none), its expiry judged at ``now`` (the
    database's time; None: not judged, ``expired`` False)."""
    gate = gate_records.pending_gate(wf) if wf.state is W.AWAITING_APPROVAL else None
    if gate is None:
        return None
    record = gate_records.gate_record(wf, gate.index)
    return WaitingGate(
        index=gate.index,
        digest=gate_records.plan_digest(wf, gate.index),
        approvers=tuple(gate_records.approver_names(record)),
        expires_at=record.expires_at if record else None,
        expired=now is not None and gate_records.is_expired(record, now),
        prediction=gate_records.stored_prediction(wf, gate.index),
    )


@dataclass(frozen=True, slots=True)
class GatePage:
    """Everything a page about one waiting gate shows: the gate view, the decision summary (None:
    the workflow waits at no gate) and what the caller may do there (None: not asked)."""

    view: GateView
    decision: Decision | None
    may: Eligibility | None


class Gates:
    """The waiting gate as the doors show it, over the service's shared context."""

    def __init__(self, core: ServiceContext) -> None:
        self.core = core

    @property
    def _dispatching(self) -> bool:
        return self.core.runner.dispatcher is not None

    def pending_gate(self, workflow_id: str) -> GateView:
        """What a person deciding on the gate sees: its message, options and approvals, the steps it
        releases with their risk tier, what ran before it, and the plan digest."""
        wf = self.core.load(workflow_id)
        self._refuse_not_waiting(wf)
        return gate_records.gate_view(wf, self.core.catalog, self.core.store.now(), self._dispatching)

    @staticmethod
    def _refuse_not_waiting(wf: Workflow) -> None:
        if wf.state is not W.AWAITING_APPROVAL or gate_records.pending_gate(wf) is None:
            raise StateRefused(
                f"Workflow '{wf.id}' is not waiting at an approval gate (state: {wf.state.value})",
                hint=f"`vmware-pilot status {wf.id}` shows where it stands.",
                workflow_id=wf.id,
                state=wf.state.value,
            )

    async def show_gate(self, actor: Actor, workflow_id: str) -> GateView:
        """``pending_gate`` after reading the targets' state and the skills' previews again (when
        Pilot dispatches): what a person is shown right before deciding. The reads are audited."""
        wf = self.core.load(workflow_id)
        self._refuse_not_waiting(wf)
        await self.core.runner.inspect(wf, actor)
        return self.pending_gate(workflow_id)

    async def gate_page(
        self,
        actor: Actor,
        workflow_id: str,
        role: Role | None = None,
        channel: ApprovalChannel | None = None,
        *,
        read_again: bool = True,
    ) -> GatePage:
        """The gate view after reading the targets again (``show_gate``; ``read_again`` False: as
        stored, ``pending_gate``), its decision summary and, with ``channel``, what ``actor`` (with
        ``role``) may do at it through that door: one prediction for all three."""
        view = await self.show_gate(actor, workflow_id) if read_again else self.pending_gate(workflow_id)

        def summarised() -> GatePage:
            wf = self.load_noticed(workflow_id)
            now = self.core.store.now()
            summary = decisions.decision_of(wf, self.core.catalog, now, self._dispatching, view.prediction)
            may = self._eligibility(wf, actor, now, role, channel) if channel is not None else None
            return GatePage(view, summary, may)

        return await asyncio.to_thread(summarised)

    def release_notice(self, workflow_id: str | Workflow) -> str:
        """What a person approving at the CLI or console is told about the steps the gate releases
        (nothing with dispatch, where Pilot runs them; ``approval.release_notice``)."""
        wf = self.core.load(workflow_id) if isinstance(workflow_id, str) else workflow_id
        return release_notice(wf, self._dispatching)

    def notice_expiry(self, workflow_id: str | Workflow) -> Workflow | None:
        """Record, once across every Pilot on the database, that the workflow's waiting gate expired
        (audit and webhook ``gate_expired``); the workflow as it stands after. Never raises: a read
        that notices an expiry must still answer (None when the record could not be written)."""
        try:
            wf = self.core.load(workflow_id) if isinstance(workflow_id, str) else workflow_id
            return self.core.runner.notice_expiry(wf)
        except PilotError as exc:
            _log.warning("could not record the expiry of %s's gate: %s", workflow_id, exc.message)
            return None

    def flag_expired(self, rows: Sequence[Mapping[str, Any]]) -> list[ActiveWorkflow]:
        """List rows (``Store.list_*``) as listed workflows, ``expired: true`` on each whose waiting
        gate expired (recording the expiry once, as ``notice_expiry``)."""
        now = self.core.store.now()
        out: list[ActiveWorkflow] = []
        for row in rows:
            listed = ActiveWorkflow.model_validate(row)
            if listed.is_waiting:
                try:
                    wf = self.core.load(listed.id)
                except PilotError:
                    out.append(listed)
                    continue
                gate = gate_records.pending_gate(wf)
                record = gate_records.gate_record(wf, gate.index) if gate is not None else None
                if gate_records.is_expired(record, now):
                    self.notice_expiry(wf)
                    listed = listed.but(expired=True)
            out.append(listed)
        return out

    def load_noticed(self, workflow_id: str, now: datetime | None = None) -> Workflow:
        """The workflow, after recording (once) that its waiting gate expired by ``now`` (the
        database's time; read here when not given), if it did."""
        wf = self.core.load(workflow_id)
        if gate_records.expiry_unnoticed(wf, self.core.store.now() if now is None else now):
            wf = self.notice_expiry(wf) or wf
        return wf

    def decision(self, workflow_id: str) -> Decision | None:
        """The decision summary of the gate the workflow waits at (None: it waits at none)."""
        wf = self.load_noticed(workflow_id)
        return decisions.decision_of(wf, self.core.catalog, self.core.store.now(), self._dispatching)

    def eligibility(
        self, actor: Actor, workflow_id: str, role: Role | None = None, channel: ApprovalChannel = "console"
    ) -> Eligibility:
        """What ``actor`` (with ``role``; None: no roles at this door) may do now at the workflow's
        waiting gate through ``channel``, and if not, why (``engine.decision.eligibility``)."""
        wf = self.load_noticed(workflow_id)
        return self._eligibility(wf, actor, self.core.store.now(), role, channel)

    def _eligibility(
        self, wf: Workflow, actor: Actor, now: datetime, role: Role | None, channel: ApprovalChannel
    ) -> Eligibility:
        allowed = decisions.eligibility(wf, actor, now, role, self.door_refusal(wf, channel))
        gate = gate_records.pending_gate(wf)
        if not allowed.may_approve or gate is None:
            return allowed
        # The policy in force may refuse this approver (the gate's rule) or a step it denies.
        try:
            runner = self.core.runner
            in_force = runner.policy()
            guard.refuse_denied(in_force, wf.steps, self.core.catalog, "approve", wf.id)
            record = gate_records.gate_record(wf, gate.index)
            required = gate_records.required_approvals(gate, record)
            runner.policy_demand(wf, gate, actor, actor.label, now, in_force, required)
        except PolicyRefused as exc:
            return allowed.model_copy(
                update={"may_approve": False, "approve_refused": "policy", "approve_why": exc.message}
            )
        return allowed

    def door_refusal(self, wf: Workflow, channel: ApprovalChannel) -> str:
        """Why ``channel`` takes no approvals of ``wf`` at all (the approvals policy), or ""."""
        return (
            f"This Pilot takes approvals only from a person at the operator CLI (approvals policy "
            f"'human'); run `vmware-pilot approve {wf.id}` there."
            if channel in ("mcp", "elicit") and self.core.approvals == "human"
            else ""
        )
