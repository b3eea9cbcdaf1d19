"""The curated skill catalog: 13 family skills, their best-known tools and a risk label for each.

Risk labels: ``low`` (an inspection: reads only), ``medium`` (changes something recoverable),
``high`` (removes, interrupts, runs arbitrary code or hands out credentials). The review,
the approval-gate rule and blast radius read these labels through ``catalog.registry.Catalog``;
skills and tools found by live discovery are added on top of this table, never instead of it.
Order matters: it is the order ``get_skill_catalog`` shows and ``design_workflow`` lists.
"""

from __future__ import annotations

from typing import Final, Literal, TypedDict

__all__ = ["CURATED", "RISK_LEVELS", "Risk", "SkillEntry", "ToolEntry"]

Risk = Literal["low", "medium", "high", "critical"]

# Lowest to highest; the cross-skill fallback of the classifier takes the highest match.
RISK_LEVELS: Final[tuple[str, ...]] = ("low", "medium", "high", "critical")


class ToolEntry(TypedDict):
    risk: str
    desc: str


class SkillEntry(TypedDict):
    description: str
    tools: dict[str, ToolEntry]


def _t(risk: Risk, desc: str) -> ToolEntry:
    return {"risk": risk, "desc": desc}


CURATED: Final[dict[str, SkillEntry]] = {
    "aiops": {
        "description": "Change VMs and clusters: power, sizing, clones, guest commands, plans, alarms",
        "tools": {
            "power_on_vm": _t("medium", "Start a powered-off VM"),
            "power_off_vm": _t("high", "Stop a VM, gracefully or by force"),
            "reconfigure_vm": _t("medium", "Change the vCPU count or memory of a VM"),
            "deploy_linked_clone": _t("medium", "Make a linked clone of a VM from one of its snapshots"),
            "deploy_vm_from_template": _t("medium", "Create a VM from a vSphere template"),
            "deploy_vm_from_ova": _t("medium", "Create a VM from an OVA package"),
            "batch_clone_vms": _t("medium", "Clone several VMs in one request"),
            "run_vm_guest_command": _t("high", "Run a program inside a VM's guest OS"),
            "run_vm_guest_command_with_output": _t("high", "Run a guest program and return what it printed"),
            "upload_vm_guest_file": _t("high", "Copy a local file into a VM's guest OS"),
            "provision_vm_guest": _t("high", "Run a sequence of guest setup actions inside a VM"),
            "create_vm_plan": _t("medium", "Record a multi-step VM change plan without running it"),
            "apply_vm_plan": _t("medium", "Carry out a recorded VM change plan"),
            "rollback_vm_plan": _t("medium", "Undo the applied steps of a VM change plan"),
            "restore_vm_clean_slate": _t(
                "high", "Return a VM to its baseline snapshot, losing later changes"
            ),
            "create_cluster": _t("medium", "Create a cluster with HA and DRS settings"),
            "delete_cluster": _t("high", "Remove a cluster that has no hosts"),
            "acknowledge_vcenter_alarm": _t("medium", "Mark a triggered vCenter alarm as seen"),
            "reset_vcenter_alarm": _t(
                "high", "Reset every triggered alarm matching a status and entity type"
            ),
        },
    },
    "monitor": {
        "description": "Look, don't touch: inventory, alarms, events and VM details from vCenter",
        "tools": {
            "list_virtual_machines": _t("low", "Inventory of VMs"),
            "list_esxi_hosts": _t("low", "Inventory of ESXi hosts"),
            "get_alarms": _t("low", "Triggered alarms, with hints on what to do"),
            "investigate_vm": _t("low", "Alarms, events and neighbourhood of one VM"),
            "get_events": _t("low", "Recent vCenter events filtered by severity"),
            "get_vm_info": _t("low", "Configuration of one VM: CPU, memory, disks, NICs"),
        },
    },
    "nsx": {
        "description": "NSX networking objects: segments, Tier-1 gateways, NAT, static routes",
        "tools": {
            "list_segments": _t("low", "Network segments and their subnets"),
            "create_segment": _t("medium", "Add a network segment"),
            "delete_segment": _t("high", "Remove a network segment"),
            "create_tier1_gateway": _t("medium", "Add a Tier-1 gateway"),
            "delete_tier1_gateway": _t("high", "Remove a Tier-1 gateway"),
            "create_nat_rule": _t("medium", "Add a NAT rule to a Tier-1 gateway"),
            "delete_nat_rule": _t("high", "Remove a NAT rule"),
            "create_static_route": _t("medium", "Add a static route"),
        },
    },
    "nsx-security": {
        "description": "NSX distributed firewall, security groups, traceflow and IDPS",
        "tools": {
            "list_dfw_policies": _t("low", "Show the distributed firewall policies"),
            "create_dfw_policy": _t("medium", "Add a distributed firewall policy"),
            "delete_dfw_policy": _t("high", "Remove a distributed firewall policy"),
            "create_dfw_rule": _t("medium", "Add a rule to a firewall policy"),
            "delete_dfw_rule": _t("high", "Remove a firewall rule"),
            "create_group": _t("medium", "Add a security group"),
            "run_traceflow": _t("medium", "Inject a trace packet to follow its network path"),
        },
    },
    "aria": {
        "description": "Aria Operations: alerts, metrics, capacity forecasts and anomalies",
        "tools": {
            "list_alerts": _t("low", "Open and past alerts, filterable"),
            "acknowledge_alert": _t("medium", "Mark an alert as acknowledged"),
            "get_capacity_overview": _t("low", "Capacity summary and recommendations"),
            "get_remaining_capacity": _t("low", "CPU, memory and disk still available"),
            "get_time_remaining": _t("low", "Forecast days until capacity runs out"),
            "list_anomalies": _t("low", "Metric anomalies found by machine learning"),
            "list_rightsizing_recommendations": _t("low", "VMs with too much or too little capacity"),
        },
    },
    "vks": {
        "description": "vSphere Kubernetes: Supervisor, vSphere Namespaces and TKC clusters",
        "tools": {
            "create_namespace": _t("medium", "Add a vSphere Namespace"),
            "delete_namespace": _t("high", "Remove a vSphere Namespace and what runs in it"),
            "create_tkc_cluster": _t("medium", "Create a Tanzu Kubernetes cluster"),
            "scale_tkc_cluster": _t("medium", "Change the number of worker nodes"),
            "upgrade_tkc_cluster": _t("medium", "Move a cluster to a newer Kubernetes release"),
            "delete_tkc_cluster": _t("high", "Remove a Tanzu Kubernetes cluster"),
            "issue_tkc_kubeconfig": _t("high", "Hand out a kubeconfig carrying a live cluster credential"),
            "issue_supervisor_kubeconfig": _t("high", "Hand out a Supervisor kubeconfig with a live token"),
        },
    },
    "storage": {
        "description": "Datastores, iSCSI adapters and targets, vSAN health and capacity",
        "tools": {
            "enable_iscsi": _t("medium", "Turn on the software iSCSI adapter of a host"),
            "add_iscsi_target": _t("medium", "Point a host's iSCSI adapter at a new target"),
            "rescan_storage": _t("medium", "Rescan every storage adapter of a host"),
            "get_vsan_health": _t("low", "vSAN health checks of a cluster"),
            "get_vsan_capacity": _t("low", "vSAN space used and free"),
        },
    },
    "avi": {
        "description": "Avi load balancer: virtual services, pools and members, AKO in Kubernetes",
        "tools": {
            "list_virtual_services": _t("low", "All virtual services: address and health"),
            "get_virtual_service_status": _t("low", "Health and state of one virtual service"),
            "get_virtual_service_analytics": _t(
                "low", "Traffic metrics of a virtual service, e.g. to see a drain reach zero"
            ),
            "set_virtual_service_enabled": _t("high", "Switch a virtual service on or off"),
            "list_lb_pools": _t("low", "Load-balancer pools on the Controller"),
            "list_lb_pool_members": _t("low", "Members of a pool with health and enabled flag"),
            "disable_lb_pool_member": _t("high", "Take a pool member out of service, letting it drain"),
            "enable_lb_pool_member": _t("medium", "Put a drained pool member back into service"),
            "check_ssl_cert_expiry": _t("low", "Certificates that expire within a number of days"),
            "get_ako_status": _t("low", "State of the AKO pod in a Kubernetes context"),
            "upgrade_ako_config": _t("medium", "Upgrade AKO through Helm (a preview without confirm)"),
            "restart_ako": _t("high", "Restart the AKO controller pod"),
            "force_ako_sync": _t("high", "Make AKO push every Kubernetes object to the Controller again"),
        },
    },
    "debug": {
        "description": "Offline incident analysis: timelines, hypotheses and graded evidence cases",
        "tools": {
            "build_incident_timeline": _t("low", "Turn collected events into spikes and ranked causes"),
            "list_symptom_categories": _t("low", "Kinds of symptom and what to check for each"),
            "get_case_readiness": _t("low", "How far each category can be proven with the skills at hand"),
            "plan_case": _t("low", "Suggest the next skill call that would add evidence to a case"),
            "record_case_timeline": _t(
                "medium", "Order a case's evidence in time and save it as the case timeline"
            ),
        },
    },
    "harden": {
        "description": "Compliance baselines: scans, violations, drift and suggested fixes",
        "tools": {
            "list_baselines": _t("low", "Compliance baselines that can be scanned against"),
            "scan_target": _t("medium", "Check a whole vCenter against a compliance baseline"),
            "list_violations": _t("low", "What the most recent scan found wrong, grouped by node"),
            "list_drift_events": _t("low", "Changes away from the baseline, with times"),
            "get_remediation": _t("low", "How to fix one violation, as recorded by the scanner"),
        },
    },
    "log-insight": {
        "description": "Log Insight: log search, aggregation and alert definitions",
        "tools": {
            "search_logs": _t("low", "Query log events between two times"),
            "aggregate_logs": _t("low", "Count log events over time and spot spikes"),
            "list_log_alerts": _t("low", "Alert definitions"),
            "get_log_alert_history": _t("low", "When one alert fired recently"),
        },
    },
    "privateai": {
        "description": "Private AI Foundation: GPU hosts, vGPU profiles and GPU use",
        "tools": {
            "list_gpu_hosts": _t("low", "Hosts that have GPUs"),
            "get_gpu_utilization": _t("low", "GPU load of each vGPU-backed VM"),
            "check_gpu_host_readiness": _t("low", "Which GPU hosts are set up to back vGPU VMs"),
            "validate_vgpu_profile": _t("low", "Check a vGPU profile change before making it"),
            "assign_vgpu": _t("high", "Give a powered-off VM a vGPU profile"),
        },
    },
    "vdi": {
        "description": "Horizon desktops: pools, sessions, machines and images",
        "tools": {
            "get_vdi_health_summary": _t(
                "low", "Overall Horizon state: sessions, broken machines, pools that can serve"
            ),
            "list_vdi_sessions": _t("low", "Signed-in sessions, narrowed by user, pool or state"),
            "get_desktop_pool_utilization": _t("low", "How full each desktop pool is"),
            "get_vdi_task_status": _t("low", "How far a desktop pool's background job has got"),
            "send_vdi_session_message": _t("medium", "Warn signed-in users, e.g. before maintenance"),
            "set_vdi_machine_maintenance": _t("medium", "Put machines into or out of maintenance mode"),
            "logoff_vdi_session": _t("high", "Sign users out of their sessions by force"),
            "reset_vdi_machine": _t("high", "Power-cycle desktop machines without a clean guest shutdown"),
            "push_desktop_pool_image": _t("high", "Roll a new image out, rebuilding every desktop of a pool"),
        },
    },
}
