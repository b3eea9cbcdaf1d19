"""What every part of the application service shares: its dependencies, per-workflow locks,
detached runs and loading. ``PilotService``, ``Authoring`` and ``Lifecycle`` each hold one
``ServiceContext`` (composition, not a chain of base classes)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Step, Workflow
from vmware_pilot.engine import guard
from vmware_pilot.engine.execution.runner import Runner
from vmware_pilot.engine.policy import ApprovalPolicy
from vmware_pilot.errors import (
    CorruptRecord,
    PilotError,
    StateRefused,
)
from vmware_pilot.results import BlastRadius
from vmware_pilot.safety import gating
from vmware_pilot.store.protocol import Store
from vmware_pilot.templates.registry import TemplateRegistry

__all__ = ["ServiceContext", "step_summary"]

W = WorkflowState
T = TypeVar("T")


def step_summary(step: Step) -> dict[str, Any]:
    return {"index": step.index, "action": step.action, "skill": step.skill, "tool": step.tool}


class ServiceContext:
    """Store, catalog, templates, runner and approvals policy, and the helpers every operation uses."""

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
    def busy(self, workflow_id: str) -> bool:
        """Whether a run, approval or rollback of ``workflow_id`` holds this Pilot's lock now."""
        lock = self._locks.get(workflow_id)
        return lock is not None and lock.locked()

    @contextlib.asynccontextmanager
    async def exclusive(self, wf: Workflow, verb: str) -> AsyncIterator[None]:
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

    async def detached(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` as a task of its own: a caller that disconnects or times out does not stop it."""
        task = asyncio.create_task(work)
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)
        return await asyncio.shield(task)

    async def drain(self) -> None:
        """Wait for runs still going (e.g. after their client left) before shutting down."""
        while self._runs:
            await asyncio.gather(*list(self._runs), return_exceptions=True)

    def load(self, workflow_id: str) -> Workflow:
        return self.store.workflows.load(workflow_id)

    def refuse_denied(self, steps: Sequence[Step], door: str, workflow_id: str = "") -> None:
        """Refuse (``PolicyRefused``) steps the policy in force denies, at ``door`` (guard.DOORS)."""
        guard.refuse_denied(self.runner.policy(), steps, self.catalog, door, workflow_id)

    def is_custom(self, wf: Workflow) -> bool:
        return gating.is_custom_workflow(wf, self.templates.builtin_names())

    def load_for_gate(self, workflow_id: str) -> Workflow:
        try:
            return self.load(workflow_id)
        except CorruptRecord as exc:
            raise PilotError(
                exc.message,
                hint=exc.hint,
                workflow_id=workflow_id,
                blast_radius={"blockers": [], "unmeasured": [exc.reason]},
            ) from exc

    def refuse_unless_clear(self, verb: str, wf: Workflow, radius: BlastRadius) -> None:
        """Refuse to act on blockers, unmeasured steps, or a step another live Pilot is running."""
        for step in wf.steps:
            if step.status is StepStatus.RUNNING:  # acknowledging unknown effects is no licence here
                self.runner.refuse_if_running_elsewhere(wf, step)
        reasons = [*radius.blockers, *radius.unmeasured]
        if reasons:
            raise StateRefused(
                f"Refusing to {verb} workflow '{wf.id}': {'; '.join(reasons)}. Nothing was changed. "
                f"Resolve that first (get_workflow_status('{wf.id}') shows every step), then preview again.",
                workflow_id=wf.id,
                state=wf.state.value,
                blast_radius=radius.payload(),
            )
