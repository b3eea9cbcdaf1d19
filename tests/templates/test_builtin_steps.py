"""The steps every built-in builds for representative params: indices, actions, skills, tools,
gates, rollbacks and params (references included), and the workflow params it records."""

from __future__ import annotations

from tests.support.template_helpers import rows
from vmware_pilot.domain.enums import StepStatus, WorkflowState
from vmware_pilot.templates.registry import TemplateRegistry

T = "vc-lab"


def test_builtin_names_are_the_fifteen_in_registry_order(registry: TemplateRegistry) -> None:
    assert registry.builtin_names() == [
        "clone_and_test",
        "incident_response",
        "investigate_alert",
        "plan_and_approve",
        "compliance_scan",
        "network_segment_setup",
        "vks_cluster_deploy",
        "rolling_restart",
        "capacity_expansion",
        "disaster_recovery",
        "patch_deployment",
        "storage_expansion",
        "baseline_capture",
        "baseline_audit",
        "baseline_remediate",
    ]


def test_created_workflow_is_pending_with_fresh_steps_and_creator(registry: TemplateRegistry) -> None:
    a = registry.create("compliance_scan", {}, "alice")
    b = registry.create("compliance_scan", {}, "alice")
    assert a.id != b.id
    assert (a.workflow_type, a.state, a.created_by, a.audit_log) == (
        "compliance_scan",
        WorkflowState.PENDING,
        "alice",
        [],
    )
    assert {s.status for s in a.steps} == {StepStatus.PENDING}
    assert [s.index for s in a.steps] == list(range(len(a.steps)))


def test_clone_and_test_resize(registry: TemplateRegistry) -> None:
    wf = registry.create(
        "clone_and_test",
        {
            "target_vm": "web",
            "snapshot_name": " snap ",
            "change_spec": {"cpu": 4, "memory_gb": 1.5},
            "target": T,
        },
        "u",
    )
    c = {"vm_name": "web-staging", "cpu": 4, "memory_mb": 1536, "target": T}
    off = {"vm_name": "web-staging", "force": True, "target": T, "confirm": True}
    assert rows(wf.steps) == [
        (
            0,
            "clone",
            "aiops",
            "deploy_linked_clone",
            {
                "source_vm_name": "web",
                "snapshot_name": "snap",
                "new_name": "web-staging",
                "power_on": False,
                "target": T,
            },
            "",
            {},
            "",
        ),
        (1, "apply_changes", "aiops", "reconfigure_vm", c, "", {}, ""),
        (
            2,
            "power_on_staging",
            "aiops",
            "power_on_vm",
            {"vm_name": "web-staging", "target": T},
            "power_off_vm",
            off,
            "",
        ),
        (3, "monitor", "monitor", "investigate_vm", {"vm_name": "web-staging", "target": T}, "", {}, ""),
        (4, "GATE"),
        (5, "apply_to_production", "aiops", "reconfigure_vm", {**c, "vm_name": "web"}, "", {}, ""),
        (6, "cleanup", "aiops", "power_off_vm", off, "", {}, ""),
    ]
    message = wf.steps[4].params["message"]
    assert "4 vCPU / 1536 MB memory" in message and "5 minute(s)" in message
    assert wf.params == {
        "target_vm": "web",
        "change_spec": {"cpu": 4, "memory_gb": 1.5},
        "staging_vm": "web-staging",
        "snapshot_name": "snap",
        "monitor_minutes": 5,
        "target": T,
    }


def test_clone_and_test_guest_command(registry: TemplateRegistry) -> None:
    spec = {"command": "/bin/echo", "arguments": "hi", "username": "root", "password": {"$env": "PW"}}
    wf = registry.create(
        "clone_and_test", {"target_vm": "web", "snapshot_name": "s", "change_spec": spec}, "u"
    )
    run = {"vm_name": "web-staging", **spec, "target": "", "confirm": True}
    table = rows(wf.steps)
    assert [r[:4] for r in table] == [
        (0, "clone", "aiops", "deploy_linked_clone"),
        (1, "power_on_staging", "aiops", "power_on_vm"),
        (2, "GATE"),
        (3, "apply_changes", "aiops", "run_vm_guest_command"),
        (4, "monitor", "monitor", "investigate_vm"),
        (5, "GATE"),
        (6, "apply_to_production", "aiops", "run_vm_guest_command"),
        (7, "cleanup", "aiops", "power_off_vm"),
    ]
    assert table[3][4] == run
    assert table[6][4] == {**run, "vm_name": "web"}
    assert "'/bin/echo hi'" in wf.steps[2].params["message"] and "'root'" in wf.steps[2].params["message"]
    assert "guest command '/bin/echo'" in wf.steps[5].params["message"]


