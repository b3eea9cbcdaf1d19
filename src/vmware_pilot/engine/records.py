"""The stored workflows as the doors read them: the one way a door (the CLI, the console, the MCP
server's resources and completions) reads the store, so that nothing goes around the service."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.store import Store, WorkflowSummary

__all__ = ["Records"]


class Records:
    """Reads of the store for the doors; ``Store`` itself is the engine's."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def load(self, workflow_id: str) -> Workflow:
        """The workflow (``WorkflowNotFound`` for an unknown id)."""
        return self._store.workflows.load(workflow_id)

    def now(self) -> datetime:
        """The database's clock (``Store.now``)."""
        return self._store.now()

    def list_all(
        self, limit: int | None = None, offset: int = 0, states: Sequence[WorkflowState] | None = None
    ) -> list[WorkflowSummary]:
        """One page of every workflow (in ``states``), newest first."""
        return self._store.workflows.list_all(limit, offset, states)

    def versions(self, workflow_ids: Collection[str]) -> dict[str, int]:
        """The stored version of each workflow that exists."""
        return self._store.workflows.versions(workflow_ids)

    def workflow_ids(self, prefix: str = "", limit: int = 100) -> list[str]:
        """Workflow ids starting with ``prefix``, at most ``limit``."""
        return self._store.workflows.workflow_ids(prefix, limit)

    def audit_trail(self, workflow_id: str) -> dict[str, Any]:
        """The workflow's audit events and whether its hash chain is intact (``WorkflowNotFound``
        for an unknown id)."""
        self._store.workflows.load(workflow_id)
        report = self._store.audit.verify_audit(workflow_id)
        events = [r.to_dict() for r in self._store.audit.audit_events(workflow_id)]
        return {"workflow_id": workflow_id, "intact": report.ok, "events": events}
