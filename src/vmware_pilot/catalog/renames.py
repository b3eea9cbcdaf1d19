"""Pre-2.0 tool names and their current names, applied whenever a step is built."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["RENAMES", "SKILL_PACKAGES", "rename_tool", "skill_key"]

_log = logging.getLogger(__name__)

# skill (bare name) -> {old tool name: current tool name}
RENAMES: dict[str, dict[str, str]] = {
    "aiops": {
        "cluster_add_host": "add_cluster_host",
        "cluster_configure": "configure_cluster",
        "cluster_create": "create_cluster",
        "cluster_delete": "delete_cluster",
        "cluster_health_summary": "get_cluster_health_summary",
        "cluster_info": "get_cluster_info",
        "cluster_remove_host": "remove_cluster_host",
        "cross_vcenter_attention": "get_cross_vcenter_attention",
        "datastore_investigation_bundle": "investigate_datastore",
        "host_investigation_bundle": "investigate_host",
        "scan_datastore_images": "scan_all_datastore_images",
        "vm_apply_plan": "apply_vm_plan",
        "vm_cancel_ttl": "cancel_vm_ttl",
        "vm_clean_slate": "restore_vm_clean_slate",
        "vm_clone": "clone_vm",
        "vm_create": "create_vm",
        "vm_create_plan": "create_vm_plan",
        "vm_create_snapshot": "create_vm_snapshot",
        "vm_delete": "delete_vm",
        "vm_delete_snapshot": "delete_vm_snapshot",
        "vm_guest_download": "download_vm_guest_file",
        "vm_guest_exec": "run_vm_guest_command",
        "vm_guest_exec_output": "run_vm_guest_command_with_output",
        "vm_guest_provision": "provision_vm_guest",
        "vm_guest_upload": "upload_vm_guest_file",
        "vm_investigation_bundle": "investigate_vm",
        "vm_list_plans": "list_vm_plans",
        "vm_list_snapshots": "list_vm_snapshots",
        "vm_list_ttl": "list_vm_ttls",
        "vm_migrate": "migrate_vm",
        "vm_power_off": "power_off_vm",
        "vm_power_on": "power_on_vm",
        "vm_reconfigure": "reconfigure_vm",
        "vm_revert_snapshot": "revert_vm_snapshot",
        "vm_rollback_plan": "rollback_vm_plan",
        "vm_set_ttl": "set_vm_ttl",
        "vm_task_status": "get_vm_task_status",
        "vmk_ping": "ping_from_vmk",
    },
    "aria": {
        "findings_list": "list_findings",
        "fleet_certificate_list": "list_fleet_certificates",
        "fleet_domain_list": "list_fleet_domains",
        "fleet_password_account_list": "list_fleet_password_accounts",
    },
    "avi": {
        "ako_amko_status": "get_ako_amko_status",
        "ako_clusters": "list_ako_clusters",
        "ako_config_diff": "diff_ako_config",
        "ako_config_show": "get_ako_config",
        "ako_config_upgrade": "upgrade_ako_config",
        "ako_ingress_check": "check_ako_ingress",
        "ako_ingress_diagnose": "diagnose_ako_ingress",
        "ako_ingress_map": "list_ako_ingresses",
        "ako_logs": "get_ako_logs",
        "ako_restart": "restart_ako",
        "ako_status": "get_ako_status",
        "ako_sync_diff": "diff_ako_sync",
        "ako_sync_force": "force_ako_sync",
        "ako_sync_status": "get_ako_sync_status",
        "ako_version": "get_ako_version",
        "pool_list": "list_lb_pools",
        "pool_member_disable": "disable_lb_pool_member",
        "pool_member_enable": "enable_lb_pool_member",
        "pool_members": "list_lb_pool_members",
        "se_health": "get_service_engine_health",
        "se_list": "list_service_engines",
        "ssl_expiry_check": "check_ssl_cert_expiry",
        "ssl_list": "list_ssl_certs",
        "vs_analytics": "get_virtual_service_analytics",
        "vs_error_logs": "get_virtual_service_error_logs",
        "vs_list": "list_virtual_services",
        "vs_status": "get_virtual_service_status",
        "vs_toggle": "set_virtual_service_enabled",
    },
    "debug": {
        "case_close": "close_case",
        "case_get": "get_case",
        "case_grade": "grade_case",
        "case_hypotheses": "record_case_hypothesis",
        "case_knowledge": "get_case_knowledge",
        "case_list": "list_cases",
        "case_open": "open_case",
        "case_plan": "plan_case",
        "case_readiness": "get_case_readiness",
        "case_record_gap": "record_case_gap",
        "case_submit_evidence": "submit_case_evidence",
        "case_timeline": "record_case_timeline",
        "incident_timeline": "build_incident_timeline",
    },
    "log-insight": {
        "alert_get": "get_log_alert",
        "alert_history": "get_log_alert_history",
        "alert_list": "list_log_alerts",
        "log_aggregate": "aggregate_logs",
        "log_fields": "list_log_fields",
        "log_search": "search_logs",
        "log_version": "get_log_insight_version",
    },
    "monitor": {
        "active_sessions": "list_active_sessions",
        "active_tasks": "list_active_tasks",
        "certificate_status": "get_certificate_status",
        "cluster_health_summary": "get_cluster_health_summary",
        "cluster_last_apply_result": "get_cluster_last_apply_result",
        "cluster_patch_compliance": "get_cluster_patch_compliance",
        "cross_vcenter_attention": "get_cross_vcenter_attention",
        "datastore_capacity": "get_datastore_capacity",
        "datastore_investigation_bundle": "investigate_datastore",
        "host_investigation_bundle": "investigate_host",
        "host_log_scan": "scan_host_logs",
        "host_memory_tiering": "get_host_memory_tiering",
        "host_performance": "get_host_performance",
        "license_status": "get_license_status",
        "ntp_status": "get_ntp_status",
        "resource_pool_usage": "get_resource_pool_usage",
        "snapshot_aging": "find_aging_snapshots",
        "vcenter_deployment_size": "get_vcenter_deployment_size",
        "vm_backup_snapshot_history": "get_vm_backup_snapshot_history",
        "vm_info": "get_vm_info",
        "vm_investigation_bundle": "investigate_vm",
        "vm_list_snapshots": "list_vm_snapshots",
        "vm_performance": "get_vm_performance",
    },
    "pilot": {
        "plan_workflow": "create_workflow_from_template",
    },
    "privateai": {
        "directpath_profile_list": "list_directpath_profiles",
        "gpu_consumer_list": "list_gpu_consumers",
        "gpu_device_list": "list_gpu_devices",
        "gpu_host_get": "get_gpu_host",
        "gpu_host_list": "list_gpu_hosts",
        "gpu_host_readiness": "check_gpu_host_readiness",
        "gpu_utilization": "get_gpu_utilization",
        "pais_bundle_verify": "verify_pais_bundle",
        "pais_data_source_list": "list_pais_data_sources",
        "pais_knowledge_base_list": "list_pais_knowledge_bases",
        "pais_model_catalog": "get_pais_model_catalog",
        "pais_model_list": "list_pais_models",
        "pais_monitoring_summary": "get_pais_monitoring_summary",
        "pais_sizing_advise": "advise_pais_sizing",
        "vgpu_assign": "assign_vgpu",
        "vgpu_profile_list": "list_vgpu_profiles",
        "vgpu_profile_validate": "validate_vgpu_profile",
    },
    "storage": {
        "fc_adapter_list": "list_fc_adapters",
        "storage_device_paths": "list_storage_device_paths",
        "storage_iscsi_add_target": "add_iscsi_target",
        "storage_iscsi_enable": "enable_iscsi",
        "storage_iscsi_remove_target": "remove_iscsi_target",
        "storage_iscsi_status": "get_iscsi_status",
        "storage_rescan": "rescan_storage",
        "vsan_capacity": "get_vsan_capacity",
        "vsan_efficiency": "get_vsan_efficiency",
        "vsan_health": "get_vsan_health",
    },
    "vdi": {
        "ad_user_search": "search_ad_users",
        "app_pool_list": "list_app_pools",
        "entitlement_add": "add_entitlement",
        "entitlement_list": "list_entitlements",
        "entitlement_remove": "remove_entitlement",
        "event_list": "list_vdi_events",
        "farm_list": "list_farms",
        "health_summary": "get_vdi_health_summary",
        "image_list": "list_vdi_images",
        "machine_get": "get_vdi_machine",
        "machine_list": "list_vdi_machines",
        "machine_maintenance": "set_vdi_machine_maintenance",
        "machine_remove": "remove_vdi_machine",
        "machine_reset": "reset_vdi_machine",
        "pool_get": "get_desktop_pool",
        "pool_list": "list_desktop_pools",
        "pool_push_image": "push_desktop_pool_image",
        "pool_set_enabled": "set_desktop_pool_enabled",
        "pool_utilization": "get_desktop_pool_utilization",
        "session_disconnect": "disconnect_vdi_session",
        "session_get": "get_vdi_session",
        "session_list": "list_vdi_sessions",
        "session_logoff": "logoff_vdi_session",
        "session_send_message": "send_vdi_session_message",
        "session_stats": "get_vdi_session_stats",
        "task_cancel": "cancel_vdi_task",
        "task_status": "get_vdi_task_status",
    },
    "vks": {
        "get_supervisor_kubeconfig": "issue_supervisor_kubeconfig",
        "get_tkc_kubeconfig": "issue_tkc_kubeconfig",
        "list_vm_groups": "list_vm_service_groups",
        "list_vm_network_interfaces": "list_vm_service_network_interfaces",
        "list_vm_snapshots": "list_vm_service_snapshots",
    },
}


_PREFIX = re.compile(r"^vmware-")

SKILL_PACKAGES: Final[Mapping[str, str]] = MappingProxyType({"nsx": "vmware-nsx-mgmt"})
"""The one statement of skills published under another name (PyPI's ``vmware-nsx`` is an
unrelated library): vmware-nsx-mgmt serves the ``nsx`` skill and runs ``vmware-nsx-mcp``. Both
spellings name the same skill everywhere (``skill_key``); ``dispatch/locate`` installs from it."""

_ALIASES: Final = {package.removeprefix("vmware-"): skill for skill, package in SKILL_PACKAGES.items()}


def skill_key(skill: object) -> str:
    """Bare family skill name: trimmed, lower-case, ``_`` as ``-``, without ``vmware-``.

    A package name that differs from its skill maps to the skill (``nsx-mgmt`` → ``nsx``).
    """
    if not isinstance(skill, str):
        return ""
    bare = _PREFIX.sub("", skill.strip().lower().replace("_", "-"))
    return _ALIASES.get(bare, bare)


def rename_tool(skill: str, tool: str) -> str:
    """The current name of ``tool`` on ``skill`` (unchanged when it is not an old name)."""
    new = RENAMES.get(skill_key(skill), {}).get(tool)
    if new is None:
        return tool
    _log.info("renamed %s.%s to its current name %s", skill, tool, new)
    return new
