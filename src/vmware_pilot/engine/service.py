"""PilotService: the operations behind the 13 MCP tools and the operator CLI.

Every operation returns its typed result (``vmware_pilot.results``: the model the contract gives that
tool, docs/contract.md#tools) or raises a ``PilotError`` whose ``payload()`` is the refusal body.
Results may carry ``error`` (e.g. a run that ends ``failed``): ``is_refusal`` says so, and the
server marks those ``isError`` by the contract's rule.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.paging import DEFAULT_PAGE, MAX_PAGE, next_offset
from vmware_pilot.engine import conflicts, guard, policy, windows
from vmware_pilot.engine.authoring import Authoring
from vmware_pilot.engine.core import ServiceCore
from vmware_pilot.engine.decision import decision_of, eligibility
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.execution.approval import QuorumReached, precheck
from vmware_pilot.engine.execution.runlease import RunLease, holding_run
from vmware_pilot.engine.gateview import GateView
from vmware_pilot.engine.lifecycle import Lifecycle
from vmware_pilot.engine.policy import ApprovalChannel, ApprovalPolicy, AskHuman
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.errors import (
    ApprovalGateRefused,
    InvalidInput,
    PilotError,
    PolicyRefused,
    ReviewBlocked,
    StateRefused,
)
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
    TemplateInfo,
)
from vmware_pilot.safety import gating
from vmware_pilot.safety.duties import Role
from vmware_pilot.safety.review import PLAN_KINDS, blocking_findings, review
from vmware_pilot.store.protocol import Store
from vmware_pilot.templates.registry import TemplateRegistry

__all__ = ["PilotService", "ProgressFn"]

_log = logging.getLogger(__name__)
W = WorkflowState
# Seconds between attempts to take a run lease another Pilot holds while it records an approval.
_LEASE_POLL = 0.2


def _same_caller(actor: Actor, approver: str) -> None:
    """Refuse an approver name that is not the authenticated ``actor``: over the network the
    approver is the caller's identity, never a name the agent or the form supplies."""
    if approver.strip() and not actor.is_same_person(approver):
        raise PilotError(
            f"approver '{approver}' differs from the authenticated caller '{actor.label}'",
            hint="Leave approver empty: over the network the approver is the caller's identity "
            "(token name or OAuth subject).",
        )