def test_incident_response(registry: TemplateRegistry) -> None:
    wf = registry.create("incident_response", {"alert_entity": "h1", "alert_name": "CPU", "target": T}, "u")
    assert rows(wf.steps) == [
        (0, "get_alarms", "monitor", "get_alarms", {"target": T}, "", {}, ""),
        (
            1,
            "get_events",
            "monitor",
            "get_events",
            {"hours": 1, "severity": "critical", "target": T},
            "",
            {},
            "",
        ),
        (2, "GATE"),
        (
            3,
            "acknowledge",
            "aiops",
            "acknowledge_vcenter_alarm",
            {"entity_name": "h1", "alarm_name": "CPU", "target": T},
            "",
            {},
            "",
        ),
    ]
    assert "'CPU'" in wf.steps[2].params["message"] and "'h1'" in wf.steps[2].params["message"]
    assert wf.params == {"alert_entity": "h1", "alert_name": "CPU", "target": T}


def test_investigate_alert_rounds_are_parallel_read_groups(registry: TemplateRegistry) -> None:
    short = registry.create("investigate_alert", {"alert_entity": "vm1", "target": T}, "u")
    assert rows(short.steps) == [
        (0, "gather_alarms", "monitor", "get_alarms", {"target": T}, "", {}, "round1-gather"),
        (1, "gather_events", "monitor", "get_events", {"hours": 2, "target": T}, "", {}, "round1-gather"),
        (
            2,
            "gather_aria_alerts",
            "aria",
            "list_alerts",
            {"active_only": True, "target": T},
            "",
            {},
            "round1-gather",
        ),
        (3, "GATE"),
    ]
    deep = registry.create(
        "investigate_alert", {"alert_entity": "vm1", "deep_dive": True, "target": T, "aria_target": "ar"}, "u"
    )
    assert rows(deep.steps)[2][4] == {"active_only": True, "target": "ar"}
    assert rows(deep.steps)[4:] == [
        (4, "gather_anomalies", "aria", "list_anomalies", {"target": "ar"}, "", {}, "round2-gather"),
        (
            5,
            "gather_capacity",
            "monitor",
            "get_cluster_health_summary",
            {"target": T},
            "",
            {},
            "round2-gather",
        ),
        (
            6,
            "gather_recent_alerts",
            "aria",
            "list_alerts",
            {"active_only": False, "target": "ar"},
            "",
            {},
            "round2-gather",
        ),
        (7, "GATE"),
    ]
    assert deep.params == {
        "alert_entity": "vm1",
        "alert_name": "",
        "deep_dive": True,
        "target": T,
        "aria_target": "ar",
    }


def test_plan_and_approve_applies_the_plan_by_reference(registry: TemplateRegistry) -> None:
    ops = [
        {"action": "power_off", "vm_name": "b"},
        {"action": "power_on", "vm_name": "a"},
        {"action": "x", "vm_name": "b"},
    ]
    wf = registry.create("plan_and_approve", {"operations": ops, "target": T}, "u")
    ref = {"plan_id": "__from_step_0__:plan_id", "target": T, "confirm": True}
    assert rows(wf.steps) == [
        (0, "create_plan", "aiops", "create_vm_plan", {"operations": ops, "target": T}, "", {}, ""),
        (1, "GATE"),
        (2, "apply_plan", "aiops", "apply_vm_plan", ref, "rollback_vm_plan", ref, ""),
    ]
    assert wf.params == {
        "operations": ops,
        "description": "Batch operation on b, a (3 steps)",
        "vm_names": ["b", "a"],
        "target": T,
    }


