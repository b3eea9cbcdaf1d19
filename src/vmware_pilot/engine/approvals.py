"""Approving a gate, the same way through every door (the MCP tool, the operator CLI, the console).

A door builds one ``ApproveRequest`` and calls ``Approvals.approve``; every check runs here, once
per call, in this order: the caller's role (``safety.roles``), the authenticated caller as the
approver, the approvals policy's door (``engine.policy.require_door``), then the approval's
precheck (``engine.execution.approval.precheck``: not at a gate, not the gate meant, expired, plan
changed, the same person twice, unacknowledged hand-outs or predicted failure) with the policy in
force. Only then is a person asked, when the door has one to ask (the MCP form under the
``elicit`` policy; the door's own ``confirm``: the terminal's question, the console's answer
page), and the approval recorded under the workflow's lock and run lease, where
``approval.record`` checks the stored record again in the save.

An approval referred to the console (the ``elicit`` policy on a connection that cannot show a
form but can send the person to a URL: ``refer``) is decided there, by the signed-in person
through the console's own door; ``referred`` then answers the agent's call with what the gate
became (approved, rejected, still waiting, or the refusal true now), never deciding it itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Outcome, StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine import guard, policy, windows
from vmware_pilot.engine.context import ServiceContext
from vmware_pilot.engine.execution import approval
from vmware_pilot.engine.execution.approval import Admitted, QuorumReached
from vmware_pilot.engine.execution.runlease import RunLease, holding_run
from vmware_pilot.engine.gates import Gates
from vmware_pilot.engine.lifecycle import Lifecycle
from vmware_pilot.engine.policy import AskHuman
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.engine.requests import ApproveRequest
from vmware_pilot.errors import InvalidInput, PilotError, StateRefused
from vmware_pilot.results import ApproveResult, CancelResult, RunResult
from vmware_pilot.safety import roles

__all__ = ["Approvals", "Confirm", "Declined", "Referral", "Referred"]

_log = logging.getLogger("vmware_pilot.server")
# Seconds between attempts to take a run lease another Pilot holds while it records an approval.
_LEASE_POLL = 0.2

Confirm = Callable[[], Awaitable[bool]]
"""The door's own question to the person, asked once every check passed (False: not approved)."""


class Declined(StateRefused):
    """The person at the door did not confirm the approval: nothing changed, the gate keeps waiting."""


@dataclass(frozen=True, slots=True)
class Referral:
    """An approval referred to the console: the person decides the gate at ``gate_step`` of
    ``workflow_id`` there (``Approvals.refer``)."""

    workflow_id: str
    gate_step: int


# What a referred approval became (``Approvals.referred``): the approval's result once the gate is
# decided; ``waiting``: no decision yet (or not every approval the gate needs); ``running``: the gate
# was approved and the run it released has not stopped yet.
Referred = ApproveResult | Literal["waiting", "running"]

# The outcome an approval's result names for the state the workflow is in after it (docs/contract.md#outcomes).
_OUTCOME_OF = {
    WorkflowState.COMPLETED: Outcome.COMPLETED,
    WorkflowState.AWAITING_APPROVAL: Outcome.AWAITING_APPROVAL,
    WorkflowState.PENDING: Outcome.DISPATCH_REQUIRED,
    WorkflowState.FAILED: Outcome.FAILED,
    WorkflowState.CANCELLED: Outcome.CANCELLED,
}


def _same_caller(actor: Actor, approver: str) -> None:
    """Refuse an approver name that is not the authenticated ``actor``: over the network the
    approver is the caller's identity, never a name the agent or the form supplies."""
    if approver.strip() and not actor.is_same_person(approver):
        raise PilotError(
            f"approver '{approver}' differs from the authenticated caller '{actor.label}'",
            hint="Leave approver empty: over the network the approver is the caller's identity "
            "(token name or OAuth subject).",
        )


