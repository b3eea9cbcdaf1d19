"""PilotService: the operations behind the 13 MCP tools and the operator CLI.

Every method returns the reference-shaped result dict (reference §2.1-2.13) or raises a
``PilotError`` whose ``payload()`` is the refusal body. Results may carry ``error`` (e.g. a run
that ends ``failed``): the server marks those ``isError`` by the reference rule.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from vmware_pilot.domain.actor import Actor

__all__ = ["PilotService", "ProgressFn"]

# progress(done, total, message) — forwarded as MCP progress notifications when asked for.
ProgressFn = Callable[[float, float | None, str], Awaitable[None]]


class PilotService:
    """Facade over store, catalog, templates, safety rules and the runner."""

    # --- creation ---------------------------------------------------------------------------
    def create_workflow(
        self,
        actor: Actor,
        name: str,
        description: str,
        steps: list[dict[str, Any]],
        save_as_template: bool = False,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def design_workflow(self, actor: Actor, goal: str, constraints: str = "") -> dict[str, Any]:
        raise NotImplementedError

    def update_draft(
        self,
        actor: Actor,
        workflow_id: str,
        name: str = "",
        description: str = "",
        steps: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def confirm_draft(self, actor: Actor, workflow_id: str, save_as_template: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def create_workflow_from_template(
        self, actor: Actor, workflow_type: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        raise NotImplementedError

    # --- execution --------------------------------------------------------------------------
    async def run_workflow(
        self, actor: Actor, workflow_id: str, force: bool = False, progress: ProgressFn | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def approve(
        self,
        actor: Actor,
        workflow_id: str,
        approver: str = "",
        acknowledge_not_executed: bool = False,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def rollback(
        self,
        actor: Actor,
        workflow_id: str,
        confirm: bool = False,
        acknowledge_unknown_effects: bool = False,
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def cancel_workflow(
        self,
        actor: Actor,
        workflow_id: str,
        reason: str = "",
        confirm: bool = False,
        acknowledge_unknown_effects: bool = False,
    ) -> dict[str, Any]:
        raise NotImplementedError

    # --- reads ------------------------------------------------------------------------------
    def review_workflow(self, workflow_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def get_workflow_status(self, workflow_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def list_workflows(self, limit: int | None = None, offset: int = 0) -> dict[str, Any]:
        raise NotImplementedError

    def get_skill_catalog(self) -> dict[str, Any]:
        raise NotImplementedError
