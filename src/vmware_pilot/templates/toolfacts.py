"""What templates need to know about a companion tool: does it take ``confirm``, does it take ``target``.

The tool's input schema decides when it is known (discovered by ``catalog refresh``, or the
companion snapshot in tests). Without a schema, ``confirm`` falls back to the list of companion
tools that preview unless called with ``confirm: true`` (docs/contract.md#tools-that-preview).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vmware_pilot.catalog.renames import skill_key

__all__ = ["GATED_TOOLS", "SchemaLookup", "ToolFacts"]

SchemaLookup = Callable[[str, str], Mapping[str, Any] | None]
"""(skill, tool) → the tool's JSON input schema, or None when unknown."""

GATED_TOOLS: dict[str, frozenset[str]] = {
    "aiops": frozenset(
        {
            "add_host_vmk",
            "apply_vm_plan",
            "create_drs_rule",
            "create_dvs_portgroup",
            "delete_cluster",
            "delete_drs_rule",
            "delete_vm",
            "delete_vm_snapshot",
            "migrate_vm",
            "power_off_vm",
            "provision_vm_guest",
            "remove_cluster_host",
            "remove_host_vmk",
            "reset_vcenter_alarm",
            "restore_vm_clean_slate",
            "revert_vm_snapshot",
            "rollback_vm_plan",
            "run_vm_guest_command",
            "run_vm_guest_command_with_output",
            "set_drs_rule_enabled",
            "set_vm_ttl",
            "set_vmk_service",
            "upload_vm_guest_file",
        }
    ),
    "nsx": frozenset(
        {"delete_ip_pool", "delete_nat_rule", "delete_segment", "delete_static_route", "delete_tier1_gateway"}
    ),
    "nsx-security": frozenset({"delete_dfw_policy", "delete_dfw_rule", "delete_group"}),
    "avi": frozenset(
        {
            "disable_lb_pool_member",
            "force_ako_sync",
            "restart_ako",
            "set_virtual_service_enabled",
            "upgrade_ako_config",
        }
    ),
    "aria": frozenset(
        {
            "acknowledge_alert",
            "cancel_alert",
            "delete_alert_definition",
            "delete_report",
            "end_resource_maintenance",
            "start_resource_maintenance",
        }
    ),
    "vks": frozenset({"create_namespace", "create_tkc_cluster", "delete_namespace", "delete_tkc_cluster"}),
    "storage": frozenset({"add_iscsi_target", "enable_iscsi", "remove_iscsi_target", "rescan_storage"}),
    "vdi": frozenset(
        {
            "add_entitlement",
            "cancel_vdi_task",
            "disconnect_vdi_session",
            "logoff_vdi_session",
            "push_desktop_pool_image",
            "remove_entitlement",
            "remove_vdi_machine",
            "reset_vdi_machine",
            "set_desktop_pool_enabled",
            "set_vdi_machine_maintenance",
        }
    ),
    "privateai": frozenset({"assign_vgpu"}),
}
"""Companion tools that only preview unless called with ``confirm: true`` (used without a schema)."""


def _key(skill: str) -> str:
    return skill_key(skill)  # ``nsx-mgmt`` and ``nsx`` are one skill (catalog.renames.SKILL_PACKAGES)


class ToolFacts:
    """Answers per (skill, tool); tool names must already be renamed to their current names."""

    def __init__(self, lookup: SchemaLookup | None = None) -> None:
        self._lookup = lookup

    def schema(self, skill: str, tool: str) -> Mapping[str, Any] | None:
        if self._lookup is None:
            return None
        return self._lookup(_key(skill), tool)

    def accepts(self, skill: str, tool: str, param: str) -> bool | None:
        """Whether the tool's schema declares ``param``; None when the schema is unknown."""
        schema = self.schema(skill, tool)
        if schema is None:
            return None
        props = schema.get("properties")
        return isinstance(props, Mapping) and param in props

    def is_gated(self, skill: str, tool: str) -> bool:
        """Does the tool preview unless called with ``confirm: true``?"""
        known = self.accepts(skill, tool, "confirm")
        if known is not None:
            return known
        return tool in GATED_TOOLS.get(_key(skill), frozenset())
