"""SqlStore: the Store on SQLAlchemy Core (SQLite by default), with optimistic concurrency.

Every write is one transaction: the workflow row, guarded by its expected version, and the new
audit events chained to the workflow's last event; the row's seal (``audit.seal``) then covers
the last event and the row with its document, so an edit of either fails ``verify_audit``. Every read goes to the database; nothing is
cached in the process, so another process's writes are seen at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, Row, bindparam, case, func, select, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from vmware_pilot.config import Settings
from vmware_pilot.domain.clock import from_iso, iso, utcnow
from vmware_pilot.domain.enums import TERMINAL_STATES, WorkflowState
from vmware_pilot.domain.model import AuditEntry, Workflow
from vmware_pilot.errors import (
    ConcurrencyConflict,
    CorruptRecord,
    DatabaseUnavailable,
    InvalidInput,
    PilotError,
    StoreError,
    WorkflowNotFound,
)
from vmware_pilot.store import captures, codec, leases, locks, outbox, sessions, shared, tokens
from vmware_pilot.store.audit import (
    GENESIS,
    ChainHead,
    SealedRow,
    check_chain,
    event_hash,
    numbering_problem,
    seal,
    vanished_problem,
)
from vmware_pilot.store.connection import (
    AUDIT_ORDER_LOCK,
    WRITE_OPTION,
    OutageLog,
    describe,
    make_engine,
    private_umask,
    secure_sqlite_files,
    sqlite_path,
    unavailable,
)
from vmware_pilot.store.migrations import LATEST, SchemaVersion, migrate, schema_version
from vmware_pilot.store.protocol import AuditRecord, AuditReport, WorkflowSummary
from vmware_pilot.store.tables import audit_events, workflow_counts, workflow_ledger, workflows

__all__ = ["DatabaseState", "SqlStore", "StoreGauges", "database_state", "open_store"]

_log = logging.getLogger(__name__)
_BATCH = 1000
_SUMMARY = (
    workflows.c.id,
    workflows.c.type,
    workflows.c.state,
    workflows.c.created_at,
    workflows.c.updated_at,
)
_NEWEST_FIRST = (workflows.c.created_at.desc(), workflows.c.id.desc())
# What a save wrote: the event rows and their seqs.
_Written = tuple[list[dict[str, Any]], list[int]]
# The statements of every load and save, built once: building one costs more than running it.
_CURRENT = select(workflows.c.version, workflows.c.audit_count, workflows.c.is_active).where(
    workflows.c.id == bindparam("wid")
)
_DOCUMENT = select(workflows.c.document, workflows.c.version).where(workflows.c.id == bindparam("wid"))
_EVENTS = (
    select(
        audit_events.c.seq,
        audit_events.c.ts,
        audit_events.c.actor,
        audit_events.c.action,
        audit_events.c.detail,
        audit_events.c.hash,
    )
    .where(audit_events.c.workflow_id == bindparam("wid"))
    .order_by(audit_events.c.seq)
)
_LAST_HASH = (
    select(audit_events.c.hash)
    .where(audit_events.c.workflow_id == bindparam("wid"))
    .order_by(audit_events.c.seq.desc())
    .limit(1)
)
_ACTIVE_COUNT = select(workflow_counts.c.value).where(workflow_counts.c.name == "active")
_MOVE_ACTIVE_COUNT = (
    workflow_counts.update()
    .where(workflow_counts.c.name == "active")
    .values(value=workflow_counts.c.value + bindparam("delta"))
)
_INSERT_WORKFLOW = workflows.insert()
_INSERT_LEDGER = workflow_ledger.insert()
_INSERT_EVENTS = audit_events.insert().returning(audit_events.c.seq, sort_by_parameter_order=True)
# The version guard also holds where the SELECT before it took no lock.
_UPDATE_IF_VERSION = workflows.update().where(
    workflows.c.id == bindparam("b_id"), workflows.c.version == bindparam("b_expected")
)


class _Taken(PilotError):
    """Inside ``hold_leases``: one of the leases is another owner's; undo the others."""

    def __init__(self) -> None:
        super().__init__("lease taken")


def _utc(dt: datetime) -> str:
    return iso(dt.astimezone(UTC))


