"""MemoryStore: the ``Store`` protocol in this process's memory (nothing durable, one process).

For tests and embedders that need no database: the same rules as ``SqlStore`` (optimistic
concurrency by version, the audit chain sealed over each row with the same hashes, run leases
with fences on the store's clock, object locks all or none, the outbox), kept in dicts under one
lock. ``tests/store/test_store_contract.py`` runs the same contract against it, SQLite and
PostgreSQL. Documents go through the codec both ways, so a loaded workflow is a copy with its
secrets masked, as from a database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from vmware_pilot.domain.clock import utcnow
from vmware_pilot.domain.enums import TERMINAL_STATES, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.errors import ConcurrencyConflict, StoreError, WorkflowNotFound
from vmware_pilot.store.audit import GENESIS, ChainHead
from vmware_pilot.store.leases import Fence, Lease, LeaseLost
from vmware_pilot.store.locks import Holder
from vmware_pilot.store.outbox import Claimed
from vmware_pilot.store.protocol import AuditRecord, AuditReport, WorkflowSummary
from vmware_pilot.store.tasks import MemoryTaskRows
from vmware_pilot.store.trail import chain_report
from vmware_pilot.store.workflows import (
    chain_rows,
    check_page,
    committed,
    loaded,
    refuse_stored,
    row_values,
    sealed_row,
    summary_of,
)

__all__ = ["MemoryStore"]

_LOCKING = {"running", "pending", "awaiting_approval", "rolling_back"}
_BREAKER = "object-lock:"


@dataclass
class _LeaseRow:
    owner: str
    fence: int
    expires_at: float


@dataclass
class _State:
    """Everything a MemoryStore holds; ``lock`` makes each operation one transaction."""

    clock: Callable[[], datetime]
    lock: threading.RLock = field(default_factory=threading.RLock)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    ledger: set[str] = field(default_factory=set)
    events: list[AuditRecord] = field(default_factory=list)
    leases: dict[str, _LeaseRow] = field(default_factory=dict)
    locks: dict[str, tuple[str, str]] = field(default_factory=dict)  # object → (workflow, run key)
    notices: dict[str, dict[str, Any]] = field(default_factory=dict)

    def seconds(self) -> float:
        return self.clock().timestamp()

    def events_of(self, workflow_id: str) -> list[AuditRecord]:
        return [e for e in self.events if e.workflow_id == workflow_id]


class MemoryWorkflows:
    def __init__(self, state: _State) -> None:
        self._s = state

    def _append(self, rows: list[dict[str, Any]]) -> list[int]:
        seqs = []
        for row in rows:
            seq = (self._s.events[-1].seq if self._s.events else 0) + 1
            self._s.events.append(AuditRecord(seq=seq, **row))
            seqs.append(seq)
        return seqs

    def create(self, wf: Workflow) -> None:
        refuse_stored(wf)
        rows = chain_rows(wf, GENESIS)
        with self._s.lock:
            if wf.id in self._s.ledger:
                raise StoreError(
                    f"Workflow id '{wf.id}' already exists",
                    hint="Create the workflow again: it gets a new id.",
                    workflow_id=wf.id,
                )
            self._s.rows[wf.id] = {"id": wf.id, "version": 1, **row_values(wf, rows, GENESIS, 0)}
            self._s.ledger.add(wf.id)
            seqs = self._append(rows)
        committed(wf, rows, seqs)

    def save(
        self,
        wf: Workflow,
        fences: Sequence[Fence] = (),
        notices: Sequence[tuple[str, str, bytes]] = (),
    ) -> None:
        if wf.version < 1:
            raise StoreError(
                f"Workflow '{wf.id}' was never stored", hint="Use create() first.", workflow_id=wf.id
            )
        with self._s.lock:
            for key, fence in fences:
                current = self._s.leases.get(key)
                if current is None or current.fence != fence:
                    raise LeaseLost(wf.id, fence, current.fence if current else None)
            stored = self._s.rows.get(wf.id)
            if stored is None:
                raise WorkflowNotFound(wf.id)
            if stored["version"] != wf.version:
                raise ConcurrencyConflict(wf.id, wf.version, stored["version"])
            events = self._s.events_of(wf.id)
            last = events[-1].hash if events else GENESIS
            rows = chain_rows(wf, last)
            values = row_values(wf, rows, last, len(events))
            MemoryOutbox(self._s).enqueue_notices(notices)  # refused before anything is written
            self._s.rows[wf.id] = {"id": wf.id, "version": wf.version + 1, **values}
            if wf.state in TERMINAL_STATES:  # the workflow ends: its objects are free
                self._s.locks = {k: v for k, v in self._s.locks.items() if v[0] != wf.id}
            seqs = self._append(rows)
        committed(wf, rows, seqs)

    def load(self, workflow_id: str) -> Workflow:
        with self._s.lock:
            row = self._s.rows.get(workflow_id)
            if row is None:
                raise WorkflowNotFound(workflow_id)
            events = self._s.events_of(workflow_id)
        return loaded(workflow_id, row["document"], row["version"], events)

    def _newest_first(self, keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        with self._s.lock:
            rows = [r for r in self._s.rows.values() if keep(r)]
        return sorted(rows, key=lambda r: (r["created_at"], r["id"]), reverse=True)

    def list_active(self, limit: int | None = None, offset: int = 0) -> list[WorkflowSummary]:
        check_page(limit, offset)
        rows = self._newest_first(lambda r: bool(r["is_active"]))
        return [summary_of(SimpleNamespace(**r)) for r in rows[offset:][:limit]]

    def count_active(self) -> int:
        return len(self._newest_first(lambda r: bool(r["is_active"])))

    def list_all(
        self,
        limit: int | None = None,
        offset: int = 0,
        states: Sequence[WorkflowState] | None = None,
    ) -> list[WorkflowSummary]:
        check_page(limit, offset)
        wanted = None if states is None else {WorkflowState(s).value for s in states}
        rows = self._newest_first(lambda r: wanted is None or r["state"] in wanted)
        return [summary_of(SimpleNamespace(**r)) for r in rows[offset:][:limit]]

    def versions(self, workflow_ids: Collection[str]) -> dict[str, int]:
        with self._s.lock:
            return {i: int(self._s.rows[i]["version"]) for i in workflow_ids if i in self._s.rows}

    def workflow_ids(self, prefix: str = "", limit: int = 100) -> list[str]:
        rows = self._newest_first(lambda r: str(r["id"]).startswith(prefix))
        return [str(r["id"]) for r in rows[:limit]]


class MemoryAudit:
    def __init__(self, state: _State) -> None:
        self._s = state

    def _require(self, workflow_id: str) -> None:
        if workflow_id not in self._s.ledger and not self._s.events_of(workflow_id):
            raise WorkflowNotFound(workflow_id)

    def audit_events(self, workflow_id: str | None = None) -> Iterator[AuditRecord]:
        with self._s.lock:
            if workflow_id is not None:
                self._require(workflow_id)
            events = [e for e in self._s.events if workflow_id is None or e.workflow_id == workflow_id]
        yield from events

    def verify_audit(self, workflow_id: str | None = None) -> AuditReport:
        with self._s.lock:
            if workflow_id is not None:
                self._require(workflow_id)
            ids = sorted({*self._s.rows, *(e.workflow_id for e in self._s.events)})
            if workflow_id is not None:
                ids = [i for i in ids if i == workflow_id]
            heads = {
                i: ChainHead(r["audit_head"], r["audit_count"], sealed_row(i, r))
                for i, r in self._s.rows.items()
            }
            chains = [(i, self._s.events_of(i), heads.get(i)) for i in ids]
            vanished = sorted(i for i in self._s.ledger - set(ids) if workflow_id is None or i == workflow_id)
        return chain_report(chains, len(ids), vanished)


class MemoryLeases:
    def __init__(self, state: _State) -> None:
        self._s = state

    def acquire_lease(self, workflow_id: str, owner: str, seconds: float) -> int | None:
        with self._s.lock:
            now = self._s.seconds()
            row = self._s.leases.get(workflow_id)
            if row is None:
                self._s.leases[workflow_id] = _LeaseRow(owner, 1, now + seconds)
                return 1
            if row.expires_at > now and row.owner != owner:
                return None
            row.owner, row.fence, row.expires_at = owner, row.fence + 1, now + seconds
            return row.fence

    def hold_leases(self, held: Sequence[tuple[str, str, int]], seconds: float) -> list[int] | None:
        with self._s.lock:
            now = self._s.seconds()
            rows = [self._s.leases.get(key) for key, _, _ in held]
            if any(
                row is None or row.owner != owner or row.fence < fence
                for row, (_, owner, fence) in zip(rows, held, strict=True)
            ):
                return None
            kept = []
            for row in rows:
                assert row is not None
                if row.expires_at <= now:
                    row.fence += 1
                row.expires_at = now + seconds
                kept.append(row.fence)
            return kept

    def release_lease(self, workflow_id: str, owner: str, fence: int) -> None:
        with self._s.lock:
            row = self._s.leases.get(workflow_id)
            if row is not None and row.owner == owner and row.fence == fence:
                row.expires_at = 0.0

    def lease(self, workflow_id: str) -> Lease | None:
        with self._s.lock:
            row = self._s.leases.get(workflow_id)
            return None if row is None else Lease(row.owner, row.fence, row.expires_at - self._s.seconds())


class MemoryLocks:
    def __init__(self, state: _State) -> None:
        self._s = state

    def _rows(self, me: str, keys: Sequence[str]) -> list[tuple[Holder, str, bool]]:
        now, found = self._s.seconds(), []
        for key in sorted(set(keys)):
            workflow_id, run = self._s.locks.get(key, (me, ""))
            row = self._s.rows.get(workflow_id)
            if workflow_id == me or row is None or row["state"] not in _LOCKING:
                continue
            lease = self._s.leases.get(run)
            lapsed = row["state"] in ("running", "pending") and (lease is None or lease.expires_at <= now)
            found.append((Holder(key, workflow_id, row["state"], row["created_by"]), run, lapsed))
        return found

    def take_locks(self, workflow_id: str, run_key: str, keys: Sequence[str]) -> Holder | None:
        with self._s.lock:
            rows = self._rows(workflow_id, keys)
            live = next((h for h, _, lapsed in rows if not lapsed), None)
            if live is not None:
                return live
            now = self._s.seconds()
            for run in sorted({run for _, run, lapsed in rows if lapsed}):
                lease = self._s.leases.get(run)
                if lease is not None and lease.expires_at <= now:
                    lease.owner, lease.fence = _BREAKER + workflow_id, lease.fence + 1
            wanted = set(keys)
            self._s.locks = {k: v for k, v in self._s.locks.items() if v[0] != workflow_id or k in wanted}
            for key in wanted:
                self._s.locks[key] = (workflow_id, run_key)
            return None

    def lock_holders(self, workflow_id: str, keys: Sequence[str]) -> list[Holder]:
        with self._s.lock:
            return [h for h, _, lapsed in self._rows(workflow_id, keys) if not lapsed]


class MemoryOutbox:
    def __init__(self, state: _State) -> None:
        self._s = state

    def enqueue_notices(self, notices: Sequence[tuple[str, str, bytes]]) -> None:
        with self._s.lock:
            now = self._s.seconds()
            for event_id, workflow_id, body in notices:
                if event_id in self._s.notices:
                    raise StoreError(f"notification {event_id} is queued already", hint="Use a new event id.")
                self._s.notices[event_id] = {
                    "workflow_id": workflow_id,
                    "body": body,
                    "created_at": now,
                    "next_at": now,
                    "claimed_until": 0.0,
                    "attempts": 0,
                    "status": "pending",
                }

    def claim_notice(self, lease_seconds: float) -> Claimed | None:
        with self._s.lock:
            now = self._s.seconds()
            due = sorted(
                (n["created_at"], event_id)
                for event_id, n in self._s.notices.items()
                if n["status"] == "pending" and n["next_at"] <= now and n["claimed_until"] <= now
            )
            if not due:
                return None
            event_id = due[0][1]
            notice = self._s.notices[event_id]
            notice["claimed_until"] = now + lease_seconds
            return Claimed(event_id, notice["body"], notice["attempts"])

    def finish_notice(self, event_id: str, status: str, attempts: int) -> None:
        with self._s.lock:
            if event_id in self._s.notices:
                self._s.notices[event_id].update(status=status, attempts=attempts, claimed_until=0.0)

    def retry_notice(self, event_id: str, attempts: int, delay: float) -> None:
        with self._s.lock:
            if event_id in self._s.notices:
                next_at = self._s.seconds() + delay
                self._s.notices[event_id].update(attempts=attempts, next_at=next_at, claimed_until=0.0)

    def prune_notices(self, older_than: float) -> int:
        with self._s.lock:
            cutoff = self._s.seconds() - older_than
            gone = [
                e
                for e, n in self._s.notices.items()
                if n["status"] in ("delivered", "dropped") and n["created_at"] < cutoff
            ]
            for event_id in gone:
                del self._s.notices[event_id]
            return len(gone)

    def notice_counts(self) -> Mapping[str, int]:
        with self._s.lock:
            counts: dict[str, int] = {}
            for n in self._s.notices.values():
                counts[n["status"]] = counts.get(n["status"], 0) + 1
            return counts


class MemoryStore:
    """The ``Store`` protocol in memory; ``clock`` is its clock (this host's by default)."""

    shared = False  # one process

    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        state = _State(clock)
        self._clock = clock
        self.workflows = MemoryWorkflows(state)
        self.audit = MemoryAudit(state)
        self.leases = MemoryLeases(state)
        self.locks = MemoryLocks(state)
        self.outbox = MemoryOutbox(state)
        self.tasks = MemoryTaskRows(clock)

    def now(self) -> datetime:
        return self._clock()

    def close(self) -> None:
        """Nothing to release: the data goes with the object."""
