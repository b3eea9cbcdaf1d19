"""Authoring operations: create_workflow, design/update/confirm drafts, templates, save-as-template."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import Event, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine.context import ServiceContext, step_summary
from vmware_pilot.engine.decision import asked_through
from vmware_pilot.errors import (
    InvalidInput,
    StateRefused,
)
from vmware_pilot.results import (
    ConfirmDraftResult,
    CreateResult,
    DesignResult,
    DraftResult,
    FromTemplateResult,
)
from vmware_pilot.safety import gating
from vmware_pilot.safety.redaction import redact
from vmware_pilot.templates.steps import steps_from_dicts

__all__ = ["Authoring"]

W = WorkflowState


class Authoring:
    """Workflows come into being here; every plan passes the approval-gate rule before it is saved."""

    def __init__(self, core: ServiceContext) -> None:
        self.core = core

    @contextlib.contextmanager
    def _template_saved(
        self, actor: Actor, wanted: bool, name: str, description: str, wf: Workflow
    ) -> Iterator[str]:
        """Write the template (when ``wanted``) and yield its path (``""`` when not); if the block
        raises, the file is taken back, so a workflow that was not stored leaves no template."""
        if not wanted:
            yield ""
            return
        authors = [a for a in [wf.created_by, *wf.authors, actor.label] if a]
        with self.core.templates.saving(name, description, wf.steps, authors, actor.label) as path:
            yield str(path)

    # --- creation ---------------------------------------------------------------------------
    def create_workflow(
        self,
        actor: Actor,
        name: str,
        description: str,
        steps: list[dict[str, Any]],
        save_as_template: bool = False,
    ) -> CreateResult:
        if not name.strip():
            raise InvalidInput(
                "name must not be empty", field="name", hint="Give the workflow a short descriptive name."
            )
        if save_as_template:
            self.core.templates.validate_template_name(name)
        built = steps_from_dicts(steps)
        self.core.refuse_denied(built, "create")
        wf = Workflow.new(
            name, W.PENDING, built, {"description": description, "custom": True}, created_by=actor.label
        )
        asked_through(wf, actor)
        gating.enforce(
            wf, self.core.catalog, verb="save", retry="call create_workflow again with the corrected steps"
        )
        wf.log("workflow_created", f"Custom workflow with {len(wf.steps)} steps", actor.label)
        with self._template_saved(actor, save_as_template, name, description, wf) as template_file:
            self.core.runner.create(wf)
        made = CreateResult(
            workflow_id=wf.id,
            workflow_type=wf.workflow_type,
            state=wf.state,
            steps=[step_summary(s) for s in wf.steps],
            saved_as_template=bool(template_file),
            message=f"Custom workflow created. Call run_workflow('{wf.id}') to execute.",
        )
        return made.but(template_file=template_file) if template_file else made

    def design_workflow(self, actor: Actor, goal: str, constraints: str = "") -> DesignResult:
        wf = Workflow.new(
            "custom_draft",
            W.DRAFT,
            params={"goal": goal, "constraints": constraints, "custom": True},
            created_by=actor.label,
        )
        asked_through(wf, actor)
        wf.log("draft_created", f"Goal: {goal}", actor.label)
        self.core.runner.create(wf)
        return DesignResult(
            workflow_id=wf.id,
            state=wf.state,
            goal=goal,
            constraints=constraints,
            available_skills=self.core.catalog.skills(),
            next_step=(
                "Call get_skill_catalog() for the tools each skill offers, then "
                f"update_draft('{wf.id}', name=..., steps=[...]) with the steps (insert a "
                "require_approval step before anything destructive), show the draft to the user, and "
                f"call confirm_draft('{wf.id}') once they approve."
            ),
        )

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
    ) -> DraftResult:
        wf = self.core.load(workflow_id)
        self._require_draft(wf)
        # Validate before saving; a draft may be emptied, confirm_draft refuses it then.
        built = steps_from_dicts(steps, allow_empty=True) if steps is not None else None
        if built is not None:
            self.core.refuse_denied(built, "update", workflow_id)

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
            self.core.runner.vault.remember(probe)
        wf, _ = self.core.runner.commit(wf, change)
        violations = gating.gate_violations(wf, self.core.catalog)
        if violations:
            first = violations[0]
            message = (
                f"Draft saved, but confirm_draft will refuse it: {len(violations)} step(s) need a "
                f"require_approval gate before them (first: step {first['step_index']} "
                f"{first['skill']}.{first['tool']}). Insert "
                f"{gating.fix_for(violations)['step']} before step {first['step_index']}."
            )
        else:
            message = "Draft updated. Show it to the user for review. Call confirm_draft() when approved."
        return DraftResult(
            workflow_id=wf.id,
            workflow_type=wf.workflow_type,
            state=wf.state,
            steps=[
                {**step_summary(s), "has_rollback": bool(s.rollback_tool), "group_id": s.group_id}
                for s in wf.steps
            ],
            approval_gate_violations=violations,
            message=message,
        )

    def confirm_draft(
        self, actor: Actor, workflow_id: str, save_as_template: bool = False
    ) -> ConfirmDraftResult:
        wf = self.core.load(workflow_id)
        self._require_draft(wf)
        if not wf.steps:
            raise StateRefused(
                "Cannot confirm a draft with no steps. Call update_draft() first.",
                hint=f"update_draft('{wf.id}', steps=[...]) adds the steps.",
            )
        self.core.refuse_denied(wf.steps, "confirm", wf.id)
        gating.enforce(
            wf,
            self.core.catalog,
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
            self.core.templates.validate_template_name(wf.workflow_type)
        checked = wf.version

        def change(w: Workflow) -> None:
            # The rules above held for version ``checked``; confirm exactly that version. A draft
            # another caller changed meanwhile is refused, never confirmed unchecked.
            if w.version != checked:
                raise StateRefused(
                    f"Draft '{w.id}' was changed by another caller while it was being confirmed; "
                    "nothing was confirmed",
                    hint=f"Look at the draft again (get_workflow_status('{w.id}')), then call "
                    "confirm_draft again.",
                    workflow_id=w.id,
                    state=w.state.value,
                )
            fire(w, Event.CONFIRM)
            w.log("draft_confirmed", f"Confirmed with {len(w.steps)} steps", actor.label)
            w.with_author(actor.label)

        description = str(wf.params.get("description") or wf.params.get("goal") or "")
        with self._template_saved(
            actor, save_as_template, wf.workflow_type, description, wf
        ) as template_file:
            wf, _ = self.core.runner.commit(wf, change)
        confirmed = ConfirmDraftResult(
            workflow_id=wf.id,
            workflow_type=wf.workflow_type,
            state=wf.state,
            steps_count=len(wf.steps),
            saved_as_template=bool(template_file),
            message=f"Workflow confirmed. Call run_workflow('{wf.id}') to execute.",
        )
        return confirmed.but(template_file=template_file) if template_file else confirmed

    def create_workflow_from_template(
        self, actor: Actor, workflow_type: str, params: dict[str, Any]
    ) -> FromTemplateResult:
        wf = self.core.templates.create(workflow_type, params, actor.label)
        self.core.refuse_denied(wf.steps, "template")
        asked_through(wf, actor)
        wf.log("workflow_created", f"From template {workflow_type} with {len(wf.steps)} steps", actor.label)
        self.core.runner.create(wf)
        return FromTemplateResult(
            workflow_id=wf.id,
            workflow_type=wf.workflow_type,
            state=wf.state,
            steps=[step_summary(s) for s in wf.steps],
            params=redact(wf.params),
            message=f"Workflow created and saved. Call run_workflow('{wf.id}') to execute.",
        )
