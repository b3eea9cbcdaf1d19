"""Stored workflow documents written by vmware-pilot 3.0 read and write back unchanged.

``data/stored_documents.jsonl`` holds documents the codec of 3.0 wrote (before the workflow's
``extra`` bag became typed fields) during the engine's gate, hold, hand-back, drift, prediction,
run-owner, policy and decision tests: one per distinct shape of the stored ``extra`` object.
``data/stored_documents_newer.jsonl`` is one of them with keys a newer build may add (at the top
of ``extra`` and inside a gate record, an approval and an inspection): a rolling upgrade keeps
them. Both must decode and encode back to the identical text, so an older process still reads
what this one wrote (docs/operations.md on rolling upgrades, tests/transports/test_rolling_upgrade.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.support.backends import Database
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.records import Approval, GateHold, GateRecord, Inspection, RunOwner
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.store import codec
from vmware_pilot.store.sql import SqlStore

DATA = Path(__file__).parent / "data"
STORED = (DATA / "stored_documents.jsonl").read_text(encoding="utf-8").splitlines()
NEWER = (DATA / "stored_documents_newer.jsonl").read_text(encoding="utf-8").splitlines()


def _id(document: str) -> str:
    return str(json.loads(document)["id"])


@pytest.mark.parametrize("document", STORED + NEWER, ids=range(len(STORED + NEWER)))
def test_a_stored_document_decodes_and_encodes_back_to_the_same_text(document: str) -> None:
    wf = codec.decode(_id(document), document, version=1, audit_log=[])
    assert codec.encode(wf) == document


def test_the_documents_cover_every_kind_of_record() -> None:
    extras = [json.loads(d)["extra"] for d in STORED]
    keys = {k for e in extras for k in e}
    assert keys == {"gates", "gate_inspections", "handed_to", "run_owner", "requested_via"}
    gate_keys = {k for e in extras for r in e.get("gates", {}).values() for k in r}
    assert {"hold", "earlier", "policy", "voided_approvals", "expiry_noticed_at"} <= gate_keys
    approval_keys = {
        k for e in extras for r in e.get("gates", {}).values() for a in r.get("approvals", []) for k in a
    }
    assert {"verdict", "acknowledged_failure", "policy_digest", "comment"} <= approval_keys


def test_the_records_read_into_typed_fields() -> None:
    found = [codec.decode(_id(d), d, version=1, audit_log=[]) for d in STORED]
    held = next(w for w in found if any(r.hold is not None for r in w.gates.values()))
    record = next(r for r in held.gates.values() if r.hold is not None)
    assert isinstance(record, GateRecord) and isinstance(record.hold, GateHold)
    assert record.hold.kind and record.hold.at is not None and record.hold.at.tzinfo is not None
    assert all(isinstance(e, GateRecord) for e in record.earlier)
    inspected = next(w for w in found if w.inspections)
    [inspection] = inspected.inspections.values()
    assert isinstance(inspection, Inspection) and inspection.reading and inspection.prediction
    owned = next(w for w in found if w.run_owner is not None)
    assert isinstance(owned.run_owner, RunOwner) and owned.run_owner.label.startswith("pid ")
    handed = next(w for w in found if w.handed_to)
    assert all(isinstance(i, int) and isinstance(label, str) for i, label in handed.handed_to.items())
    assert any(w.requested_via for w in found)
    approvals = [a for w in found for r in w.gates.values() for a in r.approvals]
    assert approvals and all(isinstance(a, Approval) for a in approvals)
    assert {a.channel for a in approvals} and all(a.at is not None for a in approvals)
    assert all(w.newer_keys == {} for w in found)


def test_a_newer_builds_keys_outlive_a_change_by_this_build() -> None:
    """Forward compatibility: keys a newer build wrote stay when this build changes the workflow."""
    (document,) = NEWER
    wf = codec.decode(_id(document), document, version=1, audit_log=[])
    assert set(wf.newer_keys) == {"twin_rehearsal_ref", "last_key_from_newer"}
    gate = next(i for i, r in wf.gates.items() if r.approvals)
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    gate_records.record_approval(wf, gate, "token:erin", "mcp", wf.gates[gate].digest, now)
    wf.requested_via = "Claude Code"

    after = json.loads(codec.encode(wf))["extra"]
    before = json.loads(document)["extra"]
    assert {k: after[k] for k in wf.newer_keys} == {k: before[k] for k in wf.newer_keys}
    record = after["gates"][str(gate)]
    assert record["added_by_a_newer_build"] == {"x": 1}
    assert record["approvals"][0]["newer_approval_field"] == "kept"
    assert record["approvals"][-1] == {
        "approver": "token:erin",
        "at": iso(now),
        "channel": "mcp",
        "digest": record["digest"],
    }
    assert list(after)[: len(before)] == list(before) and list(after)[-1] == "requested_via"


@pytest.mark.parametrize("document", [STORED[0], NEWER[0]], ids=["3.0", "newer"])
def test_the_store_writes_a_read_document_back_unchanged(
    store: SqlStore, database: Database, document: str
) -> None:
    wf = codec.decode(_id(document), document, version=0, audit_log=[])
    store.workflows.create(wf)
    again = store.workflows.load(wf.id)
    store.workflows.save(again)
    with database.raw() as conn:
        stored = conn.execute(
            text("SELECT document FROM workflows WHERE id = :id"), {"id": wf.id}
        ).scalar_one()
    assert stored == document
