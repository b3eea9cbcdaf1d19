from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.support.backends import Database
from tests.support.store_helpers import sample_workflow
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.records import GateRecord
from vmware_pilot.errors import CorruptRecord
from vmware_pilot.store import codec
from vmware_pilot.store.sql import SqlStore

SECRETS = ["hunter2", "tok-123", "s3cr3t-db", "vc-pass-9", "bearer-xyz-12345", "topsecret-extra"]


def test_nothing_secret_reaches_the_database_in_clear(store: SqlStore, database: Database) -> None:
    wf = sample_workflow(db_password="s3cr3t-db", vc={"$env": "VC_PASSWORD"}, password_count=3)
    wf.steps[0].result = {"error": "login failed: password=vc-pass-9", "session": {"x-auth-token": "abc"}}
    wf.rollback_results = [{"index": 1, "result": "Authorization: Bearer bearer-xyz-12345"}]
    wf.newer_keys = {"approval": {"client_secret": "topsecret-extra"}}
    wf.gates = {1: GateRecord(index=1, policy={"rule": "r", "client_secret": "topsecret-extra"})}
    wf.log("step_failed", "Step 0: get_vm_info → login failed: password=vc-pass-9", actor="alice")
    store.workflows.create(wf)
    wf.log("cancelled", "reason with token=tok-123")
    store.workflows.save(wf)

    with database.raw() as conn:
        document = conn.execute(
            text("SELECT document FROM workflows WHERE id = :id"), {"id": wf.id}
        ).scalar_one()
        details = list(conn.execute(text("SELECT detail FROM audit_events")).scalars())
    stored_text = document + "\n".join(details)
    for secret in SECRETS:
        assert secret not in stored_text
    blob = database.stored_bytes()
    assert wf.id.encode() in blob  # the search reaches the stored rows
    assert not any(secret.encode() in blob for secret in SECRETS)

    doc = json.loads(document)
    assert doc["params"] == {"db_password": "***", "vc": {"$env": "VC_PASSWORD"}, "password_count": 3}
    assert doc["steps"][1]["params"] == {"vm_name": "web-01", "password": "***"}
    assert doc["steps"][1]["rollback_params"] == {"vm_name": "web-01", "apiToken": "***"}
    assert doc["steps"][0]["result"]["error"] == "login failed: password=***"
    assert details == ["Step 0: get_vm_info → login failed: password=***", "reason with token=***"]
    # The live object keeps its values for dispatch in this process.
    assert wf.steps[1].params["password"] == "hunter2"
    assert wf.audit_log[-1].detail == "reason with token=***"


def test_aware_datetimes_in_any_offset_round_trip_as_the_same_instant() -> None:
    wf = sample_workflow()
    wf.created_at = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    wf.steps[0].completed_at = datetime(2026, 3, 1, 10, 0, 0, 1, tzinfo=UTC)
    back = codec.decode(wf.id, codec.encode(wf), version=1, audit_log=[])
    assert back.created_at == wf.created_at
    assert back.steps[0].completed_at == wf.steps[0].completed_at
    assert back.steps[1].started_at is None


def test_values_json_cannot_hold_are_kept_as_text() -> None:
    wf = sample_workflow()
    when = datetime(2026, 1, 1, tzinfo=UTC)
    wf.steps[0].result = {"when": when, "tags": {"b", "a"}, "path": Path("/tmp/x")}
    back = codec.decode(wf.id, codec.encode(wf), version=1, audit_log=[])
    assert back.steps[0].result == {"when": iso(when), "tags": ["a", "b"], "path": "/tmp/x"}


def _doc(wf: Workflow) -> dict[str, object]:
    data: dict[str, object] = json.loads(codec.encode(wf))
    return data


