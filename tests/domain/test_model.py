from __future__ import annotations

import re
from datetime import UTC, datetime

from vmware_pilot.domain.actor import Actor, identity_key
from vmware_pilot.domain.clock import from_iso, new_workflow_id
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.templates.steps import make_step


def test_workflow_id_is_utc_timestamp_and_six_hex_digits() -> None:
    wid = new_workflow_id(datetime(2026, 11, 30, 3, 4, 5, tzinfo=UTC))
    assert re.fullmatch(r"wf-20261130-030405-[0-9a-f]{6}", wid)


def test_serialized_workflow_has_reference_keys_in_order_and_aware_timestamps() -> None:
    wf = Workflow.new("demo", WorkflowState.PENDING, [make_step(0, "a", "monitor", "get_alarms")])
    wf.log("run_started", actor="alice")
    data = wf.to_dict()
    assert list(data) == [
        "id",
        "workflow_type",
        "state",
        "steps",
        "params",
        "created_at",
        "updated_at",
        "approved_by",
        "diff_report",
        "audit_log",
        "blocked_reason",
        "rollback_results",
        "created_by",
        "authors",
    ]
    assert list(data["steps"][0]) == [
        "index",
        "action",
        "skill",
        "tool",
        "params",
        "status",
        "result",
        "started_at",
        "completed_at",
        "rollback_tool",
        "rollback_params",
        "group_id",
    ]
    assert data["state"] == "pending"
    assert data["steps"][0]["status"] == StepStatus.PENDING.value
    assert data["created_at"].endswith("+00:00")
    created = from_iso(data["created_at"])
    assert created is not None and created.tzinfo is not None
    assert data["audit_log"][0]["action"] == "run_started"
    assert wf.updated_at >= wf.created_at


def test_with_author_skips_creator_duplicates_and_blanks() -> None:
    wf = Workflow.new("demo", WorkflowState.DRAFT, created_by="alice")
    for who in ("alice", "", "bob", "bob"):
        wf.with_author(who)
    assert wf.authors == ["bob"]


def test_token_actor_is_the_same_person_with_or_without_prefix() -> None:
    actor = Actor("ops", kind="token")
    assert actor.label == "token:ops"
    assert actor.is_same_person("ops") and actor.is_same_person("token:ops")
    assert not actor.is_same_person("token:other")


def test_an_oauth_actor_is_its_subject_whatever_its_display_name() -> None:
    alice = Actor("8f1c-alice", kind="oidc", display="Alice Example")
    assert alice.label == "Alice Example (oidc:8f1c-alice)" and alice.authenticated
    assert Actor("8f1c-alice", kind="oidc").label == "oidc:8f1c-alice"
    for same in ("8f1c-alice", "oidc:8f1c-alice", "Alice Renamed (oidc:8f1c-alice)", alice.label):
        assert alice.is_same_person(same), same
    for other in ("Alice Example", "Alice Example (oidc:someone-else)", "token:8f1c-alice", "oidc:8f1c"):
        assert not alice.is_same_person(other), other


def test_identity_keys_tell_oauth_callers_apart_by_subject_only() -> None:
    assert identity_key("Alice (oidc:abc)") == identity_key("Alice Renamed (oidc:abc)") == "oidc:abc"
    assert identity_key("Alice (oidc:abc)") != identity_key("Alice (oidc:abd)")
    # A display name cannot smuggle in another subject: the real one is always last.
    assert identity_key("x (oidc:bob) (oidc:mallory)") == "oidc:mallory"
    assert identity_key(" Alice ") == identity_key("alice")  # other labels: without case, as before