def _summary(row: Row[*tuple[Any, ...]]) -> WorkflowSummary:
    return {
        "id": row.id,
        "type": row.type,
        "state": row.state,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def _record(row: Row[*tuple[Any, ...]]) -> AuditRecord:
    return AuditRecord(
        seq=row.seq,
        workflow_id=row.workflow_id,
        ts=row.ts,
        actor=row.actor,
        action=row.action,
        detail=row.detail,
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


def _sealed_row(workflow_id: str, values: Any) -> SealedRow:
    """The sealed parts of a workflow row, from its values (a dict or a result row)."""
    get = values.__getitem__ if isinstance(values, dict) else functools.partial(getattr, values)
    return SealedRow(
        workflow_id=workflow_id,
        type=get("type"),
        state=get("state"),
        is_active=bool(get("is_active")),
        created_at=get("created_at"),
        updated_at=get("updated_at"),
        created_by=get("created_by"),
        document=get("document"),
    )


def _last_hash(conn: Connection, workflow_id: str) -> str:
    """The hash of the workflow's newest audit event (GENESIS when it has none)."""
    return str(conn.execute(_LAST_HASH, {"wid": workflow_id}).scalar() or GENESIS)


def _page(limit: int | None, offset: int) -> None:
    if limit is not None and limit < 0:
        raise InvalidInput(f"limit must be 0 or more, got {limit}", field="limit", hint="Omit limit for all.")
    if offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset}", field="offset", hint="Start at 0.")


@dataclasses.dataclass(frozen=True)
class StoreGauges:
    """Workflows by state, and the notification outbox's pending rows and the oldest one's age (s)."""

    workflows_by_state: dict[str, int]
    outbox_pending: int
    outbox_oldest_age: float


class SqlStore:
    """The workflow store over one SQLAlchemy engine (see ``open_store``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # The database clock's lead over this host's, as last read (``now`` falls back on it).
        self._skew = timedelta(0)
        self._outage = OutageLog(_log, describe(engine))
        # One shared connection (an in-memory database) must not interleave transactions of
        # several threads; a pool hands each thread its own connection.
        self._serial: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if isinstance(engine.pool, StaticPool) else contextlib.nullcontext()
        )

    @property
    def engine(self) -> Engine:
        return self._engine

    # --- transactions -----------------------------------------------------------------------
    @contextlib.contextmanager
    def _tx(self, *, write: bool, single: bool = False) -> Iterator[Connection]:
        """One transaction. On PostgreSQL a read sees one snapshot (REPEATABLE READ, read only),
        so ``load`` and ``verify_audit`` never mix states of several commits. ``single``: one
        read statement, sent in autocommit on PostgreSQL (its own implicit transaction: one round
        trip instead of BEGIN, the statement and COMMIT)."""
        try:
            with self._serial, self._engine.connect() as conn:
                postgresql = self._engine.dialect.name == "postgresql"
                if write:
                    conn.execution_options(**{WRITE_OPTION: True})
                elif single and postgresql:
                    conn.execution_options(isolation_level="AUTOCOMMIT")
                elif postgresql:
                    conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
                with conn.begin():  # in autocommit, SQLAlchemy's bookkeeping only: no BEGIN is sent
                    yield conn
        except (PilotError, IntegrityError):
            raise
        except SQLAlchemyError as exc:
            error = unavailable(self._engine, exc)
            if isinstance(error, DatabaseUnavailable):
                self._outage.failed(error.message)
            raise error from exc
        self._outage.recovered()

    # --- the clock --------------------------------------------------------------------------
    def now(self) -> datetime:
        """The database's clock, aware UTC: every deadline (gate expiry, approvals' times, leases,
        the outbox) is judged on it, so replicas never compare their own clocks. SQLite: this
        host's clock. While PostgreSQL cannot be asked: this host's clock corrected by the lead
        the database's clock had at the last reading."""
        if self._engine.dialect.name != "postgresql":
            return utcnow()
        try:
            with self._tx(write=False, single=True) as conn:  # a save reads it: keep it one round trip
                value: datetime = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        except DatabaseUnavailable:
            return utcnow() + self._skew
        read = value.astimezone(UTC)
        self._skew = read - utcnow()
        return read

    # --- writes -----------------------------------------------------------------------------
    def _chain(self, wf: Workflow, head: str) -> list[dict[str, Any]]:
        rows = []
        for entry in wf.new_events:
            ts = iso(entry.ts)
            detail = codec.redact_detail(entry.detail, keep=(entry.actor, *entry.names))
            digest = event_hash(head, wf.id, ts, entry.actor, entry.action, detail)
            rows.append(
                {
                    "workflow_id": wf.id,
                    "ts": ts,
                    "actor": entry.actor,
                    "action": entry.action,
                    "detail": detail,
                    "prev_hash": head,
                    "hash": digest,
                }
            )
            head = digest
        return rows

    def _row(self, wf: Workflow, rows: list[dict[str, Any]], last: str, count: int) -> dict[str, Any]:
        """The row's values, sealed over ``last`` (the hash the new events chain from) and the row."""
        values: dict[str, Any] = {
            "type": wf.workflow_type,
            "state": wf.state.value,
            "is_active": wf.state not in TERMINAL_STATES,
            "created_at": _utc(wf.created_at),
            "updated_at": _utc(wf.updated_at),
            "created_by": wf.created_by,
            "document": codec.encode(wf),
            "audit_count": count + len(rows),
        }
        sealed = _sealed_row(wf.id, values)
        values["audit_head"] = seal(rows[-1]["hash"] if rows else last, values["audit_count"], sealed)
        return values

    @staticmethod
    def _append(conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
        """Insert the events in one statement; their seqs, in order.

        On PostgreSQL a sequence hands out numbers at INSERT, not at COMMIT; the lock held from
        here to the commit makes seq order commit order, so an export that resumes after the
        highest seq it saw misses nothing. (SQLite has one writer at a time anyway.)
        """
        if not rows:
            return []
        if conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(AUDIT_ORDER_LOCK)))
        return [int(seq) for seq in conn.execute(_INSERT_EVENTS, rows).scalars()]

    @staticmethod
    def _count_active(conn: Connection, delta: int) -> None:
        """Move the maintained active count by ``delta`` in the caller's transaction (the row
        update also orders concurrent writers that change it)."""
        if delta:
            conn.execute(_MOVE_ACTIVE_COUNT, {"delta": delta})

    @classmethod
    def _recount_active(cls, conn: Connection, wf: Workflow) -> None:
        """Move the maintained active count by what this save changes. The version guard makes
        ``wf.stored_active`` (as loaded) the stored value, so most saves cost no statement here;
        without it the stored row is read in the same statement. A save that then fails its
        guard rolls this back with it."""
        now = 0 if wf.state in TERMINAL_STATES else 1
        if wf.stored_active is not None:
            cls._count_active(conn, now - int(wf.stored_active))
            return
        stored = select(case((workflows.c.is_active, 1), else_=0)).where(workflows.c.id == wf.id)
        conn.execute(
            workflow_counts.update()
            .where(workflow_counts.c.name == "active")
            .values(value=workflow_counts.c.value + now - func.coalesce(stored.scalar_subquery(), now))
        )

    @staticmethod
    def _committed(wf: Workflow, rows: list[dict[str, Any]], seqs: list[int]) -> None:
        for entry, row, seq in zip(wf.new_events, rows, seqs, strict=True):
            entry.seq, entry.hash, entry.detail = seq, row["hash"], row["detail"]
        wf.new_events.clear()
        wf.version += 1
        wf.stored_active = wf.state not in TERMINAL_STATES

    def create(self, wf: Workflow) -> None:
        """Insert a new workflow (version 0 → 1) with its pending audit events."""
        if wf.version != 0:
            raise StoreError(
                f"Workflow '{wf.id}' is already stored (version {wf.version})",
                hint="Use save() to update a stored workflow.",
                workflow_id=wf.id,
            )
        rows = self._chain(wf, GENESIS)
        values = {"id": wf.id, "version": 1, **self._row(wf, rows, GENESIS, 0)}
        try:
            with self._tx(write=True) as conn:
                # Statements built once, values as parameters: building ``.values()`` each time cost
                # more than the INSERTs.
                conn.execute(_INSERT_WORKFLOW, values)
                conn.execute(_INSERT_LEDGER, {"workflow_id": wf.id, "created_at": values["created_at"]})
                self._count_active(conn, 1 if values["is_active"] else 0)
                seqs = self._append(conn, rows)
        except IntegrityError as exc:
            raise StoreError(
                f"Workflow id '{wf.id}' already exists",
                hint="Create the workflow again: it gets a new id.",
                workflow_id=wf.id,
            ) from exc
        self._committed(wf, rows, seqs)

    def save(
        self,
        wf: Workflow,
        fences: Sequence[leases.Fence] = (),
        notices: Sequence[tuple[str, str, bytes]] = (),
    ) -> None:
        """Update ``wf`` if the stored version is still ``wf.version``; else ConcurrencyConflict.
        With ``fences`` (lease key, fence), also only while each is still that lease's fence;
        else LeaseLost and nothing is written. ``notices`` (event id, workflow id, JSON body) go
        into the notification outbox in the same transaction (store/outbox.py)."""
        if wf.version < 1:
            raise StoreError(
                f"Workflow '{wf.id}' was never stored", hint="Use create() first.", workflow_id=wf.id
            )
        with self._tx(write=True) as conn:
            leases.check_fences(conn, wf.id, fences)
            self._recount_active(conn, wf)
            rows, seqs = self._update_as_loaded(conn, wf) or self._update_as_stored(conn, wf)
            if wf.state in TERMINAL_STATES and wf.stored_active is not False:
                locks.release_all(conn, wf.id)  # the workflow ends: its objects are free
            outbox.enqueue(conn, notices)
        self._committed(wf, rows, seqs)

    def _update_as_loaded(self, conn: Connection, wf: Workflow) -> _Written | None:
        """The usual save in two statements: the row's UPDATE and the events' INSERT, chained
        from the last event ``wf`` was loaded with. The UPDATE also requires the stored event
        count to be the loaded one, so events deleted behind vmware-pilot's back are never sealed
        over; None (nothing written) when it matched no row: ``_update_as_stored`` decides."""
        known = wf.audit_log[: len(wf.audit_log) - len(wf.new_events)]
        if any(not e.hash for e in known):
            return None
        last = known[-1].hash if known else GENESIS
        rows = self._chain(wf, last)
        values = {"version": wf.version + 1, **self._row(wf, rows, last, len(known))}
        updated = conn.execute(
            workflows.update()
            .where(
                workflows.c.id == wf.id,
                workflows.c.version == wf.version,
                workflows.c.audit_count == len(known),
            )
            .values(**values)
        )
        if updated.rowcount != 1:
            return None
        return rows, self._append(conn, rows)

    def _update_as_stored(self, conn: Connection, wf: Workflow) -> _Written:
        """The save chained from the stored last event and count (read here), or the refusal."""
        current = conn.execute(
            select(workflows.c.version, workflows.c.audit_count).where(workflows.c.id == wf.id)
        ).first()
        if current is None:
            raise WorkflowNotFound(wf.id)
        if current.version != wf.version:
            raise ConcurrencyConflict(wf.id, wf.version, current.version)
        last = _last_hash(conn, wf.id)
        rows = self._chain(wf, last)
        values = {"version": wf.version + 1, **self._row(wf, rows, last, current.audit_count)}
        # The version guard also holds where the SELECT above took no lock.
        updated = conn.execute(
            workflows.update()
            .where(workflows.c.id == wf.id, workflows.c.version == wf.version)
            .values(**values)
        )
        if updated.rowcount != 1:
            raise ConcurrencyConflict(wf.id, wf.version, None)
        return rows, self._append(conn, rows)

    # --- leases (store/leases.py) -----------------------------------------------------------
    def acquire_lease(self, workflow_id: str, owner: str, seconds: float) -> int | None:
        """Take the run lease of ``workflow_id`` for ``seconds``; its fence, or None if held."""
        with self._tx(write=True) as conn:
            return leases.acquire(conn, workflow_id, owner, seconds)

    def hold_leases(self, held: Sequence[tuple[str, str, int]], seconds: float) -> list[int] | None:
        """Keep each lease (key, owner, fence) ``seconds`` more, in one transaction (store/leases.py
        ``hold``): their fences now (a lapsed one was taken again with the next); None, and
        nothing changed, when any of them was taken by another owner."""
        try:
            with self._tx(write=True) as conn:
                kept = [leases.hold(conn, key, owner, fence, seconds) for key, owner, fence in held]
                if any(fence is None for fence in kept):
                    raise _Taken  # rolls the others back
        except _Taken:
            return None
        return [fence for fence in kept if fence is not None]

    def release_lease(self, workflow_id: str, owner: str, fence: int) -> None:
        with self._tx(write=True) as conn:
            leases.release(conn, workflow_id, owner, fence)

    def lease(self, workflow_id: str) -> leases.Lease | None:
        """The workflow's lease as stored (None: never leased)."""
        with self._tx(write=False) as conn:
            return leases.holder(conn, workflow_id)

    # --- object locks (store/locks.py) -----------------------------------------------------
    def take_locks(self, workflow_id: str, run_key: str, keys: Sequence[str]) -> locks.Holder | None:
        """Take every object of ``keys`` for ``workflow_id`` (run lease ``run_key``) or none: the
        live holder of one of them then, nothing changed."""
        with self._tx(write=True) as conn:
            return locks.take(conn, workflow_id, run_key, sorted(set(keys)))

    def lock_holders(self, workflow_id: str, keys: Sequence[str]) -> list[locks.Holder]:
        """The live holders of ``keys`` other than ``workflow_id`` (what review reports)."""
        with self._tx(write=False) as conn:
            return locks.holders(conn, workflow_id, sorted(set(keys)))

    # --- notification outbox (store/outbox.py) ---------------------------------------------
    def enqueue_notices(self, notices: Sequence[tuple[str, str, bytes]]) -> None:
        with self._tx(write=True) as conn:
            outbox.enqueue(conn, notices)

    def claim_notice(self, lease_seconds: float) -> outbox.Claimed | None:
        with self._tx(write=True) as conn:
            return outbox.claim(conn, lease_seconds)

    def finish_notice(self, event_id: str, status: str, attempts: int) -> None:
        with self._tx(write=True) as conn:
            outbox.finish(conn, event_id, status, attempts)

    def retry_notice(self, event_id: str, attempts: int, delay: float) -> None:
        with self._tx(write=True) as conn:
            outbox.retry_later(conn, event_id, attempts, delay)

    def prune_notices(self, older_than: float) -> int:
        with self._tx(write=True) as conn:
            return outbox.prune(conn, older_than)

    def notice_counts(self) -> Mapping[str, int]:
        with self._tx(write=False) as conn:
            return outbox.status_counts(conn)

    def gauges(self) -> StoreGauges:
        """What the database knows now, for the metrics (one snapshot: every replica reports the same)."""
        with self._tx(write=False) as conn:
            rows = conn.execute(select(workflows.c.state, func.count()).group_by(workflows.c.state))
            states = {str(state): int(n) for state, n in rows}
            pending = int(outbox.status_counts(conn).get("pending", 0))
            return StoreGauges(states, pending, outbox.oldest_pending_age(conn))

    # --- bearer tokens (store/tokens.py) ----------------------------------------------------
    def token_rows(self) -> list[tokens.TokenRow]:
        with self._tx(write=False) as conn:
            return tokens.rows(conn)

    def add_token(self, name: str, role: str, digest: str, created_at: str) -> bool:
        """False when a token of that name exists (also one created at the same moment elsewhere)."""
        try:
            with self._tx(write=True) as conn:
                return tokens.insert(conn, name, role, digest, created_at)
        except IntegrityError:
            return False

    def delete_token(self, name: str) -> bool:
        with self._tx(write=True) as conn:
            return tokens.delete(conn, name)

    def set_token_role(self, name: str, role: str) -> bool:
        with self._tx(write=True) as conn:
            return tokens.set_role(conn, name, role)

    # --- custom templates and the catalog cache (store/shared.py) -----------------------------
    def template_rows(self, name: str | None = None) -> list[tuple[str, str]]:
        """(name, YAML text) of every stored template (only ``name``'s when given)."""
        with self._tx(write=False) as conn:
            return shared.template_rows(conn, name)

    def template_digests(self) -> list[tuple[str, str]]:
        """(name, SHA-256 of the YAML text) of every stored template: what changed, cheaply."""
        with self._tx(write=False) as conn:
            return shared.template_digests(conn)

    def put_template(self, name: str, body: str, previous: str | None, by: str) -> bool:
        """Write template ``name`` if it still holds ``previous`` (None: if there is none); False
        when another writer got there first."""
        try:
            with self._tx(write=True) as conn:
                return shared.put_template(conn, name, body, previous, iso(datetime.now(UTC)), by)
        except IntegrityError:  # inserted by another writer at the same moment
            return False

    def delete_template(self, name: str, previous: str | None = None) -> bool:
        with self._tx(write=True) as conn:
            return shared.delete_template(conn, name, previous)

    def catalog_cache(self) -> tuple[str, str] | None:
        """(JSON text, updated_at) of the catalog cache; None before the first refresh."""
        with self._tx(write=False) as conn:
            return shared.catalog_row(conn)

    def catalog_stamp(self) -> str | None:
        # Read before every save of a run (the diff report's catalog): one round trip.
        with self._tx(write=False, single=True) as conn:
            return shared.catalog_stamp(conn)

    def put_catalog_cache(self, body: str) -> None:
        for attempt in (1, 2):
            try:
                with self._tx(write=True) as conn:
                    shared.put_catalog(conn, body, iso(datetime.now(UTC)))
                return
            except IntegrityError:  # first written by another refresh at the same moment
                if attempt == 2:
                    raise

    # --- the policy (store/shared.py) ------------------------------------------------------
    def policy_row(self) -> tuple[str, str, str, str] | None:
        """(YAML text, digest, updated_at, updated_by) of the stored policy; None without one."""
        with self._tx(write=False) as conn:
            return shared.policy_row(conn)

    def policy_stamp(self) -> str | None:
        with self._tx(write=False) as conn:
            return shared.policy_stamp(conn)

    def put_policy(self, body: str, digest: str, by: str) -> None:
        for attempt in (1, 2):
            try:
                with self._tx(write=True) as conn:
                    shared.put_policy(conn, body, digest, iso(datetime.now(UTC)), by)
                return
            except IntegrityError:  # first written by another import at the same moment
                if attempt == 2:
                    raise

    # --- captures for rehearsals on a twin (store/captures.py) -------------------------------
    def capture_rows(self, target: str | None = None) -> list[dict[str, Any]]:
        """Every stored capture's record (only ``target``'s when given), newest first; no bodies."""
        with self._tx(write=False) as conn:
            return captures.rows(conn, target)

    def capture_body(self, capture_id: str) -> bytes | None:
        """The objects folder of capture ``capture_id``, a tar.gz (None: no such capture)."""
        with self._tx(write=False) as conn:
            return captures.body(conn, capture_id)

    def put_capture(self, record: Mapping[str, Any], body: bytes) -> bool:
        """Store a capture; False when one of that id is stored already."""
        try:
            with self._tx(write=True) as conn:
                captures.put_capture(conn, record, body)
        except IntegrityError:
            return False
        return True

    def delete_capture(self, capture_id: str) -> bool:
        with self._tx(write=True) as conn:
            return captures.delete_capture(conn, capture_id)

    # --- console sessions (store/sessions.py) -----------------------------------------------
    def open_session(self, cookie: str, identity: dict[str, Any], seconds: float, keep: float) -> None:
        """Store a session for ``seconds``; sessions expired more than ``keep`` seconds ago go."""
        with self._tx(write=True) as conn:
            sessions.purge(conn, keep)
            sessions.open_session(conn, cookie, identity, seconds)

    def find_session(self, cookie: str) -> sessions.SessionRow | None:
        with self._tx(write=False) as conn:
            return sessions.find(conn, cookie)

    def close_session(self, cookie: str) -> bool:
        with self._tx(write=True) as conn:
            return sessions.close(conn, cookie)

    # --- reads ------------------------------------------------------------------------------
    def load(self, workflow_id: str) -> Workflow:
        """The stored workflow with its audit log (oldest first); tool names renamed to current."""
        with self._tx(write=False) as conn:
            row = conn.execute(_DOCUMENT, {"wid": workflow_id}).first()
            if row is None:
                raise WorkflowNotFound(workflow_id)
            events = conn.execute(_EVENTS, {"wid": workflow_id}).all()
        log = []
        for ev in events:
            try:
                ts = from_iso(ev.ts)
            except ValueError as exc:
                raise CorruptRecord(workflow_id, f"audit event {ev.seq} has a bad timestamp") from exc
            if ts is None:
                raise CorruptRecord(workflow_id, f"audit event {ev.seq} has no timestamp")
            log.append(
                AuditEntry(
                    ts=ts, action=ev.action, detail=ev.detail, actor=ev.actor, seq=ev.seq, hash=ev.hash
                )
            )
        wf = codec.decode(workflow_id, row.document, version=row.version, audit_log=log)
        wf.stored_active = wf.state not in TERMINAL_STATES
        return wf

    def list_active(self, limit: int | None = None, offset: int = 0) -> list[WorkflowSummary]:
        """Workflows not completed/failed/cancelled (drafts included), newest created first."""
        _page(limit, offset)
        query = select(*_SUMMARY).where(workflows.c.is_active.is_(True)).order_by(*_NEWEST_FIRST)
        with self._tx(write=False) as conn:
            return [_summary(r) for r in conn.execute(query.limit(limit).offset(offset or None))]

    def count_active(self) -> int:
        """The number of active workflows: one maintained row, not a scan of the table."""
        with self._tx(write=False) as conn:
            return int(conn.execute(_ACTIVE_COUNT).scalar_one())

    def list_all(
        self,
        limit: int | None = None,
        offset: int = 0,
        states: Sequence[WorkflowState] | None = None,
    ) -> list[WorkflowSummary]:
        """Every workflow (or those in ``states``), newest created first."""
        _page(limit, offset)
        query = select(*_SUMMARY).order_by(*_NEWEST_FIRST)
        if states is not None:
            query = query.where(workflows.c.state.in_([WorkflowState(s).value for s in states]))
        with self._tx(write=False) as conn:
            return [_summary(r) for r in conn.execute(query.limit(limit).offset(offset or None))]

    def versions(self, workflow_ids: Collection[str]) -> dict[str, int]:
        """The stored version of each of ``workflow_ids`` that exists: a cheap probe for changes."""
        if not workflow_ids:
            return {}
        query = select(workflows.c.id, workflows.c.version).where(workflows.c.id.in_(list(workflow_ids)))
        with self._tx(write=False) as conn:
            return {str(r.id): int(r.version) for r in conn.execute(query)}

    def workflow_ids(self, prefix: str = "", limit: int = 100) -> list[str]:
        """Ids starting with ``prefix`` (taken literally), newest created first, at most ``limit``."""
        query = select(workflows.c.id).order_by(*_NEWEST_FIRST).limit(limit)
        if prefix:
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(workflows.c.id.like(f"{escaped}%", escape="\\"))
        with self._tx(write=False) as conn:
            return [str(r.id) for r in conn.execute(query)]

    # --- audit ------------------------------------------------------------------------------
    def _require(self, conn: Connection, workflow_id: str) -> None:
        """WorkflowNotFound unless the workflow has a row, events, or was ever created (ledger)."""
        for query in (
            select(workflows.c.id).where(workflows.c.id == workflow_id),
            select(audit_events.c.seq).where(audit_events.c.workflow_id == workflow_id).limit(1),
            select(workflow_ledger.c.workflow_id).where(workflow_ledger.c.workflow_id == workflow_id),
        ):
            if conn.execute(query).first() is not None:
                return
        raise WorkflowNotFound(workflow_id)

    @staticmethod
    def _vanished(conn: Connection, workflow_id: str | None) -> list[str]:
        """Workflows the ledger knows whose row and every event are gone, in creation order."""
        ledger = workflow_ledger.c.workflow_id
        query = (
            select(ledger)
            .where(
                ledger.not_in(select(workflows.c.id)),
                ledger.not_in(select(audit_events.c.workflow_id).distinct()),
            )
            .order_by(workflow_ledger.c.created_at, ledger)
        )
        if workflow_id is not None:
            query = query.where(ledger == workflow_id)
        return [str(r[0]) for r in conn.execute(query)]

    def audit_events(self, workflow_id: str | None = None) -> Iterator[AuditRecord]:
        """Stored audit events in commit order (seq), read in batches; one workflow's when named."""
        last = 0
        while True:
            query = select(audit_events).where(audit_events.c.seq > last).order_by(audit_events.c.seq)
            if workflow_id is not None:
                query = query.where(audit_events.c.workflow_id == workflow_id)
            with self._tx(write=False) as conn:
                if workflow_id is not None and last == 0:
                    self._require(conn, workflow_id)
                batch = [_record(r) for r in conn.execute(query.limit(_BATCH))]
            yield from batch
            if len(batch) < _BATCH:
                return
            last = batch[-1].seq

    def _events_of(self, conn: Connection, ids: Sequence[str]) -> dict[str, list[AuditRecord]]:
        grouped: dict[str, list[AuditRecord]] = {i: [] for i in ids}
        query = (
            select(audit_events)
            .where(audit_events.c.workflow_id.in_(ids))
            .order_by(audit_events.c.workflow_id, audit_events.c.seq)
        )
        for r in conn.execute(query):
            grouped[r.workflow_id].append(_record(r))
        return grouped

    @staticmethod
    def _heads_of(conn: Connection, ids: Sequence[str]) -> dict[str, ChainHead]:
        """Seal, event count and sealed parts of each stored row among ``ids``."""
        query = select(
            workflows.c.id,
            workflows.c.audit_head,
            workflows.c.audit_count,
            workflows.c.type,
            workflows.c.state,
            workflows.c.is_active,
            workflows.c.created_at,
            workflows.c.updated_at,
            workflows.c.created_by,
            workflows.c.document,
        ).where(workflows.c.id.in_(ids))
        return {
            r.id: ChainHead(r.audit_head, r.audit_count, _sealed_row(r.id, r)) for r in conn.execute(query)
        }

    @staticmethod
    def _numbering(conn: Connection) -> str:
        """SQLite issues seq 1, 2, 3… (a rolled-back insert gives its number back), and audit
        events are never deleted, so a gap or a lower highest seq means events were deleted."""
        if conn.dialect.name != "sqlite":
            return ""
        seq = audit_events.c.seq
        count, highest = conn.execute(select(func.count(), func.max(seq))).one()
        issued = conn.execute(text("SELECT seq FROM sqlite_sequence WHERE name = 'audit_events'")).scalar()
        highest, issued = int(highest or 0), int(issued or 0)
        gap = None
        if count != highest:
            lowest = conn.execute(select(func.min(seq))).scalar()
            later = audit_events.alias("later")
            # The first missing number: 1, or the one after the lowest seq with no successor.
            before_gap = conn.execute(
                select(func.min(seq)).where(
                    seq < highest, ~select(later.c.seq).where(later.c.seq == seq + 1).exists()
                )
            ).scalar()
            start = (
                1 if lowest is not None and lowest > 1 else (None if before_gap is None else before_gap + 1)
            )
            end = None if start is None else conn.execute(select(func.min(seq)).where(seq > start)).scalar()
            if start is not None and end is not None:
                gap = (int(start), int(end) - 1)
        return numbering_problem(gap, highest, issued)

    def verify_audit(self, workflow_id: str | None = None) -> AuditReport:
        """Check every workflow's hash chain (or one's); the report names the first bad event."""
        with self._tx(write=False) as conn:
            if workflow_id is not None:
                self._require(conn, workflow_id)
            ids_query = select(workflows.c.id)
            orphans_query = select(audit_events.c.workflow_id).distinct()
            if workflow_id is not None:
                ids_query = ids_query.where(workflows.c.id == workflow_id)
                orphans_query = orphans_query.where(audit_events.c.workflow_id == workflow_id)
            stored = {r.id for r in conn.execute(ids_query)}
            orphans = orphans_query.where(audit_events.c.workflow_id.not_in(select(workflows.c.id)))
            ids = sorted(stored | {r.workflow_id for r in conn.execute(orphans)})
            checked, first, broken = 0, None, []
            for start in range(0, len(ids), _BATCH // 10):
                chunk = ids[start : start + _BATCH // 10]  # rows carry whole documents: smaller batches
                heads = self._heads_of(conn, chunk)
                for wid, events in self._events_of(conn, chunk).items():
                    checked += len(events)
                    problem = check_chain(wid, events, heads.get(wid))
                    if problem is not None:
                        broken.append(wid)
                        first = first or problem
            vanished = self._vanished(conn, workflow_id)
            gone = self._numbering(conn) if first is None and workflow_id is None else ""
        if (vanished or gone) and first is None:
            # SQLite's numbering names the missing seqs; the ledger names the workflows.
            return AuditReport(
                ok=False,
                checked=checked,
                workflows=len(ids) + len(vanished),
                description=gone or vanished_problem(vanished),
                broken=tuple(vanished),
            )
        if first is None:
            return AuditReport(ok=True, checked=checked, workflows=len(ids))
        return AuditReport(
            ok=False,
            checked=checked,
            workflows=len(ids),
            first_bad=first.record,
            description=first.description,
            broken=tuple(broken),
        )

    def schema_version(self) -> SchemaVersion:
        """The schema the database records now (raises ``StoreError`` when unreachable)."""
        with self._tx(write=False) as conn:
            return schema_version(conn)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class DatabaseState:
    """What `vmware-pilot doctor` reads of the database, without creating or migrating it."""

    exists: bool
    version: int  # the migrations applied
    needed: int  # the oldest schema a build must know to use it
    latest: int
    clock_skew: float  # the database's clock minus this host's, in seconds


def database_state(settings: Settings) -> DatabaseState:
    """The schema version and clock of the database ``settings`` name (a SQLite file not created
    yet is reported as such and left uncreated); raises ``StoreError`` when it cannot be reached."""
    url = settings.resolved_database_url
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return DatabaseState(False, 0, 0, LATEST, 0.0)
    engine = make_engine(url, settings)
    try:
        with engine.connect() as conn:
            version = schema_version(conn)
            clock = conn.execute(text(f"SELECT {leases.db_clock(conn)}")).scalar()
            skew = float(clock) - time.time() if clock is not None else 0.0
    except SQLAlchemyError as exc:
        raise unavailable(engine, exc) from exc
    finally:
        engine.dispose()
    return DatabaseState(True, version.applied, version.needed, LATEST, skew)


def open_store(settings: Settings) -> SqlStore:
    """Open (creating and migrating as needed) the store at ``settings.resolved_database_url``.

    The pilot home is created 0700; a SQLite database and its WAL files are kept 0600.
    """
    home = settings.home_path
    url = settings.resolved_database_url
    path = sqlite_path(url)
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path is not None:
            secure_sqlite_files(path)
    except OSError as exc:
        where = "the pilot home" if path is None or path.parent == home else "the database folder"
        raise StoreError(
            f"Cannot open the workflow store: {where} cannot be used ({exc})",
            hint="Point VMWARE_PILOT_HOME (or VMWARE_PILOT_DATABASE_URL) at a folder you can write, "
            "or fix the permissions of the one named.",
        ) from exc
    try:
        home.chmod(0o700)
    except OSError as exc:
        _log.warning("cannot make %s private (mode 0700): %s", home, exc)
    engine = make_engine(url, settings)
    store = SqlStore(engine)
    try:
        with private_umask(), store._tx(write=True) as conn:
            migrate(conn)
    except (PilotError, IntegrityError) as exc:
        engine.dispose()
        if isinstance(exc, IntegrityError):
            raise unavailable(engine, exc) from exc
        raise
    if path is not None:
        secure_sqlite_files(path)
    return store