def test_missing_optional_fields_get_the_reference_defaults() -> None:
    wf = sample_workflow()
    doc = _doc(wf)
    for key in (
        "approved_by",
        "diff_report",
        "blocked_reason",
        "rollback_results",
        "created_by",
        "authors",
        "extra",
    ):
        del doc[key]
    steps = doc["steps"]
    assert isinstance(steps, list)
    steps[0] = {"tool": "vm_info", "skill": "monitor"}

    back = codec.decode(wf.id, json.dumps(doc), version=3, audit_log=[])

    assert (back.approved_by, back.blocked_reason, back.created_by) == ("", "", "")
    assert (back.diff_report, back.rollback_results, back.authors) == ({}, [], [])
    assert (back.gates, back.inspections, back.handed_to, back.run_owner, back.requested_via) == (
        {},
        {},
        {},
        None,
        "",
    )
    assert back.newer_keys == {}
    step = back.steps[0]
    assert (step.action, step.tool, step.status, step.group_id) == (
        "step_0",
        "get_vm_info",
        StepStatus.PENDING,
        "",
    )
    assert back.version == 3


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.update(state="paused"), "unknown state 'paused'"),
        (lambda d: d["steps"][0].update(status="half_done"), "unknown status 'half_done'"),
        (lambda d: d["steps"][0].update(colour="red"), "unknown key(s) colour"),
        (lambda d: d.update(surprise=1), "unknown key(s) surprise"),
        (lambda d: d.update(steps={"0": {}}), "'steps' is dict"),
        (lambda d: d.update(id="wf-other"), "document is for 'wf-other'"),
        (lambda d: d.pop("created_at"), "missing 'created_at'"),
        (lambda d: d["steps"][1].update(started_at="yesterday"), "'started_at' is not an ISO timestamp"),
        # The records under ``extra`` are typed too: a record this build cannot read is not guessed at.
        (lambda d: d.update(extra={"gates": []}), "'gates' is list, expected dict"),
        (lambda d: d.update(extra={"gates": {"first": {"index": 1}}}), "'extra.gates' has a key that is not"),
        (
            lambda d: d.update(extra={"gates": {"1": {"index": 1, "approvals": [{"approver": "a"}]}}}),
            "'extra.gates.1.approvals[0].at' is not a valid GateRecord record: Field required",
        ),
        (
            lambda d: d.update(extra={"gates": {"1": {"index": 1, "expires_at": "soon"}}}),
            "'extra.gates.1.expires_at' is not a valid GateRecord record",
        ),
        (lambda d: d.update(extra={"handed_to": {"0": 7}}), "'extra.handed_to' holds a value that is not"),
        (
            lambda d: d.update(extra={"run_owner": {"host": "h"}}),
            "'extra.run_owner.pid' is not a valid RunOwner",
        ),
        (lambda d: d.update(extra={"requested_via": 3}), "'requested_via' is int, expected str"),
    ],
)
def test_decoding_is_strict_about_what_it_finds(mutate: object, reason: str) -> None:
    wf = sample_workflow()
    doc = _doc(wf)
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(CorruptRecord) as caught:
        codec.decode(wf.id, json.dumps(doc), version=1, audit_log=[])
    assert reason in caught.value.reason
    assert caught.value.hint


def test_invalid_json_is_a_corrupt_record() -> None:
    with pytest.raises(CorruptRecord, match="invalid JSON"):
        codec.decode("wf-x", '{"id": "wf-x",', version=1, audit_log=[])


def test_corrupt_row_in_the_database_raises_on_load_and_leaves_others_readable(
    store: SqlStore, database: Database
) -> None:
    bad, good = sample_workflow(), sample_workflow()
    store.workflows.create(bad)
    store.workflows.create(good)
    with database.raw() as conn:
        conn.execute(text("UPDATE workflows SET document = '{not json' WHERE id = :id"), {"id": bad.id})
    with pytest.raises(CorruptRecord):
        store.workflows.load(bad.id)
    assert store.workflows.load(good.id).state is WorkflowState.PENDING
