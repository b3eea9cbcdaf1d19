"""Few round trips: a save is the row's UPDATE and one INSERT for all its audit events."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, event

from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RunRequest

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
READ = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}}
WRITE = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "a", "confirm": True},
}
# Not round trips of their own: transaction control, and PostgreSQL's commit-order lock.
_CONTROL = ("BEGIN", "SELECT pg_advisory_xact_lock")


@contextmanager
def transactions(engine: Engine) -> Iterator[list[list[str]]]:
    """The statements run on ``engine`` (their first word pairs), grouped by transaction."""
    seen: list[list[str]] = []

    def on_begin(_conn: Any) -> None:
        seen.append([])

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if not statement.startswith(_CONTROL):
            seen[-1].append(" ".join(statement.split()[:3]))

    event.listen(engine, "begin", on_begin)
    event.listen(engine, "after_cursor_execute", on_execute)
    try:
        yield seen
    finally:
        event.remove(engine, "begin", on_begin)
        event.remove(engine, "after_cursor_execute", on_execute)


@pytest.mark.usefixtures("database")  # two replicas of one database / its statements
async def test_a_save_is_one_update_and_one_insert_for_its_events(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    wid = str(
        dapp.service.create_workflow(CreateRequest(actor, "ops", "t", [READ, READ, GATE, WRITE])).payload()[
            "workflow_id"
        ]
    )
    with transactions(dapp.store.database.engine) as run:
        out = (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "awaiting_approval"
    with transactions(dapp.store.database.engine) as approve:
        out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "completed"
    saves = [tx for tx in run + approve if "UPDATE workflows SET" in tx]
    assert len(saves) >= 6
    counted = 0
    for tx in saves:
        # A save made under a run's leases first checks (and locks) their fences, in one statement.
        body = tx[1:] if tx[0] == "SELECT leases.workflow_id, leases.fence" else tx
        # Only the save that ends the workflow moves the maintained active count and lets go of
        # the objects it held (store/locks.py).
        if body[0] == "UPDATE workflow_counts SET":
            counted += 1
            body = body[1:]
            assert body[-1] == "DELETE FROM object_locks", tx
            body = body[:-1]
        assert body in (["UPDATE workflows SET"], ["UPDATE workflows SET", "INSERT INTO audit_events"]), tx
    assert counted == 1
    assert dapp.store.audit.verify_audit().ok
