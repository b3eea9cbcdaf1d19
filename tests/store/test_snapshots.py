"""Readers under live writes: one snapshot per verify/load, and event numbers in commit order."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import event

from tests.support.store_helpers import sample_workflow
from vmware_pilot.domain.model import Workflow
from vmware_pilot.store.sql import SqlStore


def test_verify_and_load_raise_no_false_alarm_while_another_thread_writes(store: SqlStore) -> None:
    workflows = []
    for _ in range(3):
        wf = sample_workflow()
        wf.log("created", "x")
        store.workflows.create(wf)
        workflows.append(wf)
    stop = threading.Event()
    saves = 0

    def write() -> None:
        nonlocal saves
        while not stop.is_set():
            for wf in workflows:
                wf.log("note", f"save {saves}")
                wf.log("note", "second event of the same change")
                store.workflows.save(wf)
                saves += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        reports = []
        for _ in range(40):
            reports.append(store.audit.verify_audit())
            loaded = store.workflows.load(workflows[0].id)
            assert len(loaded.audit_log) == 1 + 2 * (loaded.version - 1)
    finally:
        stop.set()
        writer.join(timeout=60)
    assert saves > 0, "the writer ran"
    assert all(r.ok for r in reports), [r.description for r in reports if not r.ok][:1]
    assert store.audit.verify_audit().ok


@pytest.mark.slow  # two writers racing on each backend (~6 s); the full suite runs it
def test_event_numbers_follow_commit_order(store: SqlStore) -> None:
    """A change that took its event numbers first but commits later keeps the later change waiting,
    so an export resuming after the highest number it has seen never skips an event."""
    first, second = sample_workflow(), sample_workflow()
    for wf in (first, second):
        wf.log("created", "x")
        store.workflows.create(wf)
    first_inserted, second_committed = threading.Event(), threading.Event()
    seqs: dict[str, list[int]] = {}
    overtaken: list[bool] = []
    pausing = threading.local()

    @event.listens_for(store.database.engine, "after_cursor_execute")
    def _pause(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if statement.startswith("INSERT INTO audit_events") and getattr(pausing, "on", False):
            pausing.on = False
            first_inserted.set()
            # Without the ordering lock, the second change commits meanwhile.
            overtaken.append(second_committed.wait(timeout=3))

    def save(wf: Workflow, name: str, pause: bool) -> None:
        pausing.on = pause
        wf.log("note", name)
        pending = list(wf.new_events)
        store.workflows.save(wf)
        seqs[name] = [e.seq or 0 for e in pending]
        if name == "second":
            second_committed.set()

    a = threading.Thread(target=save, args=(first, "first", True))
    a.start()
    assert first_inserted.wait(timeout=30)
    b = threading.Thread(target=save, args=(second, "second", False))
    b.start()
    a.join(timeout=60)
    b.join(timeout=60)
    event.remove(store.database.engine, "after_cursor_execute", _pause)
    assert overtaken == [False], "the later-numbered change committed while the earlier one was open"
    assert seqs["first"][0] < seqs["second"][0]
    assert store.audit.verify_audit().ok
