from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.support.backends import Database
from tests.support.store_helpers import sample_workflow
from vmware_pilot.store.sql import SqlStore


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE audit_events SET detail = 'changed'",
        "DELETE FROM audit_events WHERE seq = 1",
        "UPDATE workflow_ledger SET created_at = 'x'",
        "DELETE FROM workflow_ledger",
    ],
)
def test_audit_events_and_ledger_refuse_update_and_delete(
    store: SqlStore, database: Database, sql: str
) -> None:
    wf = sample_workflow()
    wf.log("created", "original")
    store.workflows.create(wf)
    with database.raw() as conn, pytest.raises(DBAPIError, match="append-only"):
        conn.execute(text(sql))
    assert [e.detail for e in store.audit.audit_events(wf.id)] == ["original"]
    assert store.audit.verify_audit(wf.id).ok
    assert store.audit.verify_audit().ok


@pytest.mark.backends("postgresql")
def test_audit_events_refuse_truncate_on_postgresql(store: SqlStore, database: Database) -> None:
    wf = sample_workflow()
    wf.log("created", "original")
    store.workflows.create(wf)
    with database.raw() as conn, pytest.raises(DBAPIError, match="append-only"):
        conn.execute(text("TRUNCATE audit_events CASCADE"))
    assert store.audit.verify_audit().ok


def test_verify_report_lists_every_broken_workflow(store: SqlStore, database: Database) -> None:
    broken = []
    for _ in range(3):
        wf = sample_workflow()
        wf.log("created", "x")
        store.workflows.create(wf)
        broken.append(wf.id)
    seqs = [e.seq for e in store.audit.audit_events()]
    with database.raw() as conn:
        database.drop_append_only(conn)
        conn.execute(
            text("UPDATE audit_events SET detail = 'y' WHERE seq IN (:a, :b)"), {"a": seqs[0], "b": seqs[2]}
        )
    report = store.audit.verify_audit()
    assert not report.ok
    assert (report.checked, report.workflows) == (3, 3)
    assert set(report.broken) == {broken[0], broken[2]}
    assert report.first_bad is not None and report.first_bad.workflow_id in report.broken


def test_a_workflow_deleted_with_all_its_events_is_detected(store: SqlStore, database: Database) -> None:
    kept, deleted = sample_workflow(), sample_workflow()
    for wf in (deleted, kept):
        wf.log("created", "x")
        store.workflows.create(wf)
        wf.log("approved", "y")
        store.workflows.save(wf)
    assert store.audit.verify_audit().ok
    with database.raw() as conn:
        database.drop_append_only(conn)
        conn.execute(text("DELETE FROM audit_events WHERE workflow_id = :id"), {"id": deleted.id})
        conn.execute(text("DELETE FROM workflows WHERE id = :id"), {"id": deleted.id})
    report = store.audit.verify_audit()
    assert not report.ok
    assert report.broken == (deleted.id,)
    if database.backend == "sqlite":  # its numbering names the missing events first
        assert "are missing" in report.description
    else:
        assert deleted.id in report.description and "all its events are gone" in report.description
    one = store.audit.verify_audit(deleted.id)
    assert not one.ok and one.broken == (deleted.id,)
    assert deleted.id in one.description and "all its events are gone" in one.description
    assert store.audit.verify_audit(kept.id).ok


def test_a_save_after_events_were_deleted_behind_its_back_does_not_seal_over_them(
    store: SqlStore, database: Database
) -> None:
    wf = sample_workflow()
    wf.log("created", "x")
    store.workflows.create(wf)
    wf.log("approved", "y")
    store.workflows.save(wf)
    with database.raw() as conn:
        database.drop_append_only(conn)
        conn.execute(text("DELETE FROM audit_events WHERE seq = :s"), {"s": wf.audit_log[-1].seq})
    loaded = store.workflows.load(wf.id)
    loaded.log("note", "z")
    store.workflows.save(loaded)
    report = store.audit.verify_audit()
    assert not report.ok and report.broken == (wf.id,)
