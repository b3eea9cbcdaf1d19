from __future__ import annotations

import pytest

from tests.support.plans import gate, plan, step
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.safety.blast import (
    CAP,
    KNOWN_STATUSES,
    cancel_blast_radius,
    leaves_behind,
    rollback_blast_radius,
)

CURATED = Catalog.curated()
S = StepStatus

HEAD = ["workflow", "state_after", "unknown_effects_count", "unknown_effects", "unknown_effects_acknowledged"]
ROLLBACK_KEYS = [
    *HEAD,
    "would_roll_back_count",
    "would_roll_back",
    "left_in_place_count",
    "left_in_place",
    "left_in_place_note",
    "not_reversed_by_pilot_count",
    "not_reversed_by_pilot",
    "not_reversible_outside_pilot_count",
    "not_reversible_outside_pilot",
    "left_behind_by_earlier_rollback_count",
    "left_behind_by_earlier_rollback",
    "not_reversible_outside_pilot_note",
    "blockers",
    "unmeasured",
]
CANCEL_KEYS = [
    *HEAD,
    "left_in_place_count",
    "left_in_place",
    "performed_outside_pilot_count",
    "performed_outside_pilot",
    "would_skip_count",
    "would_skip",
    "handed_out_to_caller_count",
    "handed_out_to_caller",
    "handed_out_to_caller_note",
    "blockers",
    "unmeasured",
]


def rb(*steps: object, state: WorkflowState = WorkflowState.FAILED, ack: bool = False) -> dict:
    return rollback_blast_radius(plan(*steps, state=state), CURATED, acknowledge_unknown_effects=ack)  # type: ignore[arg-type]


def cb(*steps: object, state: WorkflowState = WorkflowState.PENDING, ack: bool = False) -> dict:
    return cancel_blast_radius(plan(*steps, state=state), CURATED, acknowledge_unknown_effects=ack)  # type: ignore[arg-type]


def indices(items: list[dict]) -> list[int]:
    return [i["index"] for i in items]


def test_known_statuses_are_the_ten_step_statuses() -> None:
    assert (
        frozenset(
            {
                "pending",
                "running",
                "success",
                "failed",
                "skipped",
                "not_executed",
                "reported_done",
                "interrupted",
                "rolled_back",
                "partially_rolled_back",
            }
        )
        == KNOWN_STATUSES
    )


def test_rollback_keys_in_reference_order_and_head() -> None:
    wf = plan(step("monitor", "get_alarms"), state=WorkflowState.FAILED, name="t1")
    radius = rollback_blast_radius(wf, CURATED, acknowledge_unknown_effects=True)
    assert list(radius) == ROLLBACK_KEYS
    assert radius["workflow"] == {"id": wf.id, "type": "t1", "state": "failed"}
    assert radius["state_after"] == "failed"
    assert radius["unknown_effects_acknowledged"] is True


def test_cancel_keys_in_reference_order_and_head() -> None:
    radius = cb(step("monitor", "get_alarms"))
    assert list(radius) == CANCEL_KEYS
    assert radius["state_after"] == "cancelled"
    assert radius["unknown_effects_acknowledged"] is False


def test_rollback_lists_undos_last_first_and_what_stays() -> None:
    radius = rb(
        gate(S.SUCCESS),
        step("monitor", "get_alarms", status=S.SUCCESS),  # catalog read: neither list
        step(
            "aiops",
            "power_on_vm",
            {"vm_name": "a"},
            rollback_tool="power_off_vm",
            rollback_params={"vm_name": "a", "confirm": True},
            status=S.SUCCESS,
        ),
        step("aiops", "reconfigure_vm", {"vm_name": "a"}, status=S.SUCCESS),
        step("custom", "list_widgets", status=S.SUCCESS),  # name-hint read: stays in place
        step("nsx", "create_segment", {"segment_id": "s"}, rollback_tool="delete_segment", status=S.SUCCESS),
        step("aiops", "power_on_vm", {"vm_name": "b"}, rollback_tool="power_off_vm", status=S.FAILED),
    )
    assert radius["would_roll_back_count"] == 2
    assert radius["would_roll_back"][0] == {
        "index": 5,
        "skill": "nsx",
        "tool": "create_segment",
        "rollback_tool": "delete_segment",
        "rollback_params": {},
    }
    assert radius["would_roll_back"][1] == {
        "index": 2,
        "skill": "aiops",
        "tool": "power_on_vm",
        "rollback_tool": "power_off_vm",
        "rollback_params": {"vm_name": "a", "confirm": True},
    }
    assert radius["left_in_place"] == [
        {"index": 3, "skill": "aiops", "tool": "reconfigure_vm"},
        {"index": 4, "skill": "custom", "tool": "list_widgets"},
    ]
    assert radius["left_in_place_count"] == 2
    assert radius["left_in_place_note"]
    assert radius["not_reversible_outside_pilot_note"] == ""
    assert radius["blockers"] == [] and radius["unmeasured"] == []