class Approvals:
    """The approval path of ``PilotService``: one request, its checks once, then the record."""

    def __init__(self, core: ServiceContext, gates: Gates, lifecycle: Lifecycle) -> None:
        self.core = core
        self.gates = gates
        self.lifecycle = lifecycle

    async def approve(
        self,
        request: ApproveRequest,
        *,
        progress: ProgressFn | None = None,
        ask: AskHuman | None = None,
        confirm: Confirm | None = None,
    ) -> ApproveResult:
        """Approve the pending gate as ``request`` says. ``ask``: the MCP form shown under the
        ``elicit`` approvals policy; ``confirm``: the door's question to its person, asked after
        every check passed (refused with ``Declined`` when it answers False). A refusal because the
        gate expired also records (once) that it expired."""
        try:
            answer = await self._approve_at_door(request, progress, ask, confirm)
        except StateRefused as exc:
            await self._noticed(exc, request.workflow_id)
            raise
        return ApproveResult.extending(answer)

    async def refer(self, request: ApproveRequest) -> Referral:
        """Send the approval to the console instead of asking here (the ``elicit`` policy on a
        2026-07-28 connection): every check a door makes before a person is asked (the caller's
        role, the caller as the approver, the precheck with no approver yet), then the gate the
        person is to decide. Nothing is recorded."""
        try:
            wf = await self._door_checks(request)
            admitted = await asyncio.to_thread(self._admit, wf, request, None, False)
        except StateRefused as exc:
            await self._noticed(exc, request.workflow_id)
            raise
        return Referral(wf.id, admitted.gate.index)

    async def referred(
        self, request: ApproveRequest, referral: Referral, *, declined: bool = False
    ) -> Referred:
        """What the gate ``referral`` names became since it was referred, read from the store
        (whichever Pilot recorded the decision): approved, the approval's result for this caller
        (the steps it released to them in ``pending_dispatch``); rejected, the rejection's; still
        waiting, ``waiting`` or, when the person said at the client they will not decide
        (``declined``), the refusal that the gate keeps waiting; otherwise the refusal true now
        (the gate expired, the workflow was cancelled or moved on). Never decides anything."""
        actor = request.caller
        try:
            wf = await self._door_checks(request)
            gate = wf.steps[referral.gate_step] if 0 <= referral.gate_step < len(wf.steps) else None
            if gate is not None and gate.is_gate and gate.status is StepStatus.SUCCESS:
                outcome = _OUTCOME_OF.get(wf.state)
                if outcome is None:
                    return "running"
                return ApproveResult.extending(self.core.runner.answers.result(wf, actor, outcome))
            rejected_by = _rejected_by(wf, referral.gate_step)
            if wf.state is WorkflowState.CANCELLED and rejected_by:
                out = self.core.runner.answers.result(wf, actor, Outcome.CANCELLED)
                return ApproveResult.extending(out, action="cancelled", rejected_by=rejected_by)
            meant = dataclasses.replace(request, gate_step=referral.gate_step)
            await asyncio.to_thread(self._admit, wf, meant, None, False)
        except StateRefused as exc:
            await self._noticed(exc, request.workflow_id)
            raise
        if declined:
            raise policy.declined(wf, policy.HumanAnswer("decline"))
        return "waiting"

    async def _noticed(self, exc: StateRefused, workflow_id: str) -> None:
        """A refusal because the gate expired records (once) that it expired."""
        if exc.fields.get("refused") == "gate_expired":
            await asyncio.to_thread(self.gates.notice_expiry, workflow_id)

    async def _door_checks(self, request: ApproveRequest) -> Workflow:
        """The workflow, once the caller's role allows approving it and the approver named is the
        authenticated caller (if any)."""
        actor = request.caller
        wf = await asyncio.to_thread(self.core.load, request.workflow_id)
        if request.role is not None:
            refused = roles.approve_refusal(actor, request.role, wf)
            if refused is not None:
                _log.warning(
                    "refused approve for %s (role %s): %s", actor.label, request.role.name, refused.message
                )
                raise refused
        if actor.authenticated:
            _same_caller(actor, request.approver)
        return wf

    def _admit(
        self, wf: Workflow, request: ApproveRequest, approver: str | None, judge_policy: bool
    ) -> Admitted:
        """The approval's precheck and, with ``judge_policy`` and a known ``approver`` (someone is
        about to be asked), what the policy in force refuses (a denied step, an approver the gate's
        rule does not accept, a gate past its rule's validity, an exception to a closed change
        window by someone the window does not name). The runner judges the policy again, with the
        time of the save, when it records the approval."""
        now = self.core.store.now()
        admitted = approval.precheck(
            wf,
            approver,
            request.acknowledge_not_executed,
            request.expected_digest,
            now=now,
            gate_step=request.gate_step,
            acknowledge_failure=request.acknowledge_failure,
        )
        if judge_policy and approver is not None:
            runner, actor = self.core.runner, request.caller
            in_force = runner.policy()
            guard.refuse_denied(in_force, wf.steps, self.core.catalog, "approve", wf.id)
            runner.policy_demand(wf, admitted.gate, actor, approver, now, in_force, admitted.required)
            refused = windows.exception_refusal(in_force, wf, admitted.gate, actor, self.core.catalog, now)
            if refused is not None:
                raise refused
        return admitted

    async def _approve_at_door(
        self,
        request: ApproveRequest,
        progress: ProgressFn | None,
        ask: AskHuman | None,
        confirm: Confirm | None,
    ) -> RunResult:
        actor = request.caller
        wf = await self._door_checks(request)
        if request.door == "console" and not request.expected_digest.strip():
            # Without the digest of the plan the page showed, the approval would bind to whatever
            # the plan is now, which the person never saw.
            raise InvalidInput(
                f"Refusing to approve workflow '{wf.id}': the approval carried no plan digest, so it "
                "cannot show which plan the person approves",
                field="expected_digest",
                hint="Approve from the gate page, which shows the plan and sends its digest.",
            )
        if actor.authenticated:
            request = dataclasses.replace(request, approver=actor.label)
        form = policy.require_door(self.core.approvals, wf, ask) if request.door == "mcp" else None
        # Refuse before bothering anyone (a caller not authenticated is named by the form).
        named = request.approver if form is None or actor.authenticated else None
        asking = form is not None or confirm is not None
        admitted = await asyncio.to_thread(self._admit, wf, request, named, asking)
        if form is not None:
            asked = await self._ask(form, wf, request, admitted)
            if not isinstance(asked, ApproveRequest):
                return asked  # the person rejected it
            request = asked
        elif confirm is not None and not await confirm():
            raise Declined(
                f"Not approved: the person did not confirm. Workflow '{wf.id}' keeps waiting at its gate; "
                "nothing changed",
                workflow_id=wf.id,
                state=wf.state.value,
                refused="declined",
            )
        return await self.core.detached(self._approve(request, wf, admitted, progress))

    async def _ask(
        self, form: AskHuman, wf: Workflow, request: ApproveRequest, admitted: Admitted
    ) -> ApproveRequest | CancelResult:
        """Show the person the gate (read again) and its decision summary; the request as they
        answered it, or the rejection's result."""
        actor = request.caller
        page = await self.gates.gate_page(actor, wf.id)
        answer = await form(page.view, page.decision, actor.label, actor.authenticated)
        if actor.authenticated:
            _same_caller(actor, answer.approver)  # a name the form did not ask for
        named = request.approver if actor.authenticated else answer.approver.strip() or actor.label
        if answer.decision == "reject" and answer.reason.strip():
            return await asyncio.to_thread(
                self.lifecycle.reject, actor, wf.id, answer.reason, rejected_by=named
            )
        if answer.decision != "approve":
            raise policy.declined(wf, answer)
        shown = page.view.pending()
        # The form showed one gate and its plan: the approval names both (the plan digest is the
        # one admitted, which the stored record is checked against when the approval is saved).
        return dataclasses.replace(
            request,
            approver=named,
            door="elicit",
            expected_digest=shown.digest if shown else request.expected_digest,
            gate_step=shown.index if shown else admitted.gate.index,
            # The person's acknowledgment of a predicted failure, never the agent's argument.
            acknowledge_failure=answer.despite,
            comment=answer.comment,
        )

    async def _approve(
        self, request: ApproveRequest, wf: Workflow, admitted: Admitted, progress: ProgressFn | None
    ) -> RunResult:
        """Approve under this Pilot's lock of the workflow and its run lease, taken before the
        approval is saved so that the run it releases is never without its lease. While another
        run or approval holds them (an approval of the same gate here or in another Pilot, say), an
        approval that is not the last the gate needs is recorded without them; the last one waits
        for them (up to a lease time), then is refused for what is true then: the gate was
        released, or the workflow is running."""
        runner = self.core.runner
        loop = asyncio.get_running_loop()
        give_up = loop.time() + runner.lease_seconds
        approving = functools.partial(
            runner.approve,
            actor=request.caller,
            approver=request.approver,
            acknowledge_not_executed=request.acknowledge_not_executed,
            progress=progress,
            expected_digest=request.expected_digest,
            channel=request.door,
            gate_step=request.gate_step,
            acknowledge_failure=request.acknowledge_failure,
            comment=request.comment,
        )
        checked: Admitted | None = admitted  # the precheck made at the door, for the first attempt

        async def attempt(holds_run: bool = True) -> RunResult:
            nonlocal checked
            given, checked = checked, None
            latest = await asyncio.to_thread(self.core.load, wf.id)
            return await approving(latest, holds_run=holds_run, admitted=given)

        while True:
            if not self.core.busy(wf.id):
                async with self.core.exclusive(wf, "approve"):
                    held = await RunLease.take(runner, wf.id)
                    if held is not None:
                        async with held.walking():  # its saves and sends carry the run's fences
                            return await attempt()
            try:
                return await attempt(holds_run=False)
            except QuorumReached:
                if loop.time() >= give_up:
                    break
            await asyncio.sleep(_LEASE_POLL)
        async with self.core.exclusive(wf, "approve"), holding_run(runner, wf.id, wf.state.value):
            return await attempt()


def _rejected_by(wf: Workflow, gate_step: int) -> str:
    """Who rejected the gate at ``gate_step`` of ``wf``, from its ``rejected`` audit event
    (``engine.execution.undo.cancel`` writes "<who> rejected the gate at step <n>: <why>"), else ""."""
    said = f" rejected the gate at step {gate_step}: "
    for entry in reversed(wf.audit_log):
        if entry.action == "rejected" and said in entry.detail:
            return entry.detail.split(said, 1)[0]
    return ""
