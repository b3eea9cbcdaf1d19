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
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.backends import Database
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


@pytest.mark.parametrize("document", [STORED[0], NEWER[0]], ids=["3.0", "newer"])
def test_the_store_writes_a_read_document_back_unchanged(
    store: SqlStore, database: Database, document: str
) -> None:
    wf = codec.decode(_id(document), document, version=0, audit_log=[])
    store.create(wf)
    again = store.load(wf.id)
    store.save(again)
    with database.raw() as conn:
        stored = conn.execute(
            text("SELECT document FROM workflows WHERE id = :id"), {"id": wf.id}
        ).scalar_one()
    assert stored == document