def test_rollback_params_in_previews_are_redacted_but_secret_references_kept() -> None:
    radius = rb(
        step(
            "aiops",
            "run_vm_guest_command",
            {"vm_name": "a"},
            rollback_tool="run_vm_guest_command",
            rollback_params={
                "vm_name": "a",
                "password": "hunter2",
                "api_token": "abc",
                "db_password_count": 2,
                "vc_password": {"$env": "VC_PW"},
            },
            status=S.SUCCESS,
        ),
    )
    assert radius["would_roll_back"][0]["rollback_params"] == {
        "vm_name": "a",
        "password": "***",
        "api_token": "***",
        "db_password_count": 2,
        "vc_password": {"$env": "VC_PW"},
    }


def test_steps_handed_to_the_caller_cannot_be_reversed_by_pilot() -> None:
    radius = rb(
        step("aiops", "power_on_vm", {"vm_name": "a"}, rollback_tool="power_off_vm", status=S.REPORTED_DONE),
        step("aiops", "reconfigure_vm", {"vm_name": "a"}, status=S.REPORTED_DONE),
        step("monitor", "get_alarms", status=S.NOT_EXECUTED),
        gate(S.SUCCESS),
        step("aiops", "power_on_vm", {"vm_name": "b"}, rollback_tool="power_off_vm", status=S.NOT_EXECUTED),
        step("aiops", "deploy_linked_clone", {"new_name": "c"}, status=S.NOT_EXECUTED),
    )
    assert indices(radius["not_reversed_by_pilot"]) == [4, 0]
    assert indices(radius["not_reversible_outside_pilot"]) == [1, 5]
    assert radius["not_reversible_outside_pilot_note"]
    assert radius["would_roll_back"] == [] and radius["left_in_place"] == []


def test_leaves_behind_marks_undos_that_do_not_remove_a_created_vm() -> None:
    clone = step(
        "aiops",
        "deploy_linked_clone",
        {"new_name": "web-staging"},
        rollback_tool="power_off_vm",
        rollback_params={"vm_name": "web-staging"},
        status=S.SUCCESS,
    )
    radius = rb(
        clone, step("aiops", "clone_vm", {"vm_name": "x"}, rollback_tool="delete_vm", status=S.SUCCESS)
    )
    first, second = radius["would_roll_back"]
    assert "leaves_behind" not in first  # delete_vm removes the clone
    assert "'web-staging'" in second["leaves_behind"]
    assert "power_off_vm" in second["leaves_behind"]


