from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.plans import gate, plan, step
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.errors import ApprovalGateRefused
from vmware_pilot.safety.gating import enforce, fix_for, gate_violations, is_custom_workflow

CURATED = Catalog.curated()
BUILTINS = {"rolling_restart", "clone_and_test"}


def violations(*steps: Any) -> list[tuple[str, int]]:
    return [(v["kind"], v["step_index"]) for v in gate_violations(plan(*steps), CURATED)]


# --- custom vs built-in -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "custom"),
    [
        ("rolling_restart", {"vm_names": ["a"]}, False),
        ("rolling_restart", {"custom": True}, True),
        ("rolling_restart", {"custom": "false"}, True),  # any truthy marker: checked, the safe side
        ("rolling_restart", {"custom": False}, False),
        ("rolling_restart", {"_source": "mine.yaml"}, True),
        ("rolling_restart", {"_source": ""}, True),
        ("my_plan", {}, True),
    ],
)
def test_custom_unless_builtin_name_without_markers(name: str, params: dict[str, Any], custom: bool) -> None:
    wf = plan(name=name)
    wf.params.update(params)
    assert is_custom_workflow(wf, BUILTINS) is custom


# --- violations ---------------------------------------------------------------------------------


def test_destructive_and_unclassified_steps_before_the_first_gate_violate() -> None:
    got = gate_violations(
        plan(
            step("monitor", "get_alarms"),
            step("aiops", "reconfigure_vm", {"vm_name": "a"}),
            step("aiops", "power_off_vm", {"vm_name": "a"}),
            step("custom", "frobnicate"),
            gate(),
            step("aiops", "delete_vm", {"vm_name": "a", "confirm": True}),
        ),
        CURATED,
    )
    assert got == [
        {
            "step_index": 2,
            "skill": "aiops",
            "tool": "power_off_vm",
            "kind": "ungated_destructive",
            "reason": "the skill catalog marks it risk 'high'",
        },
        {
            "step_index": 3,
            "skill": "custom",
            "tool": "frobnicate",
            "kind": "ungated_unclassified",
            "reason": "it is not in the skill catalog and its name says nothing about what it changes",
        },
    ]


@pytest.mark.parametrize(
    "params",
    [
        {"confirm": True},
        {"confirm": 1},
        {"confirm": [0]},
        {"confirm": "yes"},
        {"confirm": " TRUE "},
        {"confirm": "1"},
        {"confirmed": True},
        {"confirmed": "on"},
        {"dry_run": False},
        {"dry_run": 0},
        {"dry_run": "false"},
        {"dry_run": "off"},
        {"dry_run": " No "},
        {"dry_run": ""},
    ],
)
def test_params_that_act_without_a_gate_violate(params: dict[str, Any]) -> None:
    assert violations(step("aiops", "reconfigure_vm", {"vm_name": "a", **params})) == [
        ("confirm_without_approval", 0)
    ]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"confirm": False},
        {"confirm": 0},
        {"confirm": []},
        {"confirm": None},
        {"confirm": ""},
        {"confirm": "0"},
        {"confirm": "false"},
        {"confirm": " False "},
        {"confirm": "no"},
        {"confirm": "off"},
        {"confirm": "none"},
        {"confirm": "null"},
        {"confirmed": "false"},
        {"dry_run": True},
        {"dry_run": "yes"},
        {"dry_run": None},
    ],
)
def test_params_that_do_not_act_pass(params: dict[str, Any]) -> None:
    assert violations(step("aiops", "reconfigure_vm", {"vm_name": "a", **params})) == []


def test_confirm_without_approval_only_before_the_first_gate_and_not_twice() -> None:
    assert violations(
        step(
            "aiops",
            "reconfigure_vm",
            {"vm_name": "a"},
            rollback_tool="reconfigure_vm",
            rollback_params={"vm_name": "a", "confirm": True},
        ),  # rollback params never inspected
        step("aiops", "power_off_vm", {"vm_name": "a", "confirm": True}),  # already ungated_destructive
        step("aiops", "reconfigure_vm", {"vm_name": "a", "confirm": True}),
        gate(),
        step("aiops", "reconfigure_vm", {"vm_name": "a", "confirm": True}),
    ) == [("ungated_destructive", 1), ("confirm_without_approval", 2)]


def test_violations_are_sorted_by_step_index() -> None:
    assert violations(
        step("aiops", "reconfigure_vm", {"vm_name": "a", "confirm": True}),
        step("custom", "frobnicate"),
        step("aiops", "power_off_vm", {"vm_name": "a"}),
    ) == [("confirm_without_approval", 0), ("ungated_unclassified", 1), ("ungated_destructive", 2)]


def test_destructive_in_parallel_group_is_not_a_gate_violation() -> None:
    assert violations(gate(), step("aiops", "power_off_vm", {"vm_name": "a"}, group_id="g")) == []


# --- fix and refusal ----------------------------------------------------------------------------


def test_fix_targets_the_first_violation() -> None:
    vs = gate_violations(
        plan(step("monitor", "get_alarms"), step("aiops", "delete_vm", {"vm_name": "a"})), CURATED
    )
    assert fix_for(vs) == {
        "insert_before_step": 1,
        "step": {
            "action": "require_approval",
            "skill": "pilot",
            "tool": "approve",
            "params": {"message": "About to run aiops.delete_vm. Has a human reviewed the plan? Proceed?"},
        },
    }
    with pytest.raises(ValueError):
        fix_for([])


def test_enforce_passes_a_gated_plan() -> None:
    enforce(plan(gate(), step("aiops", "delete_vm", {"vm_name": "a", "confirm": True})), CURATED, verb="run")


def test_refusal_payload_has_error_violations_and_fix_only() -> None:
    wf = plan(
        step("monitor", "get_alarms"),
        step("aiops", "delete_vm", {"vm_name": "a"}),
        step("custom", "frob"),
        name="cleanup",
    )
    with pytest.raises(ApprovalGateRefused) as info:
        enforce(
            wf,
            CURATED,
            verb="save",
            retry="call create_workflow again with the corrected steps",
            extra="force does not override this.",
        )
    payload = info.value.payload()
    assert list(payload) == ["error", "approval_gate_violations", "fix"]
    assert payload["approval_gate_violations"] == gate_violations(wf, CURATED)
    assert payload["fix"] == fix_for(payload["approval_gate_violations"])
    message = payload["error"]
    assert message.startswith("Refusing to save custom workflow 'cleanup': 2 step(s) could change the estate")
    assert "step 1 (aiops.delete_vm: its name contains 'delete'); step 2 (custom.frob:" in message
    assert "before step 1" in message
    assert "Then call create_workflow again with the corrected steps." in message
    assert message.endswith("force does not override this.")


def test_yaml_refusal_names_the_file_under_home_and_gives_a_yaml_snippet(_isolated_home: Path) -> None:
    source = _isolated_home / ".vmware" / "workflows" / "cleanup.yaml"
    wf = plan(step("monitor", "get_alarms"), step("aiops", "delete_vm", {"vm_name": "a"}), name="cleanup")
    with pytest.raises(ApprovalGateRefused) as info:
        enforce(wf, CURATED, verb="plan", source=str(source))
    payload = info.value.payload()
    message = payload["error"]
    assert message.startswith(
        "Refusing to plan custom workflow 'cleanup' (defined in ~/.vmware/workflows/cleanup.yaml):"
    )
    snippet = [line for line in message.splitlines() if line.startswith("  ")]
    assert len(snippet) == 5
    assert yaml.safe_load("\n".join(snippet)) == [payload["fix"]["step"]]
    assert "before step 1" in message