def test_compliance_scan_variants(registry: TemplateRegistry) -> None:
    default = registry.create("compliance_scan", {}, "u")
    assert [r[1:5] for r in rows(default.steps)] == [
        ("check_alarms", "monitor", "get_alarms", {"target": ""}),
        ("check_capacity", "monitor", "get_cluster_health_summary", {"target": ""}),
        ("check_anomalies", "aria", "list_anomalies", {"target": ""}),
    ]
    aria = registry.create("compliance_scan", {"cluster_id": "c8", "check_alarms": False, "target": T}, "u")
    assert [r[:5] for r in rows(aria.steps)] == [
        (0, "check_capacity", "aria", "get_capacity_overview", {"cluster_id": "c8", "target": T}),
        (1, "check_anomalies", "aria", "list_anomalies", {"target": T}),
    ]
    assert aria.params == {"target": T, "check_alarms": False, "check_capacity": True, "cluster_id": "c8"}


def test_network_segment_setup_full(registry: TemplateRegistry) -> None:
    wf = registry.create(
        "network_segment_setup",
        {
            "segment_id": "s1",
            "display_name": "app",
            "subnet": "10.0.0.1/24",
            "transport_zone_path": "/tz",
            "tier1_id": "t1",
            "tier0_path": "/t0",
            "nat_source": "10.0.0.0/24",
            "nat_translated": "192.0.2.1",
            "dfw_policy_id": "p1",
            "target": T,
        },
        "u",
    )
    assert rows(wf.steps) == [
        (
            0,
            "create_gateway",
            "nsx",
            "create_tier1_gateway",
            {"tier1_id": "t1", "display_name": "app-gw", "tier0_path": "/t0", "target": T},
            "delete_tier1_gateway",
            {"tier1_id": "t1", "target": T, "confirm": True},
            "",
        ),
        (
            1,
            "create_segment",
            "nsx",
            "create_segment",
            {
                "segment_id": "s1",
                "display_name": "app",
                "transport_zone_path": "/tz",
                "subnet": "10.0.0.1/24",
                "target": T,
            },
            "delete_segment",
            {"segment_id": "s1", "target": T, "confirm": True},
            "",
        ),
        (
            2,
            "create_nat",
            "nsx",
            "create_nat_rule",
            {
                "tier1_id": "t1",
                "rule_id": "s1-snat",
                "action": "SNAT",
                "source_network": "10.0.0.0/24",
                "translated_network": "192.0.2.1",
                "target": T,
            },
            "delete_nat_rule",
            {"tier1_id": "t1", "rule_id": "s1-snat", "target": T, "confirm": True},
            "",
        ),
        (
            3,
            "create_firewall",
            "nsx-security",
            "create_dfw_policy",
            {"policy_id": "p1", "display_name": "app-policy", "target": T},
            "delete_dfw_policy",
            {"policy_id": "p1", "target": T, "confirm": True},
            "",
        ),
        (4, "GATE"),
        (5, "verify", "nsx", "list_segments", {"target": T}, "", {}, ""),
    ]
    assert wf.params == {"segment_id": "s1", "display_name": "app", "target": T}


def test_network_segment_setup_minimal_is_segment_gate_verify(registry: TemplateRegistry) -> None:
    wf = registry.create(
        "network_segment_setup",
        {"segment_id": "s1", "display_name": "app", "subnet": "10.0.0.1/24", "transport_zone_path": "/tz"},
        "u",
    )
    assert [r[:4] for r in rows(wf.steps)] == [
        (0, "create_segment", "nsx", "create_segment"),
        (1, "GATE"),
        (2, "verify", "nsx", "list_segments"),
    ]


def test_vks_cluster_deploy(registry: TemplateRegistry) -> None:
    wf = registry.create(
        "vks_cluster_deploy",
        {
            "namespace_name": "ns",
            "cluster_id": "c8",
            "storage_policy": "gold",
            "tkc_name": "k",
            "k8s_version": "v1.30",
            "target": T,
        },
        "u",
    )
    tkc = {"name": "k", "namespace": "ns"}
    assert rows(wf.steps) == [
        (0, "GATE"),
        (
            1,
            "create_namespace",
            "vks",
            "create_namespace",
            {"name": "ns", "cluster_id": "c8", "storage_policy": "gold", "target": T, "confirm": True},
            "delete_namespace",
            {"name": "ns", "target": T, "confirm": True},
            "",
        ),
        (2, "GATE"),
        (
            3,
            "create_tkc",
            "vks",
            "create_tkc_cluster",
            {
                **tkc,
                "k8s_version": "v1.30",
                "vm_class": "best-effort-medium",
                "worker_count": 3,
                "target": T,
                "confirm": True,
            },
            "delete_tkc_cluster",
            {**tkc, "target": T, "confirm": True},
            "",
        ),
        (4, "verify_cluster", "vks", "get_tkc_cluster", {**tkc, "target": T}, "", {}, ""),
    ]
    assert wf.params == {"namespace": "ns", "tkc_name": "k", "target": T}


