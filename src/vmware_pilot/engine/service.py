"""PilotService: the operations behind the 13 MCP tools and the operator CLI.

Every operation returns its typed result (``vmware_pilot.results``: the model the contract gives that
tool, docs/contract.md#tools) or raises a ``PilotError`` whose ``payload()`` is the refusal body.
Results may carry ``error`` (e.g. a run that ends ``failed``): ``is_refusal`` says so, and the
server marks those ``isError`` by the contract's rule.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.paging import DEFAULT_PAGE, MAX_PAGE, next_offset
from vmware_pilot.engine import conflicts, guard
from vmware_pilot.engine.approvals import Approvals, Confirm, Referral, Referred
from vmware_pilot.engine.authoring import Authoring
from vmware_pilot.engine.context import ServiceContext
from vmware_pilot.engine.decision import decision_of
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.gates import GatePage, Gates
from vmware_pilot.engine.gateview import GateView
from vmware_pilot.engine.lifecycle import Lifecycle
from vmware_pilot.engine.policy import ApprovalChannel, AskHuman
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.engine.records import Records
from vmware_pilot.engine.requests import (
    ApproveRequest,
    CancelRequest,
    ConfirmDraftRequest,
    CreateRequest,
    DesignRequest,
    FromTemplateRequest,
    RejectRequest,
    Request,
    RollbackRequest,
    RunRequest,
    UpdateDraftRequest,
)
from vmware_pilot.engine.running import Running
from vmware_pilot.errors import InvalidInput
from vmware_pilot.results import (
    ActiveWorkflow,
    ApproveResult,
    CancelResult,
    CatalogResult,
    ConfirmDraftResult,
    CreateResult,
    Decision,
    DesignResult,
    DraftResult,
    Eligibility,
    FromTemplateResult,
    ListResult,
    PolicyExplanation,
    Preview,
    ReviewResult,
    RollbackResult,
    RunResult,
    StatusView,
)
from vmware_pilot.safety import roles
from vmware_pilot.safety.duties import Role
from vmware_pilot.safety.review import review
from vmware_pilot.store.protocol import Store
from vmware_pilot.templates.registry import TemplateRegistry

__all__ = ["PilotService", "ProgressFn"]

W = WorkflowState
_log = logging.getLogger("vmware_pilot.server")  # the logger the MCP pipeline's refusals used


class PilotService:
    """Facade over store, catalog, templates, safety rules and the runner. Its parts, each over the
    ``ServiceContext`` they share: authoring (``Authoring``), ending or undoing workflows
    (``Lifecycle``), running (``Running``), the waiting gate as the doors show it (``Gates``) and
    approving it (``Approvals``); the reads are its own."""

    def __init__(self, core: ServiceContext) -> None:
        self.core = core
        self.authoring = Authoring(core)
        self.lifecycle = Lifecycle(core)
        self.running = Running(core)
        self.gates = Gates(core)
        self.approvals = Approvals(core, self.gates, self.lifecycle)
        self.records = Records(core.store)  # what the doors read of the store
        # The runner as an attribute: this module may not name its type (only app.py and
        # engine/context.py import the runner; tests/engine/test_conductor.py checks it).
        self.runner = core.runner

    # The core's other dependencies, read through it: one place holds them.
    @property
    def store(self) -> Store:
        return self.core.store

    @property
    def templates(self) -> TemplateRegistry:
        return self.core.templates

    @property
    def catalog(self) -> Catalog:
        return self.core.catalog

    async def drain(self) -> None:
        """Wait for runs still going (e.g. after their client left) before shutting down."""
        await self.core.drain()

    def _allowed(self, request: Request, tool: str) -> None:
        """Raise ``AccessRefused`` unless the request's role (when its door knows roles) may use
        ``tool``: the one place a caller's role is checked for an operation, whatever the door."""
        if request.role is None:
            return
        refused = roles.call_refusal(request.caller, request.role, tool)
        if refused is not None:
            _log.warning(
                "refused %s for %s at %s (role %s): %s",
                tool,
                request.caller.label,
                request.door,
                request.role.name,
                refused.message,
            )
            raise refused

    # --- authoring (engine/authoring.py) ------------------------------------------------------
    def create_workflow(self, request: CreateRequest) -> CreateResult:
        self._allowed(request, "create_workflow")
        return self.authoring.create_workflow(
            request.caller, request.name, request.description, request.steps, request.save_as_template
        )

    def create_workflow_from_template(self, request: FromTemplateRequest) -> FromTemplateResult:
        self._allowed(request, "create_workflow_from_template")
        return self.authoring.create_workflow_from_template(
            request.caller, request.workflow_type, request.params
        )

    def design_workflow(self, request: DesignRequest) -> DesignResult:
        self._allowed(request, "design_workflow")
        return self.authoring.design_workflow(request.caller, request.goal, request.constraints)

    def update_draft(self, request: UpdateDraftRequest) -> DraftResult:
        self._allowed(request, "update_draft")
        return self.authoring.update_draft(
            request.caller, request.workflow_id, request.name, request.description, request.steps
        )

    def confirm_draft(self, request: ConfirmDraftRequest) -> ConfirmDraftResult:
        self._allowed(request, "confirm_draft")
        return self.authoring.confirm_draft(request.caller, request.workflow_id, request.save_as_template)

    # --- ending and undoing (engine/lifecycle.py) ----------------------------------------------
    def reject(self, request: RejectRequest) -> CancelResult:
        """Reject the waiting gate as ``request`` says (the caller's role checked first)."""
        self._allowed(request, "cancel_workflow")
        return self.lifecycle.reject(request.caller, request.workflow_id, request.reason, request.rejected_by)

    async def rollback(self, request: RollbackRequest) -> RollbackResult | Preview:
        self._allowed(request, "rollback")
        return await self.lifecycle.rollback(
            request.caller, request.workflow_id, request.confirm, request.acknowledge_unknown_effects
        )

    async def cancel_workflow(self, request: CancelRequest) -> CancelResult | Preview:
        self._allowed(request, "cancel_workflow")
        return await self.lifecycle.cancel_workflow(
            request.caller,
            request.workflow_id,
            request.reason,
            request.confirm,
            request.acknowledge_unknown_effects,
        )

    # --- running (engine/running.py) ---------------------------------------------------------
    async def run_workflow(self, request: RunRequest, *, progress: ProgressFn | None = None) -> RunResult:
        """Run as ``request`` says; ``progress`` hears of each step (the door's callback)."""
        self._allowed(request, "run_workflow")
        return await self.running.run_workflow(request.caller, request.workflow_id, request.force, progress)

    # --- approving (engine/approvals.py) and the gate as the doors show it (engine/gates.py) ---
    async def approve(
        self,
        request: ApproveRequest,
        *,
        progress: ProgressFn | None = None,
        ask: AskHuman | None = None,
        confirm: Confirm | None = None,
    ) -> ApproveResult:
        """Approve the pending gate as ``request`` says, every check made once: the role's tools
        here, the rest in ``Approvals``."""
        self._allowed(request, "approve")
        return await self.approvals.approve(request, progress=progress, ask=ask, confirm=confirm)

    async def refer_approval(self, request: ApproveRequest) -> Referral:
        """Refer the approval ``request`` asks for to the console (``Approvals.refer``)."""
        self._allowed(request, "approve")
        return await self.approvals.refer(request)

    async def referred_approval(
        self, request: ApproveRequest, referral: Referral, *, declined: bool = False
    ) -> Referred:
        """What the gate of a referred approval became (``Approvals.referred``)."""
        self._allowed(request, "approve")
        return await self.approvals.referred(request, referral, declined=declined)

    def release_notice(self, workflow_id: str | Workflow) -> str:
        return self.gates.release_notice(workflow_id)

    def notice_expiry(self, workflow_id: str | Workflow) -> Workflow | None:
        return self.gates.notice_expiry(workflow_id)

    def flag_expired(self, rows: Sequence[Mapping[str, Any]]) -> list[ActiveWorkflow]:
        return self.gates.flag_expired(rows)

    def pending_gate(self, workflow_id: str) -> GateView:
        return self.gates.pending_gate(workflow_id)

    async def show_gate(self, actor: Actor, workflow_id: str) -> GateView:
        return await self.gates.show_gate(actor, workflow_id)

    async def gate_page(
        self,
        actor: Actor,
        workflow_id: str,
        role: Role | None = None,
        channel: ApprovalChannel | None = None,
        *,
        read_again: bool = True,
    ) -> GatePage:
        return await self.gates.gate_page(actor, workflow_id, role, channel, read_again=read_again)

    def decision(self, workflow_id: str) -> Decision | None:
        return self.gates.decision(workflow_id)

    def eligibility(
        self, actor: Actor, workflow_id: str, role: Role | None = None, channel: ApprovalChannel = "console"
    ) -> Eligibility:
        return self.gates.eligibility(actor, workflow_id, role, channel)

    # --- reads ------------------------------------------------------------------------------
    def review_workflow(self, workflow_id: str) -> ReviewResult:
        """The plan's review; with a policy in force, also its policy findings (``policy_*``
        kinds, after the plan's own) and ``policy``, what ``explain_policy`` says."""
        wf = self.core.load(workflow_id)
        result = review(wf, self.catalog)
        policy = self.runner.policy()
        if policy.is_empty:
            return ReviewResult(**result)
        explained = self._explain(wf)
        findings = guard.policy_findings(explained)
        verdict = "needs_revision" if any(f["severity"] == "high" for f in findings) else result["verdict"]
        return ReviewResult(
            workflow_id=result["workflow_id"],
            verdict=verdict,
            findings=[*result["findings"], *findings],
            summary=result["summary"],
            policy=explained,
        )

    def explain_policy(self, workflow_id: str) -> PolicyExplanation:
        """Which rules of the policy in force apply to the workflow's steps and gates, and why."""
        return self._explain(self.core.load(workflow_id)).but(workflow_id=workflow_id)

    def _explain(self, wf: Workflow) -> PolicyExplanation:
        return guard.explain(self.runner.policy(), wf, self.catalog, self.store.now(), self._conflicts(wf))

    def _conflicts(self, wf: Workflow) -> list[dict[str, Any]]:
        """Workflows holding objects ``wf``'s write steps name (conflict locks,
        engine/conflicts.py), each ``{step_index, workflow_id, state, owner, object, message}``."""
        return conflicts.conflicting(self.store, wf, self.catalog)

    def get_workflow_status(self, workflow_id: str) -> StatusView:
        """The stored record; ``in_flight`` lists steps a run is executing right now (and which
        Pilot process runs them)."""
        now = self.store.now()  # one reading of the database's clock for the whole answer
        wf = self.gates.load_noticed(workflow_id, now)
        found: dict[str, Any] = {}
        running = [s for s in wf.steps if s.status is StepStatus.RUNNING]
        if running:
            run_by = {"run_by": wf.run_owner.label} if wf.run_owner is not None else {}
            found["in_flight"] = [{**s.ref(), "started_at": iso(s.started_at), **run_by} for s in running]
        reached = gate_records.gates_status(wf, now)
        if reached:
            found["gates"] = reached
        gate = gate_records.pending_gate(wf)
        if wf.state is W.AWAITING_APPROVAL and gate is not None:
            dispatching = self.runner.dispatcher is not None
            prediction = gate_records.prediction_of(wf, gate.index, self.catalog, dispatching)
            found["prediction"] = prediction
            summary = decision_of(wf, self.catalog, now, dispatching, prediction)
            if summary is not None:
                found["decision"] = summary
        return StatusView(**wf.to_dict(), **found)

    def list_workflows(self, limit: int | None = None, offset: int = 0) -> ListResult:
        """Templates and one page of active workflows, newest first: ``limit`` of them (default
        ``DEFAULT_PAGE``, at most ``MAX_PAGE``) from ``offset``. ``active_total`` is the number
        active; ``next_offset`` the offset of the next page, or None after the last."""
        if limit is not None and not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(
                f"limit must be between 1 and {MAX_PAGE}, got {limit}",
                field="limit",
                hint=f"Omit limit for the {DEFAULT_PAGE} most recent; page further with offset "
                "(next_offset in the answer).",
            )
        if offset < 0:
            raise InvalidInput("offset must not be negative", field="offset", hint="Start at offset 0.")
        size = DEFAULT_PAGE if limit is None else limit
        page = self.flag_expired(self.store.workflows.list_active(size, offset))
        total = self.store.workflows.count_active()
        return ListResult(
            templates=self.templates.listing(),
            active_workflows=page,
            active_total=total,
            next_offset=next_offset(offset, size, len(page), total),
        )

    def get_skill_catalog(self) -> CatalogResult:
        return CatalogResult.model_validate(self.catalog.payload())
