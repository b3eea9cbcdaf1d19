"""What a workflow records beside its 2.4.0 record: gate records, inspections, the run owner.

These are typed fields of ``Workflow`` (``gates``, ``inspections``, ``run_owner``, ``handed_to``,
``requested_via``); ``store.codec`` keeps them in the stored document's ``extra`` object, where
3.0.0 put them, so a document reads and writes back unchanged (tests/store/test_stored_documents.py).

A record remembers which of its keys were present when read or set (pydantic's fields set), and
only those are written: a gate record the hold opened again has no digest, an approval without a
verdict no ``verdict`` key, as before. Keys a newer build added are kept as read (``extra="allow"``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from vmware_pilot.domain.clock import from_iso, iso

__all__ = [
    "Approval",
    "GateHold",
    "GatePolicy",
    "GateRecord",
    "Inspection",
    "Reference",
    "RunOwner",
    "StoredRecord",
]


def _time(value: object) -> object:
    return from_iso(value) if isinstance(value, str) else value


# A time stored as ``clock.iso`` text (``""``: none).
IsoTime = Annotated[datetime | None, BeforeValidator(_time), PlainSerializer(iso, return_type=str)]


class StoredRecord(BaseModel):
    """A record kept in the stored document: the keys it was given, in its fields' order."""

    model_config = ConfigDict(extra="allow", strict=True)

    def stored(self) -> dict[str, Any]:
        """The record as the document keeps it (only the keys it has)."""
        return self.model_dump(mode="json", exclude_unset=True)


class Approval(StoredRecord):
    """One approval of a gate. ``verdict``: the prediction it was given for
    (``safety.predict.verdict_key``); ``acknowledged_failure``: the approver's reason for approving
    despite a failing one; ``policy_digest``: the policy it was checked against."""

    approver: str
    at: IsoTime
    channel: str
    digest: str
    verdict: str = ""
    acknowledged_failure: str = ""
    policy_digest: str = ""
    comment: str = ""


class GateHold(StoredRecord):
    """Why a check before a write opened the gate that released the step again
    (engine.execution.holds); ``resumes_at`` None: a person decides."""

    kind: str
    event: str
    step: int
    message: str
    details: dict[str, Any] = Field(default_factory=dict)
    at: IsoTime = None
    resumes_at: IsoTime = None


class GatePolicy(StoredRecord):
    """The policy rule a gate follows, as the policy in force said when a run reached it
    (``engine.guard.GateRule``): its quorum and validity only tighten the gate's own options."""

    rule: str
    quorum: int = 1
    approvers: list[str] = Field(default_factory=list)
    requester_may_approve: bool = True
    max_validity_minutes: float | None = None
    policy_digest: str = ""
    step_index: int = 0
    why: list[str] = Field(default_factory=list)


class GateRecord(StoredRecord):
    """A reached gate (engine.execution.gate_records): the digest of what it releases, when it was
    reached and expires, the approvals it needs and has; ``hold`` and ``earlier`` once a check
    before a write opened it again; ``policy``: the policy rule it follows (``guard.GateRule``)."""

    index: int
    digest: str = ""
    reached_at: IsoTime = None
    expires_at: IsoTime = None
    approvals_required: int | None = None
    approvals: list[Approval] = Field(default_factory=list)
    hold: GateHold | None = None
    earlier: list[GateRecord] = Field(default_factory=list)
    policy: GatePolicy | None = None
    voided_approvals: list[Approval] = Field(default_factory=list)
    expiry_noticed_at: IsoTime = None

    @property
    def approver_names(self) -> list[str]:
        return [a.approver for a in self.approvals]

    def without_earlier(self) -> GateRecord:
        """This record as a later one keeps it among its ``earlier`` records: without its own."""
        return GateRecord.model_validate({k: v for k, v in self.stored().items() if k != "earlier"})


class Reference(StoredRecord):
    """The objects' states first read for the plan with digest ``digest`` (object key → fields
    and ``at``): what drift is told against while the plan stays as it is."""

    digest: str = ""
    targets: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Inspection(StoredRecord):
    """The last reading of a gate's targets (engine.inspection): each target's state, the write
    steps' previews, the objects each step names, the reference states kept for the plan, the
    prediction (``results.Prediction`` as JSON, with ``at``) and a hash of the reading."""

    at: IsoTime = None
    targets: list[dict[str, Any]] = Field(default_factory=list)
    previews: dict[str, dict[str, Any]] = Field(default_factory=dict)
    named: dict[str, list[str]] = Field(default_factory=dict)
    reference: Reference = Field(default_factory=Reference)
    prediction: dict[str, Any] | None = None
    reading: str = ""


class RunOwner(StoredRecord):
    """The Pilot run whose steps are in flight (ownership.py): its host, pid and lease owner."""

    host: str
    pid: int
    owner: str

    @property
    def label(self) -> str:
        """``pid N on HOST`` for messages."""
        return f"pid {self.pid} on {self.host}"
