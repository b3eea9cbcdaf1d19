"""PilotService: the operations behind the 13 MCP tools and the operator CLI.

Every method returns the reference-shaped result dict (reference §2.1-2.13) or raises a
``PilotError`` whose ``payload()`` is the refusal body. Results may carry ``error`` (e.g. a run
that ends ``failed``): the server marks those ``isError`` by the reference rule.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import iso, utcnow
from vmware_pilot.domain.enums import Event, StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine import gates, policy
from vmware_pilot.engine.approval import precheck
from vmware_pilot.engine.policy import ApprovalChannel, ApprovalPolicy, AskHuman
from vmware_pilot.engine.progress import ProgressFn
from vmware_pilot.engine.runner import Runner
from vmware_pilot.errors import (
    ApprovalGateRefused,
    CorruptRecord,
    InvalidInput,
    PilotError,
    ReviewBlocked,
    StateRefused,
)
from vmware_pilot.safety import gate
from vmware_pilot.safety.blast import cancel_blast_radius, rollback_blast_radius
from vmware_pilot.safety.redaction import redact
from vmware_pilot.safety.review import blocking_findings, review
from vmware_pilot.store.protocol import Store
from vmware_pilot.templates.registry import TemplateRegistry
from vmware_pilot.templates.steps import steps_from_dicts

__all__ = ["PilotService", "ProgressFn"]

_log = logging.getLogger(__name__)
W = WorkflowState
T = TypeVar("T")


def _step_summary(step: Step) -> dict[str, Any]:
    return {"index": step.index, "action": step.action, "skill": step.skill, "tool": step.tool}


class PilotService:
    """Facade over store, catalog, templates, safety rules and the runner."""

    def __init__(
        self,
        store: Store,
        catalog: Callable[[], Catalog],
        templates: TemplateRegistry,
        runner: Runner,
        approvals: ApprovalPolicy = "agent",
    ) -> None:
        self.store = store
        self.approvals: ApprovalPolicy = approvals
        self._catalog = catalog
        self.templates = templates
        self.runner = runner
        self._locks: dict[str, asyncio.Lock] = {}
        self._runs: set[asyncio.Task[Any]] = set()

    @property
    def catalog(self) -> Catalog:
        return self._catalog()

    # --- helpers ----------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _exclusive(self, wf: Workflow, verb: str) -> AsyncIterator[None]:
        """One run/approve/rollback per workflow at a time; a second caller is told it is running."""
        lock = self._locks.setdefault(wf.id, asyncio.Lock())
        if lock.locked():
            raise StateRefused(
                f"Workflow '{wf.id}' is running right now in this Pilot; cannot {verb} it concurrently",
                hint=f"Poll get_workflow_status('{wf.id}') until the run stops, then try again.",
                workflow_id=wf.id,
                state=W.RUNNING.value,
            )
        async with lock:
            yield

    async def _detached(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` as a task of its own: a caller that disconnects or times out does not stop it."""
        task = asyncio.create_task(work)
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)
        return await asyncio.shield(task)

    async def drain(self) -> None:
        """Wait for runs still going (e.g. after their client left) before shutting down."""
        while self._runs:
            await asyncio.gather(*list(self._runs), return_exceptions=True)

    def _load(self, workflow_id: str) -> Workflow:
        return self.store.load(workflow_id)

    def _is_custom(self, wf: Workflow) -> bool:
        return gate.is_custom_workflow(wf, self.templates.builtin_names())

    def _save_template(self, name: str, description: str, wf: Workflow) -> str:
        authors = [a for a in [wf.created_by, *wf.authors] if a]
        return str(self.templates.save_as_template(name, description, wf.steps, authors))

    # --- creation ---------------------------------------------------------------------------
    def create_workflow(
        self,
        actor: Actor,
        name: str,
        description: str,
        steps: list[dict[str, Any]],
        save_as_template: bool = False,
    ) -> dict[str, Any]:
        if not name.strip():
            raise InvalidInput(
                "name must not be empty", field="name", hint="Give the workflow a short descriptive name."
            )
        if save_as_template:
            self.templates.validate_template_name(name)
        built = steps_from_dicts(steps)
        wf = Workflow.new(
            name, W.PENDING, built, {"description": description, "custom": True}, created_by=actor.label
        )
        gate.enforce(
            wf, self.catalog, verb="save", retry="call create_workflow again with the corrected steps"
        )
        self.runner.create(wf)
        out: dict[str, Any] = {
            "workflow_id": wf.id,
            "workflow_type": wf.workflow_type,
            "state": wf.state.value,
            "steps": [_step_summary(s) for s in wf.steps],
            "saved_as_template": False,
            "message": f"Custom workflow created. Call run_workflow('{wf.id}') to execute.",
        }
        if save_as_template:
            out["template_file"] = self._save_template(name, description, wf)
            out["saved_as_template"] = True
        return out

    def design_workflow(self, actor: Actor, goal: str, constraints: str = "") -> dict[str, Any]:
        wf = Workflow.new(
            "custom_draft",
            W.DRAFT,
            params={"goal": goal, "constraints": constraints, "custom": True},
            created_by=actor.label,
        )
        wf.log("draft_created", f"Goal: {goal}", actor.label)
        self.runner.create(wf)
        return {
            "workflow_id": wf.id,
            "state": wf.state.value,
            "goal": goal,
            "constraints": constraints,
            "available_skills": self.catalog.skills(),
            "next_step": (
                "Call get_skill_catalog() for the tools each skill offers, then "
                f"update_draft('{wf.id}', name=..., steps=[...]) with the steps (insert a "
                "require_approval step before anything destructive), show the draft to the user, and "
                f"call confirm_draft('{wf.id}') once they approve."
            ),
        }

    def _require_draft(self, wf: Workflow) -> None:
        if wf.state is not W.DRAFT:
            raise StateRefused(
                f"Workflow '{wf.id}' is not a draft (state: {wf.state.value})",
                hint="Only drafts can be edited or confirmed; create_workflow a new one instead.",
            )

    def update_draft(
        self,
        actor: Actor,
        workflow_id: str,
        name: str = "",
        description: str = "",
        steps: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        wf = self._load(workflow_id)
        self._require_draft(wf)
        built = steps_from_dicts(steps) if steps is not None else None  # validate before saving

        def change(w: Workflow) -> None:
            self._require_draft(w)
            if name:
                w.workflow_type = name
            if description:
                w.params["description"] = description
            if built is not None:
                w.steps = list(built)
                w.log("steps_updated", f"{len(built)} steps", actor.label)
            w.with_author(actor.label)

        if built is not None:
            probe = Workflow.new("probe", W.DRAFT, built)
            probe.id = workflow_id
            self.runner.vault.remember(probe)
        wf, _ = self.runner.commit(wf, change)
        violations = gate.gate_violations(wf, self.catalog)
        if violations:
            first = violations[0]
            message = (
                f"Draft saved, but confirm_draft will refuse it: {len(violations)} step(s) need a "
                f"require_approval gate before them (first: step {first['step_index']} "
                f"{first['skill']}.{first['tool']}). Insert "
                f"{gate.fix_for(violations)['step']} before step {first['step_index']}."
            )
        else:
            message = "Draft updated. Show it to the user for review. Call confirm_draft() when approved."
        return {
            "workflow_id": wf.id,
            "workflow_type": wf.workflow_type,
            "state": wf.state.value,
            "steps": [
                {**_step_summary(s), "has_rollback": bool(s.rollback_tool), "group_id": s.group_id}
                for s in wf.steps
            ],
            "approval_gate_violations": violations,
            "message": message,
        }

    def confirm_draft(self, actor: Actor, workflow_id: str, save_as_template: bool = False) -> dict[str, Any]:
        wf = self._load(workflow_id)
        self._require_draft(wf)
        if not wf.steps:
            raise StateRefused(
                "Cannot confirm a draft with no steps. Call update_draft() first.",
                hint=f"update_draft('{wf.id}', steps=[...]) adds the steps.",
            )
        gate.enforce(
            wf,
            self.catalog,
            verb="confirm",
            retry=f"update_draft('{wf.id}', steps=[...]) and confirm_draft again",
        )
        if save_as_template:
            if wf.workflow_type == "custom_draft":
                raise InvalidInput(
                    "Cannot save the draft as a template while it is still named 'custom_draft'; "
                    "nothing was confirmed or saved",
                    field="save_as_template",
                    hint="Rename the draft via update_draft(name=...) first.",
                )
            self.templates.validate_template_name(wf.workflow_type)

        def change(w: Workflow) -> None:
            fire(w, Event.CONFIRM)
            w.log("draft_confirmed", f"Confirmed with {len(w.steps)} steps", actor.label)
            w.with_author(actor.label)

        wf, _ = self.runner.commit(wf, change)
        out: dict[str, Any] = {
            "workflow_id": wf.id,
            "workflow_type": wf.workflow_type,
            "state": wf.state.value,
            "steps_count": len(wf.steps),
            "saved_as_template": False,
            "message": f"Workflow confirmed. Call run_workflow('{wf.id}') to execute.",
        }
        if save_as_template:
            out["template_file"] = self._save_template(
                wf.workflow_type, str(wf.params.get("description") or wf.params.get("goal") or ""), wf
            )
            out["saved_as_template"] = True
        return out

    def create_workflow_from_template(
        self, actor: Actor, workflow_type: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        wf = self.templates.create(workflow_type, params, actor.label)
        self.runner.create(wf)
        return {
            "workflow_id": wf.id,
            "workflow_type": wf.workflow_type,
            "state": wf.state.value,
            "steps": [_step_summary(s) for s in wf.steps],
            "params": redact(wf.params),
            "message": f"Workflow created and saved. Call run_workflow('{wf.id}') to execute.",
        }

    # --- execution --------------------------------------------------------------------------
    def _review_gate(self, actor: Actor, wf: Workflow, force: bool) -> Workflow:
        """Refuse ungated custom plans always and blocking findings unless a built-in is forced."""
        catalog = self.catalog
        result = review(wf, catalog)
        blocking = blocking_findings(result)
        if self._is_custom(wf):
            try:
                gate.enforce(
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
        wf, _ = self.runner.commit(wf, log_forced)
        return wf

    async def run_workflow(
        self, actor: Actor, workflow_id: str, force: bool = False, progress: ProgressFn | None = None
    ) -> dict[str, Any]:
        wf = self._load(workflow_id)
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
        return await self._detached(self._run(actor, wf, force, progress))

    async def _run(
        self, actor: Actor, wf: Workflow, force: bool, progress: ProgressFn | None
    ) -> dict[str, Any]:
        async with self._exclusive(wf, "run"):
            wf = self._load(wf.id)
            wf = self._review_gate(actor, wf, force)
            crashed = self.runner.detect_crash(wf, actor)
            if crashed is not None:
                return crashed[1]
            refusal = await self.runner.dispatch_refusal(wf)
            if refusal is not None:
                return refusal
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
    ) -> dict[str, Any]:
        """Approve the pending gate. ``channel`` is the door: ``mcp`` (the tool, subject to the
        approvals policy; ``ask`` shows the person a form) or ``cli`` (a person at the terminal).
        ``expected_digest``: the plan digest the person was shown; refused if the plan differs."""
        wf = self._load(workflow_id)
        if actor.kind == "token":
            if approver.strip() and not actor.is_same_person(approver):
                raise PilotError(
                    f"approver '{approver}' differs from the authenticated caller '{actor.label}'",
                    hint="Leave approver empty: over the network the approver is the caller's token name.",
                )
            approver = actor.label
        form = policy.require_door(self.approvals, wf, ask) if channel == "mcp" else None
        if form is not None:
            precheck(wf, None, acknowledge_not_executed)  # refuse before bothering the person
            view = {**self.pending_gate(wf.id), "default_approver": actor.label}
            answer = await form(view)
            if answer.decision == "reject" and answer.reason.strip():
                return self.reject(actor, wf.id, answer.reason, rejected_by=answer.approver)
            if answer.decision != "approve":
                raise policy.declined(wf, answer)
            if actor.kind != "token":
                approver = answer.approver.strip() or actor.label
            channel, expected_digest = "elicit", str(view["gate"]["digest"])
        work = self._approve(
            actor, wf, approver, acknowledge_not_executed, progress, expected_digest, channel
        )
        return await self._detached(work)

    async def _approve(
        self,
        actor: Actor,
        wf: Workflow,
        approver: str,
        acknowledge: bool,
        progress: ProgressFn | None,
        expected_digest: str = "",
        channel: ApprovalChannel = "mcp",
    ) -> dict[str, Any]:
        async with self._exclusive(wf, "approve"):
            wf = self._load(wf.id)
            return await self.runner.approve(
                wf, actor, approver, acknowledge, progress, expected_digest=expected_digest, channel=channel
            )

    def pending_gate(self, workflow_id: str) -> dict[str, Any]:
        """What a person deciding on the gate sees: its message, options and approvals, the steps it
        releases with their risk tier, what ran before it, and the plan digest."""
        wf = self._load(workflow_id)
        if wf.state is not W.AWAITING_APPROVAL or gates.pending_gate(wf) is None:
            raise StateRefused(
                f"Workflow '{wf.id}' is not waiting at an approval gate (state: {wf.state.value})",
                hint=f"`vmware-pilot status {wf.id}` shows where it stands.",
                workflow_id=wf.id,
                state=wf.state.value,
            )
        return gates.gate_view(wf, self.catalog, utcnow())

    def reject(self, actor: Actor, workflow_id: str, reason: str, rejected_by: str = "") -> dict[str, Any]:
        """Cancel a workflow waiting at a gate because a person rejected it (audited ``rejected``)."""
        wf = self._load_for_gate(workflow_id)
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
        radius = cancel_blast_radius(wf, self.catalog, acknowledge_unknown_effects=False)
        self._refuse_unless_clear("reject", wf, radius)
        who = actor.label if actor.kind == "token" else (rejected_by.strip() or actor.label)
        out = self.runner.cancel(wf, actor, reason, rejected_by=who)
        out.update(action="cancelled", rejected_by=who, blast_radius=radius)
        return out

    def _load_for_gate(self, workflow_id: str) -> Workflow:
        try:
            return self._load(workflow_id)
        except CorruptRecord as exc:
            raise PilotError(
                exc.message,
                hint=exc.hint,
                workflow_id=workflow_id,
                blast_radius={"blockers": [], "unmeasured": [exc.reason]},
            ) from exc

    @staticmethod
    def _refuse_unless_clear(verb: str, wf: Workflow, radius: dict[str, Any]) -> None:
        reasons = [*radius.get("blockers", []), *radius.get("unmeasured", [])]
        if reasons:
            raise StateRefused(
                f"Refusing to {verb} workflow '{wf.id}': {'; '.join(reasons)}. Nothing was changed. "
                f"Resolve that first (get_workflow_status('{wf.id}') shows every step), then preview again.",
                workflow_id=wf.id,
                state=wf.state.value,
                blast_radius=radius,
            )

    async def rollback(
        self,
        actor: Actor,
        workflow_id: str,
        confirm: bool = False,
        acknowledge_unknown_effects: bool = False,
    ) -> dict[str, Any]:
        wf = self._load_for_gate(workflow_id)
        radius = rollback_blast_radius(
            wf, self.catalog, acknowledge_unknown_effects=acknowledge_unknown_effects
        )
        if not confirm:
            return {
                "action": "preview",
                "workflow_id": wf.id,
                "blast_radius": radius,
                "hint": "Nothing was rolled back. Show blast_radius to the user; call rollback again with "
                "confirm=True only after their explicit decision.",
            }
        self._refuse_unless_clear("roll back", wf, radius)
        out = await self._detached(self._rollback(actor, wf, acknowledge_unknown_effects))
        out["action"] = "rollback_incomplete" if out.get("outcome") == "failed" else "rolled_back"
        out["blast_radius"] = radius
        return out

    async def _rollback(self, actor: Actor, wf: Workflow, include_unknown: bool) -> dict[str, Any]:
        async with self._exclusive(wf, "roll back"):
            return await self.runner.rollback(self._load(wf.id), actor, include_unknown)

    async def cancel_workflow(
        self,
        actor: Actor,
        workflow_id: str,
        reason: str = "",
        confirm: bool = False,
        acknowledge_unknown_effects: bool = False,
    ) -> dict[str, Any]:
        wf = self._load_for_gate(workflow_id)
        radius = cancel_blast_radius(
            wf, self.catalog, acknowledge_unknown_effects=acknowledge_unknown_effects
        )
        if not confirm:
            return {
                "action": "preview",
                "workflow_id": wf.id,
                "blast_radius": radius,
                "hint": "Nothing was cancelled. Steps in left_in_place stay applied (rollback reverses what "
                "can be reversed). Show blast_radius to the user; call cancel_workflow again with "
                "confirm=True only after their explicit decision.",
            }
        self._refuse_unless_clear("cancel", wf, radius)
        out = self.runner.cancel(wf, actor, reason)
        out["action"] = "cancelled"
        out["blast_radius"] = radius
        return out

    # --- reads ------------------------------------------------------------------------------
    def review_workflow(self, workflow_id: str) -> dict[str, Any]:
        return review(self._load(workflow_id), self.catalog)

    def get_workflow_status(self, workflow_id: str) -> dict[str, Any]:
        """The stored record; ``in_flight`` lists steps a run is executing right now."""
        wf = self._load(workflow_id)
        out = wf.to_dict()
        running = [s for s in wf.steps if s.status is StepStatus.RUNNING]
        if running:
            out["in_flight"] = [{**s.ref(), "started_at": iso(s.started_at)} for s in running]
        reached = gates.gates_status(wf, utcnow())
        if reached:
            out["gates"] = reached
        return out

    def list_workflows(self, limit: int | None = None, offset: int = 0) -> dict[str, Any]:
        if limit is not None and limit < 1:
            raise InvalidInput("limit must be at least 1", field="limit", hint="Omit limit to list all.")
        if offset < 0:
            raise InvalidInput("offset must not be negative", field="offset", hint="Start at offset 0.")
        out: dict[str, Any] = {
            "templates": self.templates.listing(),
            "active_workflows": self.store.list_active(limit, offset),
        }
        if limit is not None or offset:
            out["active_total"] = self.store.count_active()
        return out

    def get_skill_catalog(self) -> dict[str, Any]:
        return self.catalog.payload()
