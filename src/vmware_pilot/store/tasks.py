"""MCP tasks as rows (the ``io.modelcontextprotocol/tasks`` extension, ``server/tasks.py``), so
every replica sharing the database answers ``tasks/get`` for a task another replica started.

A row holds who started the task (``owner``: only that caller sees it), the tool and the workflow
it works on, the process that started it (``started_by``), its status and, once terminal, its
outcome: the final tool result or the JSON-RPC error, as JSON. Times are seconds since the epoch
*on the database's clock* (replicas never compare their own clocks); a row with a time to live
expires on that clock and is answered as not found, and expired rows are purged when a task is
created. A terminal row never changes again: the first writer of a final status wins.

``TaskRows`` runs over the app's ``Database``; ``MemoryTaskRows`` is the same in memory, for
``MemoryStore`` (tests/store/test_task_rows.py runs one contract on both).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sqlalchemy import Connection, TextClause, text
from sqlalchemy.exc import IntegrityError

from vmware_pilot.domain.clock import utcnow
from vmware_pilot.errors import StoreError
from vmware_pilot.store.leases import db_clock

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = [
    "TASK_STATUSES",
    "MemoryTaskRows",
    "TaskRow",
    "TaskRows",
    "TaskStatus",
    "TaskStore",
]

TaskStatus = Literal["working", "completed", "failed", "cancelled"]
TASK_STATUSES: tuple[TaskStatus, ...] = ("working", "completed", "failed", "cancelled")
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class TaskRow:
    """A stored task. ``outcome``: ``{"result": …}`` or ``{"error": …}`` once completed or failed
    (None before); ``created_at``/``updated_at``: seconds since the epoch on the database's clock;
    ``ttl``: seconds to keep it from creation (None: unlimited); ``remaining``: seconds left
    before it expires, read with it (None: it never does)."""

    task_id: str
    owner: str
    tool: str
    workflow_id: str
    status: TaskStatus
    status_message: str
    outcome: dict[str, Any] | None
    started_by: str
    created_at: float
    updated_at: float
    ttl: float | None
    remaining: float | None

    @property
    def expired(self) -> bool:
        return self.remaining is not None and self.remaining <= 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class TaskStore(Protocol):
    """What the engine keeps of MCP tasks (``engine/tasks.py``)."""

    def create_task(
        self, task_id: str, owner: str, tool: str, workflow_id: str, started_by: str, ttl: float | None
    ) -> TaskRow:
        """Store a new ``working`` task (expired rows purged first) and return it as stored;
        ``StoreError`` when ``task_id`` is stored already."""
        ...

    def task(self, task_id: str) -> TaskRow | None:
        """The task, expired or not (``TaskRow.expired``); None when there is no such row."""
        ...

    def finish_task(
        self, task_id: str, status: TaskStatus, message: str, outcome: dict[str, Any] | None
    ) -> bool:
        """Give a ``working`` task its final ``status``; False (nothing changed) when it was
        already terminal or is not there."""
        ...


# CLOCK stands for the database's clock (``db_clock``), as in store/leases.py.
_CREATE = (
    "INSERT INTO mcp_tasks (task_id, owner, tool, workflow_id, status, status_message, outcome, "
    "started_by, created_at, updated_at, ttl, expires_at) VALUES (:id, :owner, :tool, :wf, 'working', "
    "'', NULL, :by, CLOCK, CLOCK, :ttl, EXPIRES)"
)
_FIND = (
    "SELECT task_id, owner, tool, workflow_id, status, status_message, outcome, started_by, created_at, "
    "updated_at, ttl, expires_at - CLOCK AS remaining FROM mcp_tasks WHERE task_id = :id"
)
_FINISH = (
    "UPDATE mcp_tasks SET status = :status, status_message = :message, outcome = :outcome, "
    "updated_at = CLOCK WHERE task_id = :id AND status = 'working'"
)
_PURGE = "DELETE FROM mcp_tasks WHERE expires_at IS NOT NULL AND expires_at < CLOCK"


def _exists(task_id: str) -> StoreError:
    return StoreError(f"task {task_id!r} is stored already", hint="Create it under a new id.")


def _sql(conn: Connection, query: str) -> TextClause:
    return text(query.replace("CLOCK", db_clock(conn)))


def _outcome_text(outcome: dict[str, Any] | None) -> str | None:
    """The outcome as stored: JSON in the key order it came in (the contract's)."""
    return None if outcome is None else json.dumps(outcome, ensure_ascii=False)


def _row(found: Any) -> TaskRow:
    outcome = json.loads(found.outcome) if found.outcome else None
    return TaskRow(
        task_id=found.task_id,
        owner=found.owner,
        tool=found.tool,
        workflow_id=found.workflow_id,
        status=found.status,
        status_message=found.status_message or "",
        outcome=outcome if isinstance(outcome, dict) else None,
        started_by=found.started_by,
        created_at=float(found.created_at),
        updated_at=float(found.updated_at),
        ttl=None if found.ttl is None else float(found.ttl),
        remaining=None if found.remaining is None else float(found.remaining),
    )


class TaskRows:
    """MCP tasks (this module) over the app's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def create_task(
        self, task_id: str, owner: str, tool: str, workflow_id: str, started_by: str, ttl: float | None
    ) -> TaskRow:
        values = {
            "id": task_id,
            "owner": owner,
            "tool": tool,
            "wf": workflow_id,
            "by": started_by,
            "ttl": ttl,
        }
        try:
            with self._db.transaction(write=True) as conn:
                conn.execute(_sql(conn, _PURGE))
                expires = "NULL" if ttl is None else "CLOCK + :ttl"
                conn.execute(_sql(conn, _CREATE.replace("EXPIRES", expires)), values)
                return _row(conn.execute(_sql(conn, _FIND), {"id": task_id}).one())
        except IntegrityError:
            raise _exists(task_id) from None

    def task(self, task_id: str) -> TaskRow | None:
        with self._db.transaction(write=False) as conn:
            found = conn.execute(_sql(conn, _FIND), {"id": task_id}).first()
        return None if found is None else _row(found)

    def finish_task(
        self, task_id: str, status: TaskStatus, message: str, outcome: dict[str, Any] | None
    ) -> bool:
        values = {"id": task_id, "status": status, "message": message, "outcome": _outcome_text(outcome)}
        with self._db.transaction(write=True) as conn:
            return conn.execute(_sql(conn, _FINISH), values).rowcount == 1


class MemoryTaskRows:
    """``TaskRows`` in memory (``MemoryStore``), on ``clock``; each operation under one lock."""

    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[TaskRow, float | None]] = {}  # id → (row, expires_at)

    def _now(self) -> float:
        return self._clock().timestamp()

    def create_task(
        self, task_id: str, owner: str, tool: str, workflow_id: str, started_by: str, ttl: float | None
    ) -> TaskRow:
        with self._lock:
            now = self._now()
            for key in [k for k, (_, ends) in self._rows.items() if ends is not None and ends < now]:
                del self._rows[key]
            if task_id in self._rows:
                raise _exists(task_id)
            row = TaskRow(
                task_id, owner, tool, workflow_id, "working", "", None, started_by, now, now, ttl, ttl
            )
            self._rows[task_id] = (row, None if ttl is None else now + ttl)
            return row

    def task(self, task_id: str) -> TaskRow | None:
        with self._lock:
            kept = self._rows.get(task_id)
            if kept is None:
                return None
            row, ends = kept
            return replace(row, remaining=None if ends is None else ends - self._now())

    def finish_task(
        self, task_id: str, status: TaskStatus, message: str, outcome: dict[str, Any] | None
    ) -> bool:
        with self._lock:
            kept = self._rows.get(task_id)
            if kept is None or kept[0].terminal:
                return False
            row, ends = kept
            copied = json.loads(_outcome_text(outcome) or "null")
            self._rows[task_id] = (
                replace(row, status=status, status_message=message, outcome=copied, updated_at=self._now()),
                ends,
            )
            return True