class PilotService:
    """Facade over store, catalog, templates, safety rules and the runner: authoring
    (``Authoring``) and ending or undoing workflows (``Lifecycle``) are parts it holds, with the
    core they share; running and approving are its own."""

    def __init__(self, core: ServiceCore) -> None:
        self.core = core
        self.authoring = Authoring(core)
        self.lifecycle = Lifecycle(core)
        # The runner as an attribute: this module may not name its type (only app.py and
        # engine/core.py import the runner; tests/engine/test_conductor.py checks it).
        self.runner = core.runner

    # The core's other dependencies, read through it: one place holds them.
    @property
    def store(self) -> Store:
        return self.core.store

    @property
    def templates(self) -> TemplateRegistry:
        return self.core.templates

    @property
    def approvals(self) -> ApprovalPolicy:
        return self.core.approvals

    @property
    def catalog(self) -> Catalog:
        return self.core.catalog

    async def drain(self) -> None:
        """Wait for runs still going (e.g. after their client left) before shutting down."""
        await self.core.drain()

    # --- authoring (engine/authoring.py) ------------------------------------------------------
    def create_workflow(
        self,
        actor: Actor,
        name: str,
        description: str,
        steps: list[dict[str, Any]],
        save_as_template: bool = False,
    ) -> CreateResult:
        return self.authoring.create_workflow(actor, name, description, steps, save_as_template)

    def create_workflow_from_template(
        self, actor: Actor, workflow_type: str, params: dict[str, Any]
    ) -> FromTemplateResult:
        return self.authoring.create_workflow_from_template(actor, workflow_type, params)

    def design_workflow(self, actor: Actor, goal: str, constraints: str = "") -> DesignResult:
        return self.authoring.design_workflow(actor, goal, constraints)

    def update_draft(
        self,
        actor: Actor,
        workflow_id: str,
        name: str = "",
        description: str = "",
        steps: list[dict[str, Any]] | None = None,
    ) -> DraftResult:
        return self.authoring.update_draft(actor, workflow_id, name, description, steps)

    def confirm_draft(
        self, actor: Actor, workflow_id: str, save_as_template: bool = False
    ) -> ConfirmDraftResult:
        return self.authoring.confirm_draft(actor, workflow_id, save_as_template)

    # --- ending and undoing (engine/lifecycle.py) ----------------------------------------------
    def reject(self, actor: Actor, workflow_id: str, reason: str, rejected_by: str = "") -> CancelResult:
        return self.lifecycle.reject(actor, workflow_id, reason, rejected_by)

    async def rollback(
        self,
        actor: Actor,
        workflow_id: str,
        confirm: bool = False,
        acknowledge_unknown_effects: bool = False,
    ) -> RollbackResult | Preview:
        return await self.lifecycle.rollback(actor, workflow_id, confirm, acknowledge_unknown_effects)

    async def cancel_workflow(
        self,
        actor: Actor,
        workflow_id: str,
        reason: str = "",
        confirm: bool = False,
        acknowledge_unknown_effects: bool = False,
    ) -> CancelResult | Preview:
        return await self.lifecycle.cancel_workflow(
            actor, workflow_id, reason, confirm, acknowledge_unknown_effects
        )

    # --- execution --------------------------------------------------------------------------
    async def _review_gate(self, actor: Actor, wf: Workflow, force: bool) -> Workflow:
        """Refuse ungated custom plans always and blocking findings unless a built-in is forced."""
        if not wf.steps:
            raise StateRefused(
                f"Workflow '{wf.id}' has no steps: there is nothing to run",
                hint="cancel_workflow this one and create a workflow with at least one step.",
                workflow_id=wf.id,
                state=wf.state.value,
            )
        catalog = self.catalog
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
        wf, _ = await self.runner.save(wf, log_forced)
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
        async with self.core.exclusive(wf, "run"), holding_run(self.runner, wf.id, wf.state.value):
            wf = self.core.load(wf.id)
            self.core.refuse_denied(wf.steps, "run", wf.id)
            self.runner.refuse_handback(wf, actor)
            wf = await self._review_gate(actor, wf, force)
            crashed = await self.runner.detect_crash(wf, actor)
            if crashed is not None:
                return crashed[1]
            refusal = await self.runner.dispatch_refusal(wf)
            if refusal is not None:
                raise refusal
            return await self.runner.run_until_checkpoint(wf, actor, progress)

    async def approve(
        self,
        actor: Actor,
        workflow_id: str,
        approver: str = "",
        acknowledge_not_executed: bool = False,
        progress: ProgressFn | None = None,
        *,
        channel: ApprovalChannel = "mcp",
        ask: AskHuman | None = None,
        expected_digest: str = "",
        gate_step: int | None = None,
        acknowledge_failure: str = "",
        comment: str = "",
    ) -> ApproveResult:
        """Approve the pending gate. ``channel`` is the door: ``mcp`` (the tool, subject to the
        approvals policy; ``ask`` shows the person a form) or ``cli`` (a person at the terminal).
        ``acknowledge_failure``: the approver's reason for approving although the gate's
        prediction says the run fails (required then, recorded with it).
        ``expected_digest``: the plan digest the person was shown; refused if the plan differs.
        ``gate_step``: the gate the approver means; refused unless it is the one waiting.
        ``comment``: the approver's words, recorded with the approval and audited. A refusal
        because the gate expired also records (once) that it expired."""
        try:
            answer = await self._approve_at_door(
                actor,
                workflow_id,
                approver,
                acknowledge_not_executed,
                progress,
                channel=channel,
                ask=ask,
                expected_digest=expected_digest,
                gate_step=gate_step,
                acknowledge_failure=acknowledge_failure,
                comment=comment,
            )
        except StateRefused as exc:
            if exc.fields.get("refused") == "gate_expired":
                await asyncio.to_thread(self.notice_expiry, workflow_id)
            raise
        return ApproveResult.extending(answer)

    async def _approve_at_door(
        self,
        actor: Actor,
        workflow_id: str,
        approver: str,
        acknowledge_not_executed: bool,
        progress: ProgressFn | None,
        *,
        channel: ApprovalChannel,
        ask: AskHuman | None,
        expected_digest: str,
        gate_step: int | None,
        acknowledge_failure: str,
        comment: str,
    ) -> RunResult:
        wf = self.core.load(workflow_id)
        if actor.authenticated:
            _same_caller(actor, approver)
            approver = actor.label
        form = policy.require_door(self.approvals, wf, ask) if channel == "mcp" else None
        if form is not None:
            # Refuse before bothering the person (a token caller's name is already known).
            now = await asyncio.to_thread(self.store.now)
            gate, _, _, required = precheck(
                wf,
                approver if actor.authenticated else None,
                acknowledge_not_executed,
                now=now,
                gate_step=gate_step,
            )
            if actor.authenticated:  # and what the policy refuses this caller
                in_force = self.runner.policy()
                guard.refuse_denied(in_force, wf.steps, self.catalog, "approve", wf.id)
                self.runner.policy_demand(wf, gate, actor, approver, now, in_force, required)
            view = await self.show_gate(actor, wf.id)
            summary = await asyncio.to_thread(self.decision, wf.id)
            answer = await form(view, summary, actor.label, actor.authenticated)
            if actor.authenticated:
                _same_caller(actor, answer.approver)  # a name the form did not ask for
            named = approver if actor.authenticated else answer.approver.strip() or actor.label
            if answer.decision == "reject" and answer.reason.strip():
                return await asyncio.to_thread(self.reject, actor, wf.id, answer.reason, rejected_by=named)
            if answer.decision != "approve":
                raise policy.declined(wf, answer)
            approver = named
            shown = view.pending()
            # The form showed one gate and its plan: the approval names both.
            channel, expected_digest = "elicit", shown.digest if shown else ""
            gate_step = shown.index if shown else gate_step
            # The person's acknowledgment of a predicted failure, never the agent's argument.
            acknowledge_failure = answer.despite
            comment = answer.comment
        work = self._approve(
            actor,
            wf,
            approver,
            acknowledge_not_executed,
            progress,
            expected_digest,
            channel,
            gate_step,
            acknowledge_failure,
            comment,
        )
        return await self.core.detached(work)

    def check_approval(
        self,
        workflow_id: str,
        approver: str,
        acknowledge_not_executed: bool,
        expected_digest: str = "",
        gate_step: int | None = None,
        acknowledge_failure: str = "",
        actor: Actor | None = None,
    ) -> None:
        """Raise the refusal ``approve`` would give before changing anything (not at a gate, not
        the gate ``gate_step``, gate expired, plan changed since ``expected_digest`` was shown, the
        same person twice, steps handed out before the gate unacknowledged, a predicted failure
        without ``acknowledge_failure``; with ``actor``, what the policy refuses: a denied step, an
        approver the gate's rule does not accept, a gate past its rule's validity, an exception to a
        closed change window by someone the window does not name), so a door can
        refuse before asking a person."""
        try:
            wf = self.core.load(workflow_id)
            now = self.store.now()
            gate, _, _, required = precheck(
                wf,
                approver,
                acknowledge_not_executed,
                expected_digest,
                now=now,
                gate_step=gate_step,
                acknowledge_failure=acknowledge_failure,
            )
            if actor is not None:
                policy = self.runner.policy()
                guard.refuse_denied(policy, wf.steps, self.catalog, "approve", wf.id)
                self.runner.policy_demand(wf, gate, actor, approver, now, policy, required)
                refused = windows.exception_refusal(policy, wf, gate, actor, self.catalog, now)
                if refused is not None:
                    raise refused
        except StateRefused as exc:
            if exc.fields.get("refused") == "gate_expired":
                self.notice_expiry(workflow_id)
            raise

    def notice_expiry(self, workflow_id: str | Workflow) -> Workflow | None:
        """Record, once across every Pilot on the database, that the workflow's waiting gate expired
        (audit and webhook ``gate_expired``); the workflow as it stands after. Never raises: a read
        that notices an expiry must still answer (None when the record could not be written)."""
        try:
            wf = self.core.load(workflow_id) if isinstance(workflow_id, str) else workflow_id
            return self.runner.notice_expiry(wf)
        except PilotError as exc:
            _log.warning("could not record the expiry of %s's gate: %s", workflow_id, exc.message)
            return None

    def flag_expired(self, rows: Sequence[Mapping[str, Any]]) -> list[ActiveWorkflow]:
        """List rows (``Store.list_*``) as listed workflows, ``expired: true`` on each whose waiting
        gate expired (recording the expiry once, as ``notice_expiry``)."""
        now = self.store.now()
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

    async def _approve(
        self,
        actor: Actor,
        wf: Workflow,
        approver: str,
        acknowledge: bool,
        progress: ProgressFn | None,
        expected_digest: str = "",
        channel: ApprovalChannel = "mcp",
        gate_step: int | None = None,
        acknowledge_failure: str = "",
        comment: str = "",
    ) -> RunResult:
        """Approve under this Pilot's lock of the workflow and its run lease, taken before the
        approval is saved so that the run it releases is never without its lease. While another
        run or approval holds them (an approval of the same gate here or in another Pilot, say), an
        approval that is not the last the gate needs is recorded without them; the last one waits
        for them (up to a lease time), then is refused for what is true then: the gate was
        released, or the workflow is running."""
        runner = self.runner
        loop = asyncio.get_running_loop()
        give_up = loop.time() + runner.lease_seconds
        approving = functools.partial(
            runner.approve,
            actor=actor,
            approver=approver,
            acknowledge_not_executed=acknowledge,
            progress=progress,
            expected_digest=expected_digest,
            channel=channel,
            gate_step=gate_step,
            acknowledge_failure=acknowledge_failure,
            comment=comment,
        )
        while True:
            if not self.core.busy(wf.id):
                async with self.core.exclusive(wf, "approve"):
                    held = await RunLease.take(runner, wf.id)
                    if held is not None:
                        async with held.walking():  # its saves and sends carry the run's fences
                            return await approving(await asyncio.to_thread(self.core.load, wf.id))
            try:
                return await approving(await asyncio.to_thread(self.core.load, wf.id), holds_run=False)
            except QuorumReached:
                if loop.time() >= give_up:
                    break
            await asyncio.sleep(_LEASE_POLL)
        async with self.core.exclusive(wf, "approve"), holding_run(runner, wf.id, wf.state.value):
            return await approving(await asyncio.to_thread(self.core.load, wf.id))

    def pending_gate(self, workflow_id: str) -> GateView:
        """What a person deciding on the gate sees: its message, options and approvals, the steps it
        releases with their risk tier, what ran before it, and the plan digest."""
        wf = self.core.load(workflow_id)
        if wf.state is not W.AWAITING_APPROVAL or gate_records.pending_gate(wf) is None:
            raise StateRefused(
                f"Workflow '{wf.id}' is not waiting at an approval gate (state: {wf.state.value})",
                hint=f"`vmware-pilot status {wf.id}` shows where it stands.",
                workflow_id=wf.id,
                state=wf.state.value,
            )
        return gate_records.gate_view(wf, self.catalog, self.store.now(), self.runner.dispatcher is not None)

    async def show_gate(self, actor: Actor, workflow_id: str) -> GateView:
        """``pending_gate`` after reading the targets' state and the skills' previews again (when
        Pilot dispatches): what a person is shown right before deciding. The reads are audited."""
        wf = self.core.load(workflow_id)
        self.pending_gate(workflow_id)  # the refusal when no gate is pending
        await self.runner.inspect(wf, actor)
        return self.pending_gate(workflow_id)

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
        wf = self._load_noticed(workflow_id, now)
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

    def _load_noticed(self, workflow_id: str, now: datetime | None = None) -> Workflow:
        """The workflow, after recording (once) that its waiting gate expired by ``now`` (the
        database's time; read here when not given), if it did."""
        wf = self.core.load(workflow_id)
        if gate_records.expiry_unnoticed(wf, self.store.now() if now is None else now):
            wf = self.notice_expiry(wf) or wf
        return wf

    def decision(self, workflow_id: str) -> Decision | None:
        """The decision summary of the gate the workflow waits at (None: it waits at none)."""
        wf = self._load_noticed(workflow_id)
        return decision_of(wf, self.catalog, self.store.now(), self.runner.dispatcher is not None)

    def eligibility(
        self, actor: Actor, workflow_id: str, role: Role | None = None, channel: ApprovalChannel = "console"
    ) -> Eligibility:
        """What ``actor`` (with ``role``; None: no roles at this door) may do now at the workflow's
        waiting gate through ``channel``, and if not, why (``engine.decision.eligibility``)."""
        wf = self._load_noticed(workflow_id)
        allowed = eligibility(wf, actor, self.store.now(), role, self._door_refusal(wf, channel))
        gate = gate_records.pending_gate(wf)
        if not allowed.may_approve or gate is None:
            return allowed
        # The policy in force may refuse this approver (the gate's rule) or a step it denies.
        try:
            in_force = self.runner.policy()
            guard.refuse_denied(in_force, wf.steps, self.catalog, "approve", wf.id)
            record = gate_records.gate_record(wf, gate.index)
            required = gate_records.required_approvals(gate, record)
            self.runner.policy_demand(wf, gate, actor, actor.label, self.store.now(), in_force, required)
        except PolicyRefused as exc:
            return allowed.model_copy(
                update={"may_approve": False, "approve_refused": "policy", "approve_why": exc.message}
            )
        return allowed

    def _door_refusal(self, wf: Workflow, channel: ApprovalChannel) -> str:
        """Why ``channel`` takes no approvals of ``wf`` at all (the approvals policy), or ""."""
        return (
            f"This Pilot takes approvals only from a person at the operator CLI (approvals policy "
            f"'human'); run `vmware-pilot approve {wf.id}` there."
            if channel in ("mcp", "elicit") and self.core.approvals == "human"
            else ""
        )

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
            templates=[TemplateInfo.model_validate(t) for t in self.templates.listing()],
            active_workflows=page,
            active_total=total,
            next_offset=next_offset(offset, size, len(page), total),
        )

    def get_skill_catalog(self) -> CatalogResult:
        return CatalogResult.model_validate(self.catalog.payload())
