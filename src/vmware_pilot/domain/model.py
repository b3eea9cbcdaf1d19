"""Workflow and Step and their serialized form (docs/contract.md#the-workflow-record, #steps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vmware_pilot.domain.clock import iso, new_workflow_id, utcnow
from vmware_pilot.domain.enums import GATE_ACTION, StepStatus, WorkflowState
from vmware_pilot.domain.records import GateRecord, Inspection, RunOwner

__all__ = ["AuditEntry", "Step", "Workflow"]


@dataclass(slots=True)
class Step:
    index: int
    action: str
    skill: str
    tool: str
    params: dict[str, Any] = field(default_factory=dict)
    status: StepStatus = StepStatus.PENDING
    result: Any = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    rollback_tool: str = ""
    rollback_params: dict[str, Any] = field(default_factory=dict)
    group_id: str = ""

    @property
    def is_gate(self) -> bool:
        return self.action == GATE_ACTION

    def ref(self) -> dict[str, Any]:
        """The short ``{index, skill, tool}`` form used in lists of steps."""
        return {"index": self.index, "skill": self.skill, "tool": self.tool}

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "action": self.action,
            "skill": self.skill,
            "tool": self.tool,
            "params": self.params,
            "status": self.status.value,
            "result": self.result,
            "started_at": iso(self.started_at),
            "completed_at": iso(self.completed_at),
            "rollback_tool": self.rollback_tool,
            "rollback_params": self.rollback_params,
            "group_id": self.group_id,
        }


@dataclass(slots=True)
class AuditEntry:
    """One per-workflow audit event. ``seq``/``hash`` are filled once the store committed it."""

    ts: datetime
    action: str
    detail: str
    actor: str = ""
    seq: int | None = None
    hash: str = ""
    # Callers named in ``detail`` (``token:dave``): identities, kept as written when the store
    # masks secret shapes in the text. Not stored: the stored detail is what was kept.
    names: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"ts": iso(self.ts), "action": self.action, "detail": self.detail, "actor": self.actor}


@dataclass(slots=True)
class Workflow:
    """A workflow. Its state changes only through ``domain.transitions.fire``.

    ``version`` is the store's optimistic-concurrency counter (0: never saved). vmware-pilot 3
    additions that have no place in the 2.4.0 record (domain/records.py; stored under the
    document's ``extra`` object): ``gates`` (gate index → record: digest, expiry, approvals),
    ``inspections`` (gate index → the last reading of its targets), ``handed_to`` (step index →
    the caller a step was handed to, engine/handout.py), ``run_owner`` (the run with steps in
    flight), ``requested_via`` (the agent the creator asked through). ``newer_keys``: keys of the
    stored ``extra`` a newer build wrote, kept as read; ``stored_keys``: that object's key order
    as read, kept so a document read and saved unchanged is the same text.
    Audit entries appended with ``log`` wait in ``new_events`` until the store commits them.
    """

    id: str
    workflow_type: str
    _state: WorkflowState
    steps: list[Step] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    approved_by: str = ""
    diff_report: dict[str, Any] = field(default_factory=dict)
    audit_log: list[AuditEntry] = field(default_factory=list)
    blocked_reason: str = ""
    rollback_results: list[dict[str, Any]] = field(default_factory=list)
    created_by: str = ""
    authors: list[str] = field(default_factory=list)
    gates: dict[int, GateRecord] = field(default_factory=dict)
    inspections: dict[int, Inspection] = field(default_factory=dict)
    handed_to: dict[int, str] = field(default_factory=dict)
    run_owner: RunOwner | None = None
    requested_via: str = ""
    newer_keys: dict[str, Any] = field(default_factory=dict)
    stored_keys: tuple[str, ...] = ()
    version: int = 0
    new_events: list[AuditEntry] = field(default_factory=list)
    # Whether the stored row is active, as the store last read or wrote it (None: not known);
    # lets a save move the maintained active count without reading the row again.
    stored_active: bool | None = None

    @classmethod
    def new(
        cls,
        workflow_type: str,
        state: WorkflowState,
        steps: list[Step] | None = None,
        params: dict[str, Any] | None = None,
        created_by: str = "",
        authors: list[str] | None = None,
        now: datetime | None = None,
    ) -> Workflow:
        now = now or utcnow()
        return cls(
            id=new_workflow_id(now),
            workflow_type=workflow_type,
            _state=state,
            steps=list(steps or []),
            params=dict(params or {}),
            created_at=now,
            updated_at=now,
            created_by=created_by,
            authors=list(authors or []),
        )

    @property
    def state(self) -> WorkflowState:
        return self._state

    def _set_state(self, state: WorkflowState) -> None:
        self._state = state

    def log(
        self,
        action: str,
        detail: str = "",
        actor: str = "",
        names: tuple[str, ...] = (),
        at: datetime | None = None,
    ) -> AuditEntry:
        """Append an audit event (committed with the next save) and bump ``updated_at``.

        ``names``: the callers ``detail`` names (approvers, a rejecter), kept unmasked at rest.
        ``at``: the event's time when the caller already read the clock (the conductor reads none)."""
        entry = AuditEntry(
            ts=at if at is not None else utcnow(), action=action, detail=detail, actor=actor, names=names
        )
        self.audit_log.append(entry)
        self.new_events.append(entry)
        self.updated_at = entry.ts
        return entry

    def with_author(self, who: str) -> None:
        if who and who != self.created_by and who not in self.authors:
            self.authors.append(who)

    def to_dict(self) -> dict[str, Any]:
        """The serialized record, keys in the contract's order."""
        return {
            "id": self.id,
            "workflow_type": self.workflow_type,
            "state": self.state.value,
            "steps": [s.to_dict() for s in self.steps],
            "params": self.params,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "approved_by": self.approved_by,
            "diff_report": self.diff_report,
            "audit_log": [e.to_dict() for e in self.audit_log],
            "blocked_reason": self.blocked_reason,
            "rollback_results": self.rollback_results,
            "created_by": self.created_by,
            "authors": list(self.authors),
        }