def test_rolling_restart(registry: TemplateRegistry) -> None:
    wf = registry.create("rolling_restart", {"vm_names": ["a", "b"], "target": T}, "u")
    table = rows(wf.steps)
    assert table[:2] == [(0, "pre_check", "monitor", "get_alarms", {"target": T}, "", {}, ""), (1, "GATE")]
    assert table[2:5] == [
        (
            2,
            "power_off_a",
            "aiops",
            "power_off_vm",
            {"vm_name": "a", "force": False, "target": T, "confirm": True},
            "power_on_vm",
            {"vm_name": "a", "target": T},
            "",
        ),
        (3, "power_on_a", "aiops", "power_on_vm", {"vm_name": "a", "target": T}, "", {}, ""),
        (4, "health_check_a", "monitor", "get_alarms", {"target": T}, "", {}, ""),
    ]
    assert [r[1] for r in table[5:]] == ["power_off_b", "power_on_b", "health_check_b"]
    assert "2 VM(s)" in wf.steps[1].params["message"] and "a, b" in wf.steps[1].params["message"]
    assert wf.params == {"vm_names": ["a", "b"], "target": T}


def test_disaster_recovery(registry: TemplateRegistry) -> None:
    wf = registry.create("disaster_recovery", {"vm_name": "db"}, "u")
    assert rows(wf.steps) == [
        (0, "GATE"),
        (
            1,
            "revert_snapshot",
            "aiops",
            "restore_vm_clean_slate",
            {"vm_name": "db", "snapshot_name": "baseline", "target": "", "confirm": True},
            "",
            {},
            "",
        ),
        (2, "verify_vm", "monitor", "get_vm_info", {"vm_name": "db", "target": ""}, "", {}, ""),
        (3, "verify_network", "nsx", "list_segments", {"target": ""}, "", {}, ""),
        (4, "verify_health", "monitor", "get_alarms", {"target": ""}, "", {}, ""),
    ]
    assert wf.params == {"vm_name": "db", "snapshot_name": "baseline", "target": ""}


def test_patch_deployment(registry: TemplateRegistry) -> None:
    wf = registry.create(
        "patch_deployment",
        {
            "vm_names": ["a"],
            "patch_local_path": "/p/fix.sh",
            "patch_guest_path": "/g/fix.sh",
            "install_command": "sh /g/fix.sh",
            "username": "root",
            "password": "pw",
            "target": T,
        },
        "u",
    )
    login = {"username": "root", "password": "pw", "target": T, "confirm": True}
    assert rows(wf.steps) == [
        (0, "GATE"),
        (
            1,
            "upload_a",
            "aiops",
            "upload_vm_guest_file",
            {"vm_name": "a", "local_path": "/p/fix.sh", "guest_path": "/g/fix.sh", **login},
            "",
            {},
            "",
        ),
        (
            2,
            "install_a",
            "aiops",
            "run_vm_guest_command_with_output",
            {"vm_name": "a", "command": "sh /g/fix.sh", **login},
            "",
            {},
            "",
        ),
        (3, "verify_a", "monitor", "get_alarms", {"target": T}, "", {}, ""),
    ]
    assert wf.params == {"vm_names": ["a"], "patch": "/p/fix.sh", "target": T}


def test_storage_expansion(registry: TemplateRegistry) -> None:
    wf = registry.create(
        "storage_expansion", {"host_name": "h", "iscsi_address": "192.0.2.5", "iscsi_port": 3261}, "u"
    )
    portal = {"host_name": "h", "address": "192.0.2.5", "port": 3261, "target": "", "confirm": True}
    assert rows(wf.steps) == [
        (
            0,
            "check_iscsi_status",
            "storage",
            "get_iscsi_status",
            {"host_name": "h", "target": ""},
            "",
            {},
            "",
        ),
        (1, "GATE"),
        (
            2,
            "enable_iscsi",
            "storage",
            "enable_iscsi",
            {"host_name": "h", "target": "", "confirm": True},
            "",
            {},
            "",
        ),
        (3, "add_iscsi_target", "storage", "add_iscsi_target", portal, "remove_iscsi_target", portal, ""),
        (
            4,
            "rescan_storage",
            "storage",
            "rescan_storage",
            {"host_name": "h", "target": "", "confirm": True},
            "",
            {},
            "",
        ),
        (5, "verify_datastores", "storage", "list_all_datastores", {"target": ""}, "", {}, ""),
    ]
    assert "192.0.2.5:3261" in wf.steps[1].params["message"]
    assert wf.params == {"host_name": "h", "iscsi_address": "192.0.2.5", "target": ""}