@pytest.mark.parametrize("skill", ["aiops", "vmware-aiops", "vmware_aiops", "AIops"])
def test_leaves_behind_matches_every_skill_spelling(skill: str) -> None:
    assert leaves_behind(step(skill, "create_vm", {"vm_name": "v1"}, rollback_tool="power_off_vm"))


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        (step("aiops", "deploy_vm_from_ova", {"new_name": "n", "vm_name": "v"}, rollback_tool="x"), "'n'"),
        (step("aiops", "deploy_vm_from_template", {"vm_name": "v"}, rollback_tool="x"), "'v'"),
        (step("aiops", "deploy_vm_from_template", {}, rollback_tool="x"), "'the object it created'"),
        (step("aiops", "batch_clone_vms", {}, rollback_tool="delete_vm"), "batch_clone_vms created"),
        (step("aiops", "batch_linked_clone_vms", {}, rollback_tool="anything"), "anything does not remove"),
    ],
)
def test_leaves_behind_names_what_stays(s: object, expected: str) -> None:
    assert expected in leaves_behind(s)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "s",
    [
        step("aiops", "create_vm", {"vm_name": "v"}, rollback_tool="delete_vm"),
        step("aiops", "create_vm", {"vm_name": "v"}),  # no undo at all: not a partial undo
        step("aiops", "power_on_vm", {"vm_name": "v"}, rollback_tool="power_off_vm"),
        step("monitor", "create_vm", {"vm_name": "v"}, rollback_tool="x"),
    ],
)
def test_leaves_behind_is_empty_for_full_or_unrelated_undos(s: object) -> None:
    assert leaves_behind(s) == ""  # type: ignore[arg-type]


def test_earlier_partial_rollbacks_are_listed_with_what_they_left() -> None:
    radius = rb(
        step(
            "aiops",
            "clone_vm",
            {"new_name": "c"},
            rollback_tool="power_off_vm",
            status=S.PARTIALLY_ROLLED_BACK,
        )
    )
    assert radius["left_behind_by_earlier_rollback_count"] == 1
    entry = radius["left_behind_by_earlier_rollback"][0]
    assert list(entry) == ["index", "skill", "tool", "leaves_behind"]
    assert "'c'" in entry["leaves_behind"]


def test_lists_are_capped_at_16_with_true_counts() -> None:
    steps = [
        step("aiops", "power_on_vm", {"vm_name": f"v{i}"}, rollback_tool="power_off_vm", status=S.SUCCESS)
        for i in range(CAP + 4)
    ]
    radius = rb(*steps)
    assert CAP == 16
    assert radius["would_roll_back_count"] == 20
    assert len(radius["would_roll_back"]) == 16
    assert radius["would_roll_back"][0]["index"] == 19
    pending = cb(*(step("monitor", "get_alarms") for _ in range(CAP + 1)))
    assert (pending["would_skip_count"], len(pending["would_skip"])) == (17, 16)


@pytest.mark.parametrize("state", list(WorkflowState))
def test_rollback_blockers_by_state(state: WorkflowState) -> None:
    blocked = state in {
        WorkflowState.DRAFT,
        WorkflowState.COMPLETED,
        WorkflowState.ROLLING_BACK,
        WorkflowState.CANCELLED,
    }
    blockers = rb(state=state)["blockers"]
    assert len(blockers) == (1 if blocked else 0)
    if blocked:
        assert f"'{state.value}'" in blockers[0]


@pytest.mark.parametrize("state", list(WorkflowState))
def test_cancel_blockers_by_state(state: WorkflowState) -> None:
    blocked = state in {WorkflowState.COMPLETED, WorkflowState.FAILED, WorkflowState.CANCELLED}
    assert len(cb(state=state)["blockers"]) == (1 if blocked else 0)


def test_unknown_effects_are_unmeasured_until_acknowledged() -> None:
    steps = (
        step("aiops", "power_off_vm", {"vm_name": "a"}, status=S.INTERRUPTED),
        step("aiops", "power_on_vm", {"vm_name": "a"}, status=S.RUNNING),
    )
    for radius in (rb(*steps, state=WorkflowState.RUNNING), cb(*steps, state=WorkflowState.RUNNING)):
        assert radius["unknown_effects_count"] == 2
        assert indices(radius["unknown_effects"]) == [0, 1]
        assert len(radius["unmeasured"]) == 2
        assert "power_off_vm" in radius["unmeasured"][0]
        assert "acknowledge_unknown_effects=True" in radius["unmeasured"][0]
    for radius in (
        rb(*steps, state=WorkflowState.RUNNING, ack=True),
        cb(*steps, state=WorkflowState.RUNNING, ack=True),
    ):
        assert radius["unknown_effects_count"] == 2
        assert radius["unmeasured"] == []


