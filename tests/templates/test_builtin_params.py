"""Built-in parameters are typed: wrong type, missing or unknown → an error naming the field,
with the template's parameter list in the hint. Also 2.4.0's template bugs, fixed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.template_helpers import rows
from vmware_pilot.errors import TemplateParamError
from vmware_pilot.templates.registry import TemplateRegistry


def _refused(registry: TemplateRegistry, name: str, params: Any) -> TemplateParamError:
    with pytest.raises(TemplateParamError) as info:
        registry.create(name, params, "u")
    return info.value


def test_wrong_type_names_the_field_and_lists_the_parameters(registry: TemplateRegistry) -> None:
    err = _refused(registry, "rolling_restart", {"vm_names": "web-01"})
    assert err.field == "vm_names"
    assert "'vm_names'" in err.message and "got str" in err.message
    assert err.hint.startswith("rolling_restart takes vm_names (array of string, required), target (string")
    payload = err.payload()
    assert list(payload) == ["error", "parameter", "hint"] and payload["parameter"] == "vm_names"


def test_a_list_of_objects_reads_as_such_in_the_parameter_list(registry: TemplateRegistry) -> None:
    err = _refused(registry, "baseline_remediate", {"drift_items": {}})
    assert "drift_items (array of object, required)" in err.hint


def test_missing_parameters_are_all_named(registry: TemplateRegistry) -> None:
    err = _refused(registry, "incident_response", {"target": "x"})
    assert err.field == "alert_entity"
    assert "missing required parameter 'alert_entity'" in err.message
    assert "missing required parameter 'alert_name'" in err.message


def test_unknown_parameter_is_refused_not_ignored(registry: TemplateRegistry) -> None:
    err = _refused(registry, "compliance_scan", {"check_alarm": False})
    assert err.field == "check_alarm" and "unknown parameter 'check_alarm'" in err.message
    assert "check_alarms (boolean, default True)" in err.hint


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("compliance_scan", {"check_alarms": "yes"}, "check_alarms"),
        ("vks_cluster_deploy", {"worker_count": "3"}, "worker_count"),
        ("storage_expansion", {"host_name": "h", "iscsi_address": "a", "iscsi_port": True}, "iscsi_port"),
        ("storage_expansion", {"host_name": "h", "iscsi_address": "a", "iscsi_port": 70000}, "iscsi_port"),
        ("capacity_expansion", {"vm_name": "v", "cpu": 2.0}, "cpu"),
        ("capacity_expansion", {"vm_name": "v", "cpu": 0}, "cpu"),
        ("disaster_recovery", {"vm_name": "  "}, "vm_name"),
        ("rolling_restart", {"vm_names": ["a", 3]}, "vm_names[1]"),
        ("baseline_remediate", {"drift_items": [{"params": {}}]}, "drift_items[0].tool"),
        ("baseline_remediate", {"drift_items": [{"tool": "t", "params": []}]}, "drift_items[0].params"),
    ],
)
def test_values_are_not_coerced(
    registry: TemplateRegistry, name: str, params: dict[str, Any], field: str
) -> None:
    base = {
        "vks_cluster_deploy": dict.fromkeys(
            ("namespace_name", "cluster_id", "storage_policy", "tkc_name", "k8s_version"), "x"
        )
    }
    assert _refused(registry, name, {**base.get(name, {}), **params}).field == field


def test_params_must_be_an_object(registry: TemplateRegistry) -> None:
    assert _refused(registry, "compliance_scan", ["target"]).field == "params"


# --- 2.4.0's template bugs, fixed -------------------------------------------------------------


def test_capacity_expansion_applies_the_plan_it_creates_behind_its_gate(registry: TemplateRegistry) -> None:
    wf = registry.create("capacity_expansion", {"vm_name": "db", "memory_mb": 8192, "target": "vc"}, "u")
    ref = {"plan_id": "__from_step_2__:plan_id", "target": "vc", "confirm": True}
    assert rows(wf.steps) == [
        (
            0,
            "check_capacity",
            "aria",
            "get_remaining_capacity",
            {"resource_id": "db", "target": "vc"},
            "",
            {},
            "",
        ),
        (
            1,
            "check_rightsizing",
            "aria",
            "list_rightsizing_recommendations",
            {"resource_id": "db", "target": "vc"},
            "",
            {},
            "",
        ),
        (
            2,
            "create_plan",
            "aiops",
            "create_vm_plan",
            {"operations": [{"action": "reconfigure", "vm_name": "db", "memory_mb": 8192}], "target": "vc"},
            "",
            {},
            "",
        ),
        (3, "GATE"),
        (4, "apply_change", "aiops", "apply_vm_plan", ref, "rollback_vm_plan", ref, ""),
        (5, "verify_health", "monitor", "get_alarms", {"target": "vc"}, "", {}, ""),
    ]
    assert "Memory→8192MB" in wf.steps[3].params["message"]
    assert wf.params == {"vm_name": "db", "cpu": None, "memory_mb": 8192, "target": "vc"}


def test_capacity_expansion_refuses_a_request_with_no_change(registry: TemplateRegistry) -> None:
    err = _refused(registry, "capacity_expansion", {"vm_name": "db"})
    assert err.field == "cpu" and "nothing to expand" in err.message
    assert "memory_mb (integer or null, default None)" in err.hint


@pytest.mark.parametrize("name", ["rolling_restart", "patch_deployment"])
def test_vm_list_templates_refuse_an_empty_or_repeated_list(registry: TemplateRegistry, name: str) -> None:
    extra = (
        {"patch_local_path": "/a", "patch_guest_path": "/b", "install_command": "c", "username": "root"}
        if name == "patch_deployment"
        else {}
    )
    assert _refused(registry, name, {"vm_names": [], **extra}).field == "vm_names"
    assert _refused(registry, name, {"vm_names": ["a", "b", "a"], **extra}).field == "vm_names[2]"


def test_patch_deployment_needs_a_username(registry: TemplateRegistry) -> None:
    params = {
        "vm_names": ["a"],
        "patch_local_path": "/a",
        "patch_guest_path": "/b",
        "install_command": "c",
        "username": " ",
    }
    assert _refused(registry, "patch_deployment", params).field == "username"


@pytest.mark.parametrize("fixture", ["registry", "snapshot_registry"])
def test_baseline_remediate_decides_confirm_after_renaming(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    # With or without the real schemas, an old name reaching a gated tool gets confirm: true.
    registry: TemplateRegistry = request.getfixturevalue(fixture)
    items = [{"resource": "a", "tool": "vm_power_off", "params": {"vm_name": "a"}}]
    step = registry.create("baseline_remediate", {"drift_items": items}, "u").steps[2]
    assert (step.tool, step.params["confirm"]) == ("power_off_vm", True)


def test_baseline_remediate_renames_on_other_skills_and_confirms_from_the_gated_list(
    registry: TemplateRegistry,
) -> None:
    items = [{"skill": "vdi", "tool": "machine_reset", "params": {"machine_ids": ["m1"]}}]
    step = registry.create("baseline_remediate", {"drift_items": items}, "u").steps[2]
    assert (step.skill, step.tool, step.params) == (
        "vdi",
        "reset_vdi_machine",
        {"machine_ids": ["m1"], "confirm": True},
    )


def test_baseline_remediate_passes_target_only_to_tools_that_take_it(
    snapshot_registry: TemplateRegistry,
) -> None:
    items = [
        {
            "skill": "avi",
            "tool": "pool_member_disable",
            "params": {"pool_name": "p", "server_ip": "10.0.0.1"},
        },
        {"tool": "power_on_vm", "params": {"vm_name": "a"}},
        {"tool": "power_on_vm", "params": {"vm_name": "b", "target": "other"}},
    ]
    steps = snapshot_registry.create("baseline_remediate", {"drift_items": items, "target": "vc"}, "u").steps
    assert steps[2].tool == "disable_lb_pool_member"
    assert steps[2].params == {
        "pool_name": "p",
        "server_ip": "10.0.0.1",
        "confirm": True,
    }  # avi takes no target
    assert steps[3].params == {"vm_name": "a", "target": "vc"}  # no confirm: power_on_vm has none
    assert steps[4].params == {"vm_name": "b", "target": "other"}  # the item's own target wins


def test_baseline_remediate_without_a_schema_passes_only_a_named_target(registry: TemplateRegistry) -> None:
    items = [{"skill": "harden", "tool": "scan_target", "params": {"baseline": "cis"}}]
    named = registry.create("baseline_remediate", {"drift_items": items, "target": "vc"}, "u").steps[2]
    default = registry.create("baseline_remediate", {"drift_items": items}, "u").steps[2]
    assert named.params == {"baseline": "cis", "target": "vc"}
    assert default.params == {"baseline": "cis"}


def test_baseline_remediate_rollback_is_renamed_and_confirmed_too(
    snapshot_registry: TemplateRegistry,
) -> None:
    items = [
        {
            "tool": "vm_power_on",
            "params": {"vm_name": "a"},
            "rollback_tool": "vm_power_off",
            "rollback_params": {"vm_name": "a"},
        }
    ]
    step = snapshot_registry.create("baseline_remediate", {"drift_items": items, "target": "vc"}, "u").steps[
        2
    ]
    assert (step.tool, step.params) == ("power_on_vm", {"vm_name": "a", "target": "vc"})
    assert (step.rollback_tool, step.rollback_params) == (
        "power_off_vm",
        {"vm_name": "a", "confirm": True, "target": "vc"},
    )


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([], "drift_items"),
        ([{"tool": "power_off_vm", "params": {"vm_name": "a", "dry_run": False}}], "drift_items[0].params"),
        (
            [
                {
                    "tool": "reconfigure_vm",
                    "rollback_tool": "vm_power_off",
                    "rollback_params": {"confirmed": True},
                }
            ],
            "drift_items[0].rollback_params",
        ),
        ([{"tool": "reconfigure_vm", "rollback_params": {"vm_name": "a"}}], "drift_items[0].rollback_tool"),
    ],
)
def test_baseline_remediate_refuses(
    registry: TemplateRegistry, items: list[dict[str, Any]], field: str
) -> None:
    assert _refused(registry, "baseline_remediate", {"drift_items": items}).field == field


# --- other input checks -----------------------------------------------------------------------

CLONE = {"target_vm": "web", "snapshot_name": "s"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({}, "change_spec"),
        ({"cpu": 2, "command": "x"}, "change_spec.command"),
        ({"memory_gb": 1, "memory_mb": 1024}, "change_spec.memory_gb"),
        ({"memory_gb": 0.0001}, "change_spec.memory_gb"),
        ({"cpu": True}, "change_spec.cpu"),
        ({"command": "ls"}, "change_spec.username"),
        ({"command": " ", "username": "root"}, "change_spec.command"),
        ({"command": "ls", "username": "root", "password": 5}, "change_spec.password"),
    ],
)
def test_clone_and_test_checks_the_change_spec(
    registry: TemplateRegistry, spec: dict[str, Any], field: str
) -> None:
    assert _refused(registry, "clone_and_test", {**CLONE, "change_spec": spec}).field == field


def test_clone_and_test_needs_a_snapshot(registry: TemplateRegistry) -> None:
    err = _refused(
        registry, "clone_and_test", {"target_vm": "web", "change_spec": {"cpu": 2}, "snapshot_name": ""}
    )
    assert err.field == "snapshot_name"


def test_network_segment_setup_refuses_nat_it_could_not_create(registry: TemplateRegistry) -> None:
    base = {"segment_id": "s", "display_name": "d", "subnet": "10.0.0.1/24", "transport_zone_path": "/tz"}
    assert (
        _refused(registry, "network_segment_setup", {**base, "nat_source": "10.0.0.0/24"}).field
        == "nat_translated"
    )
    nat = {"nat_source": "10.0.0.0/24", "nat_translated": "192.0.2.1"}
    assert _refused(registry, "network_segment_setup", {**base, **nat}).field == "tier1_id"


def test_plan_and_approve_needs_operations_with_actions(registry: TemplateRegistry) -> None:
    assert _refused(registry, "plan_and_approve", {"operations": []}).field == "operations"
    err = _refused(registry, "plan_and_approve", {"operations": [{"vm_name": "a"}]})
    assert err.field == "operations[0].action"


def test_baselines_refuse_nothing_to_capture_and_unsafe_names(registry: TemplateRegistry) -> None:
    off = dict.fromkeys(
        ("include_vms", "include_hosts", "include_network", "include_storage", "include_alarms"), False
    )
    assert _refused(registry, "baseline_capture", off).field == "include_vms"
    assert _refused(registry, "baseline_capture", {"baseline_name": "../x"}).field == "baseline_name"
    assert _refused(registry, "baseline_audit", {"baseline_name": "a/b"}).field == "baseline_name"