def test_baseline_capture_and_audit(registry: TemplateRegistry) -> None:
    cap = registry.create(
        "baseline_capture", {"baseline_name": "b1", "include_alarms": False, "target": T}, "u"
    )
    assert [r[1:5] for r in rows(cap.steps)] == [
        ("capture_vms", "monitor", "list_virtual_machines", {"target": T}),
        ("capture_hosts", "monitor", "list_esxi_hosts", {"target": T}),
        ("capture_segments", "nsx", "list_segments", {"target": T}),
        ("capture_datastores", "storage", "list_all_datastores", {"target": T}),
    ]
    assert cap.params == {
        "baseline_name": "b1",
        "baseline_path": "~/.vmware/baselines/b1.json",
        "target": T,
        "include_vms": True,
        "include_hosts": True,
        "include_network": True,
        "include_storage": True,
        "include_alarms": False,
    }
    generated = registry.create("baseline_capture", {}, "u").params["baseline_name"]
    assert generated.startswith("baseline-") and len(generated) == len("baseline-20260101-000000")
    audit = registry.create("baseline_audit", {"include_vms": False, "include_storage": False}, "u")
    assert [r[1:4] for r in rows(audit.steps)] == [
        ("current_hosts", "monitor", "list_esxi_hosts"),
        ("current_segments", "nsx", "list_segments"),
        ("check_anomalies", "aria", "list_anomalies"),
    ]
    assert audit.params == {
        "baseline_name": "latest",
        "baseline_path": "~/.vmware/baselines/latest.json",
        "target": "",
    }


def test_baseline_remediate_steps(snapshot_registry: TemplateRegistry) -> None:
    items = [
        {"resource": "vm1", "tool": "reconfigure_vm", "params": {"vm_name": "vm1", "cpu": 2}, "expected": 2},
        {"skill": "nsx", "tool": "delete_segment", "params": {"segment_id": "old"}},
    ]
    wf = snapshot_registry.create("baseline_remediate", {"drift_items": items, "target": T}, "u")
    assert rows(wf.steps) == [
        (0, "pre_check_alarms", "monitor", "get_alarms", {"target": T}, "", {}, ""),
        (1, "GATE"),
        (2, "fix_vm1", "aiops", "reconfigure_vm", {"vm_name": "vm1", "cpu": 2, "target": T}, "", {}, ""),
        (
            3,
            "fix_item_1",
            "nsx",
            "delete_segment",
            {"segment_id": "old", "target": T, "confirm": True},
            "",
            {},
            "",
        ),
        (4, "post_verify", "monitor", "get_alarms", {"target": T}, "", {}, ""),
    ]
    assert "2 drift(s): vm1, unknown" in wf.steps[1].params["message"]
    assert wf.params == {"drift_count": 2, "target": T}


def test_listing_counts_steps_from_defaults_or_the_first_example(registry: TemplateRegistry) -> None:
    listed = {e.name: e.model_dump() for e in registry.listing()}
    old_keys = ("name", "type", "description", "steps")  # the 2.4.0 keys; discovery adds others
    assert {k: listed["compliance_scan"][k] for k in old_keys} == {
        "name": "compliance_scan",
        "type": "builtin",
        "description": listed["compliance_scan"]["description"],
        "steps": 3,
    }
    assert listed["baseline_capture"]["steps"] == 5
    assert listed["baseline_audit"]["steps"] == 5
    assert listed["incident_response"]["steps"] == 4
    assert all(isinstance(e["steps"], int) and e["steps"] > 0 for e in listed.values())
    descriptions = [e["description"] for e in listed.values()]
    assert all(d and "\n" not in d for d in descriptions) and len(set(descriptions)) == 15