def test_an_undo_with_unknown_effect_is_named_as_the_rollback_tool() -> None:
    wf = plan(
        step("aiops", "power_on_vm", {"vm_name": "a"}, rollback_tool="power_off_vm", status=S.INTERRUPTED),
        state=WorkflowState.FAILED,
    )
    wf.rollback_results = [{"step": 0, "tool": "power_off_vm", "status": "unknown", "error": "timeout"}]
    radius = rollback_blast_radius(wf, CURATED, acknowledge_unknown_effects=False)
    assert "its rollback tool power_off_vm" in radius["unmeasured"][0]


def test_unrecognised_status_is_unmeasured_even_when_acknowledged() -> None:
    odd = step("aiops", "power_on_vm", {"vm_name": "a"})
    odd.status = "exploded"  # type: ignore[assignment]  # e.g. a row written by a newer version
    for fn in (rollback_blast_radius, cancel_blast_radius):
        radius = fn(plan(odd, state=WorkflowState.PENDING), CURATED, acknowledge_unknown_effects=True)
        assert len(radius["unmeasured"]) == 1
        assert "'exploded'" in radius["unmeasured"][0]


def test_cancel_sorts_steps_into_left_in_place_outside_skipped_and_handed_out() -> None:
    radius = cb(
        step("monitor", "get_alarms", status=S.SUCCESS),  # catalog read: not listed
        step("aiops", "power_on_vm", {"vm_name": "a"}, rollback_tool="power_off_vm", status=S.SUCCESS),
        step("aiops", "reconfigure_vm", {"vm_name": "a"}, status=S.REPORTED_DONE),
        gate(S.SUCCESS),
        step("aiops", "reconfigure_vm", {"vm_name": "b"}, status=S.NOT_EXECUTED),
        gate(),
        step("aiops", "power_off_vm", {"vm_name": "b"}),
        state=WorkflowState.AWAITING_APPROVAL,
    )
    assert indices(radius["left_in_place"]) == [1]
    assert indices(radius["performed_outside_pilot"]) == [2]
    assert indices(radius["would_skip"]) == [5, 6]
    assert indices(radius["handed_out_to_caller"]) == [4]
    assert radius["handed_out_to_caller_note"]
    assert cb(step("monitor", "get_alarms"))["handed_out_to_caller_note"] == ""


def _settled(effect: str, tool: str = "power_off_vm", rollback_tool: str = "power_on_vm") -> object:
    s = step("aiops", tool, {"vm_name": "a"}, rollback_tool=rollback_tool, status=S.INTERRUPTED)
    s.result = {"error": "timed out", "settled": {"effect": effect, "reason": f"read: {effect}"}}
    return s


def test_an_interrupted_step_settled_as_applied_is_undone_without_acknowledgment() -> None:
    radius = rb(_settled("applied"))
    assert radius["unknown_effects_count"] == 0 and radius["unmeasured"] == []
    (undo,) = radius["would_roll_back"]
    assert (undo["index"], undo["rollback_tool"], undo["settled"]) == (0, "power_on_vm", "applied")
    assert "effect_unknown" not in undo
    # Without a rollback tool its change stays, and says so; a cancel leaves it in place.
    assert indices(rb(_settled("applied", rollback_tool=""))["left_in_place"]) == [0]
    cancelled = cb(_settled("applied"), state=WorkflowState.RUNNING)
    assert indices(cancelled["left_in_place"]) == [0] and cancelled["unmeasured"] == []


def test_an_interrupted_step_settled_as_not_applied_needs_no_undo() -> None:
    for radius in (rb(_settled("not_applied")), cb(_settled("not_applied"), state=WorkflowState.RUNNING)):
        assert radius["unknown_effects_count"] == 0 and radius["unmeasured"] == []
        assert radius.get("would_roll_back", []) == [] and radius["left_in_place"] == []


def test_an_interrupted_step_still_unknown_after_settling_is_asked_about_with_the_reason() -> None:
    radius = rb(_settled("unknown"))
    assert indices(radius["unknown_effects"]) == [0] and radius["would_roll_back"] == []
    assert "unknown (Pilot read the target system: read: unknown)" in radius["unmeasured"][0]
    acknowledged = rb(_settled("unknown"), ack=True)
    assert acknowledged["would_roll_back"][0]["effect_unknown"] is True and acknowledged["unmeasured"] == []
