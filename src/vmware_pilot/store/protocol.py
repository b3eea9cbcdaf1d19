"""The Store protocol the engine persists workflows through, and the shapes it returns."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.store.leases import Fence, Lease
from vmware_pilot.store.locks import Holder
from vmware_pilot.store.outbox import Claimed

if TYPE_CHECKING:  # store/tasks.py loads SQLAlchemy
    from vmware_pilot.store.tasks import TaskStore

__all__ = [
    "AuditRecord",
    "AuditReport",
    "AuditStore",
    "LeaseStore",
    "LockStore",
    "OutboxStore",
    "Store",
    "WorkflowStore",
    "WorkflowSummary",
]


class WorkflowSummary(TypedDict):
    """One row of ``list_active``/``list_all`` (docs/contract.md#list_workflows); UTC ISO-8601 times."""

    id: str
    type: str
    state: str
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One stored audit event. ``hash`` commits to ``prev_hash`` and the event's content."""

    seq: int
    workflow_id: str
    ts: str
    actor: str
    action: str
    detail: str
    prev_hash: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class AuditReport:
    """Outcome of ``verify_audit``. When not ``ok``, ``description`` names the first bad event
    and what is wrong with it; ``first_bad`` is that event (None when it is missing, e.g. the
    deleted last event). ``broken`` lists every workflow whose chain failed."""

    ok: bool
    checked: int
    workflows: int
    first_bad: AuditRecord | None = None
    description: str = ""
    broken: tuple[str, ...] = ()


class WorkflowStore(Protocol):
    """Durable workflows. No process-local cache: every ``load`` reads the store.

    ``create`` and ``save`` commit the workflow and ``wf.new_events`` at once, then fill each
    event's ``seq``/``hash``, clear ``new_events`` and bump ``wf.version``. ``save`` raises
    ConcurrencyConflict (retryable: reload and reapply) when the stored version is not
    ``wf.version``; nothing is written then. With ``fences`` (lease key, fence) it also raises
    LeaseLost (nothing written) when any of them is no longer its lease's fence (store/leases.py).
    ``notices`` go into the outbox with the change; a save that ends a workflow lets go of its
    object locks.
    """

    def create(self, wf: Workflow) -> None: ...

    def save(
        self,
        wf: Workflow,
        fences: Sequence[Fence] = (),
        notices: Sequence[tuple[str, str, bytes]] = (),
    ) -> None: ...

    def load(self, workflow_id: str) -> Workflow: ...

    def list_active(self, limit: int | None = None, offset: int = 0) -> list[WorkflowSummary]: ...

    def count_active(self) -> int: ...

    def list_all(
        self,
        limit: int | None = None,
        offset: int = 0,
        states: Sequence[WorkflowState] | None = None,
    ) -> list[WorkflowSummary]: ...

    def versions(self, workflow_ids: Collection[str]) -> dict[str, int]: ...

    def workflow_ids(self, prefix: str = "", limit: int = 100) -> list[str]: ...


class AuditStore(Protocol):
    """The stored audit events and the check of their hash chains (store/audit.py)."""

    def audit_events(self, workflow_id: str | None = None) -> Iterator[AuditRecord]: ...

    def verify_audit(self, workflow_id: str | None = None) -> AuditReport: ...


class LeaseStore(Protocol):
    """Run and step leases on the store's clock, with fences (store/leases.py)."""

    def acquire_lease(self, workflow_id: str, owner: str, seconds: float) -> int | None: ...

    def hold_leases(self, held: Sequence[tuple[str, str, int]], seconds: float) -> list[int] | None: ...

    def release_lease(self, workflow_id: str, owner: str, fence: int) -> None: ...

    def lease(self, workflow_id: str) -> Lease | None: ...


class LockStore(Protocol):
    """Object locks, all or none, tied to the holder's run lease (store/locks.py)."""

    def take_locks(self, workflow_id: str, run_key: str, keys: Sequence[str]) -> Holder | None: ...

    def lock_holders(self, workflow_id: str, keys: Sequence[str]) -> list[Holder]: ...


class OutboxStore(Protocol):
    """The notification outbox (store/outbox.py): what the webhook sender claims and settles."""

    def enqueue_notices(self, notices: Sequence[tuple[str, str, bytes]]) -> None: ...

    def claim_notice(self, lease_seconds: float) -> Claimed | None: ...

    def finish_notice(self, event_id: str, status: str, attempts: int) -> None: ...

    def retry_notice(self, event_id: str, attempts: int, delay: float) -> None: ...

    def prune_notices(self, older_than: float) -> int: ...

    def notice_counts(self) -> Mapping[str, int]: ...


class Store(Protocol):
    """What the engine persists through: the narrow stores over one database, and its clock.

    ``now`` is the store's clock (the database's; SQLite and memory: this host's), the one every
    deadline is judged on. ``shared``: other processes may use the store at once. Implemented
    by ``store.sql.SqlStore`` (SQLite, PostgreSQL) and ``store.memory.MemoryStore``.
    """

    @property
    def workflows(self) -> WorkflowStore: ...

    @property
    def audit(self) -> AuditStore: ...

    @property
    def leases(self) -> LeaseStore: ...

    @property
    def locks(self) -> LockStore: ...

    @property
    def outbox(self) -> OutboxStore: ...

    @property
    def tasks(self) -> TaskStore: ...

    @property
    def shared(self) -> bool: ...

    def now(self) -> datetime: ...

    def close(self) -> None: ...
