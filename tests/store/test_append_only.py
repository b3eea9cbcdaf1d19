from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from vmware_pilot.store.sql import SqlStore

from .helpers import raw_db, sample_workflow


@pytest.mark.parametrize(
    "sql", ["UPDATE audit_events SET detail = 'changed'", "DELETE FROM audit_events WHERE seq = 1"]
)
def test_audit_events_refuse_update_and_delete(store: SqlStore, db_path: Path, sql: str) -> None:
    wf = sample_workflow()
    wf.log("created", "original")
    store.create(wf)
    with raw_db(db_path) as conn, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(sql)
    assert [e.detail for e in store.audit_events(wf.id)] == ["original"]
    assert store.verify_audit(wf.id).ok


def test_verify_report_lists_every_broken_workflow(store: SqlStore, db_path: Path) -> None:
    broken = []
    for _ in range(3):
        wf = sample_workflow()
        wf.log("created", "x")
        store.create(wf)
        broken.append(wf.id)
    with raw_db(db_path) as conn:
        conn.execute("DROP TRIGGER audit_events_no_update")
        conn.execute("UPDATE audit_events SET detail = 'y' WHERE seq IN (1, 3)")
    report = store.verify_audit()
    assert not report.ok
    assert (report.checked, report.workflows) == (3, 3)
    assert set(report.broken) == {broken[0], broken[2]}
    assert report.first_bad is not None and report.first_bad.workflow_id in report.broken
