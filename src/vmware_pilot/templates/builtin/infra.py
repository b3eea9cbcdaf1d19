"""Built-ins for networks, Kubernetes, storage and drift remediation.

See docs/contract.md#built-in-templates.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from vmware_pilot.catalog.renames import rename_tool
from vmware_pilot.templates.builtin.base import BuiltinTemplate, ParamProblem, Plan, StepList
from vmware_pilot.templates.params import NonBlank, Target, TemplateParams
from vmware_pilot.templates.toolfacts import ToolFacts

__all__ = ["BASELINE_REMEDIATE", "NETWORK_SEGMENT_SETUP", "STORAGE_EXPANSION", "VKS_CLUSTER_DEPLOY"]


# --- network_segment_setup ------------------------------------------------------------------


class NetworkSegmentSetupParams(TemplateParams):
    segment_id: Annotated[NonBlank, Field(description="Id of the NSX segment to create.")]
    display_name: Annotated[
        NonBlank, Field(description="Display name of the segment (the gateway is named <display_name>-gw).")
    ]
    subnet: Annotated[NonBlank, Field(description="Gateway address with prefix length, e.g. 10.10.1.1/24.")]
    transport_zone_path: Annotated[
        NonBlank, Field(description="Policy path of the transport zone the segment joins.")
    ]
    tier1_id: Annotated[
        str, Field(description="Id of a Tier-1 gateway to create and attach; empty attaches none.")
    ] = ""
    tier0_path: Annotated[
        str, Field(description="Policy path of the Tier-0 the new Tier-1 links to (needs tier1_id).")
    ] = ""
    nat_source: Annotated[
        str, Field(description="Source network of a SNAT rule (needs nat_translated and tier1_id).")
    ] = ""
    nat_translated: Annotated[
        str, Field(description="Translated address of the SNAT rule (needs nat_source).")
    ] = ""
    dfw_policy_id: Annotated[
        str,
        Field(
            description="Id of a distributed-firewall policy to create for the segment; empty creates none."
        ),
    ] = ""
    target: Target = ""


def network_segment_setup(p: NetworkSegmentSetupParams, facts: ToolFacts) -> Plan:
    if bool(p.nat_source) != bool(p.nat_translated):
        missing = "nat_translated" if p.nat_source else "nat_source"
        raise ParamProblem(missing, "a SNAT rule needs both nat_source and nat_translated")
    for needs_gateway in ("nat_source", "tier0_path"):
        if getattr(p, needs_gateway) and not p.tier1_id:
            raise ParamProblem(
                "tier1_id", f"{needs_gateway} is given but there is no Tier-1 gateway (tier1_id)"
            )
    t = p.target
    s = StepList()
    if p.tier1_id:
        s.add(
            "create_gateway",
            "nsx",
            "create_tier1_gateway",
            {
                "tier1_id": p.tier1_id,
                "display_name": f"{p.display_name}-gw",
                "tier0_path": p.tier0_path,
                "target": t,
            },
            "delete_tier1_gateway",
            {"tier1_id": p.tier1_id, "target": t, "confirm": True},
        )
    s.add(
        "create_segment",
        "nsx",
        "create_segment",
        {
            "segment_id": p.segment_id,
            "display_name": p.display_name,
            "transport_zone_path": p.transport_zone_path,
            "subnet": p.subnet,
            "target": t,
        },
        "delete_segment",
        {"segment_id": p.segment_id, "target": t, "confirm": True},
    )
    if p.nat_source:
        rule = {"tier1_id": p.tier1_id, "rule_id": f"{p.segment_id}-snat"}
        s.add(
            "create_nat",
            "nsx",
            "create_nat_rule",
            {
                **rule,
                "action": "SNAT",
                "source_network": p.nat_source,
                "translated_network": p.nat_translated,
                "target": t,
            },
            "delete_nat_rule",
            {**rule, "target": t, "confirm": True},
        )
    if p.dfw_policy_id:
        s.add(
            "create_firewall",
            "nsx-security",
            "create_dfw_policy",
            {"policy_id": p.dfw_policy_id, "display_name": f"{p.display_name}-policy", "target": t},
            "delete_dfw_policy",
            {"policy_id": p.dfw_policy_id, "target": t, "confirm": True},
        )
    s.gate(f"Network '{p.display_name}' has been created. Verify it and finish?")
    s.add("verify", "nsx", "list_segments", {"target": t})
    return Plan(s.steps, {"segment_id": p.segment_id, "display_name": p.display_name, "target": t})


NETWORK_SEGMENT_SETUP = BuiltinTemplate(
    "network_segment_setup",
    "Build an app network on NSX: optional Tier-1 gateway, segment, optional SNAT and DFW policy.",
    NetworkSegmentSetupParams,
    network_segment_setup,
    (
        {
            "segment_id": "app-seg",
            "display_name": "app",
            "subnet": "10.10.1.1/24",
            "transport_zone_path": "/infra/sites/default/enforcement-points/default/transport-zones/tz-overlay",
            "tier1_id": "app-t1",
            "tier0_path": "/infra/tier-0s/t0",
            "nat_source": "10.10.1.0/24",
            "nat_translated": "192.0.2.10",
            "dfw_policy_id": "app-policy",
            "target": "nsx-lab",
        },
        {
            "segment_id": "app-seg",
            "display_name": "app",
            "subnet": "10.10.1.1/24",
            "transport_zone_path": "/infra/sites/default/enforcement-points/default/transport-zones/tz-overlay",
        },
    ),
)


# --- vks_cluster_deploy ---------------------------------------------------------------------


class VksClusterDeployParams(TemplateParams):
    namespace_name: Annotated[NonBlank, Field(description="vSphere Namespace to create.")]
    cluster_id: Annotated[
        NonBlank, Field(description="Id of the vSphere cluster (Supervisor) that hosts the namespace.")
    ]
    storage_policy: Annotated[NonBlank, Field(description="Storage policy the namespace and cluster use.")]
    tkc_name: Annotated[NonBlank, Field(description="Name of the Tanzu Kubernetes cluster to create.")]
    k8s_version: Annotated[NonBlank, Field(description="Kubernetes release of the cluster, e.g. v1.29.4.")]
    vm_class: Annotated[NonBlank, Field(description="VM class of the cluster's nodes.")] = (
        "best-effort-medium"
    )
    worker_count: Annotated[Annotated[int, Field(ge=1)], Field(description="Number of worker nodes.")] = 3
    target: Target = ""


def vks_cluster_deploy(p: VksClusterDeployParams, facts: ToolFacts) -> Plan:
    ns, tkc, t = p.namespace_name, p.tkc_name, p.target
    s = StepList()
    s.gate(
        f"Create vSphere Namespace '{ns}' on cluster '{p.cluster_id}' with storage policy "
        f"'{p.storage_policy}'. Approve?"
    )
    s.add(
        "create_namespace",
        "vks",
        "create_namespace",
        {
            "name": ns,
            "cluster_id": p.cluster_id,
            "storage_policy": p.storage_policy,
            "target": t,
            "confirm": True,
        },
        "delete_namespace",
        {"name": ns, "target": t, "confirm": True},
    )
    s.gate(f"Namespace '{ns}' exists. Deploy the TKC cluster '{tkc}' ({p.worker_count} worker(s))?")
    cluster = {"name": tkc, "namespace": ns}
    s.add(
        "create_tkc",
        "vks",
        "create_tkc_cluster",
        {
            **cluster,
            "k8s_version": p.k8s_version,
            "vm_class": p.vm_class,
            "worker_count": p.worker_count,
            "target": t,
            "confirm": True,
        },
        "delete_tkc_cluster",
        {**cluster, "target": t, "confirm": True},
    )
    s.add("verify_cluster", "vks", "get_tkc_cluster", {**cluster, "target": t})
    return Plan(s.steps, {"namespace": ns, "tkc_name": tkc, "target": t})


VKS_CLUSTER_DEPLOY = BuiltinTemplate(
    "vks_cluster_deploy",
    "Create a vSphere Namespace and a TKC cluster in it (each after approval), then check the cluster.",
    VksClusterDeployParams,
    vks_cluster_deploy,
    (
        {
            "namespace_name": "team-a",
            "cluster_id": "domain-c8",
            "storage_policy": "vsan-default",
            "tkc_name": "team-a-k8s",
            "k8s_version": "v1.30.1",
            "worker_count": 2,
            "target": "vc-lab",
        },
    ),
)


# --- storage_expansion ----------------------------------------------------------------------


class StorageExpansionParams(TemplateParams):
    host_name: Annotated[NonBlank, Field(description="ESXi host that gets the iSCSI target.")]
    iscsi_address: Annotated[NonBlank, Field(description="Address of the iSCSI target.")]
    iscsi_port: Annotated[
        Annotated[int, Field(ge=1, le=65535)], Field(description="TCP port of the iSCSI target.")
    ] = 3260
    target: Target = ""


def storage_expansion(p: StorageExpansionParams, facts: ToolFacts) -> Plan:
    host, t = p.host_name, p.target
    s = StepList()
    s.add("check_iscsi_status", "storage", "get_iscsi_status", {"host_name": host, "target": t})
    s.gate(
        f"Enable the software iSCSI adapter on '{host}' if needed and add the iSCSI target "
        f"{p.iscsi_address}:{p.iscsi_port}. Approve?"
    )
    s.add("enable_iscsi", "storage", "enable_iscsi", {"host_name": host, "target": t, "confirm": True})
    portal = {
        "host_name": host,
        "address": p.iscsi_address,
        "port": p.iscsi_port,
        "target": t,
        "confirm": True,
    }
    s.add("add_iscsi_target", "storage", "add_iscsi_target", portal, "remove_iscsi_target", portal)
    s.add("rescan_storage", "storage", "rescan_storage", {"host_name": host, "target": t, "confirm": True})
    s.add("verify_datastores", "storage", "list_all_datastores", {"target": t})
    return Plan(s.steps, {"host_name": host, "iscsi_address": p.iscsi_address, "target": t})


STORAGE_EXPANSION = BuiltinTemplate(
    "storage_expansion",
    "Add an iSCSI target to a host after approval, rescan its adapters and list the datastores.",
    StorageExpansionParams,
    storage_expansion,
    ({"host_name": "esxi-01.lab", "iscsi_address": "192.0.2.50", "target": "vc-lab"},),
)


# --- baseline_remediate ---------------------------------------------------------------------

_CONFIRM_KEYS = ("confirm", "confirmed", "dry_run")


class DriftItem(BaseModel):
    """One drift to fix. Descriptive keys beyond these (expected, actual, …) are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    resource: str = ""
    skill: NonBlank = "aiops"
    tool: NonBlank
    params: dict[str, Any] | None = None
    rollback_tool: str = ""
    rollback_params: dict[str, Any] | None = None


class BaselineRemediateParams(TemplateParams):
    drift_items: Annotated[
        Annotated[list[DriftItem], Field(min_length=1)],
        Field(
            description="Drifts to fix, as baseline_audit reports them: each {tool, skill?, params?, rollback_tool?, rollback_params?, resource?}."
        ),
    ]
    target: Target = ""


def _item_params(
    facts: ToolFacts, skill: str, tool: str, given: dict[str, Any] | None, target: str, where: str
) -> dict[str, Any]:
    """Item params plus ``confirm`` (gated tools, decided on the current name) and ``target``."""
    params = dict(given or {})
    if facts.is_gated(skill, tool):
        clash = [k for k in _CONFIRM_KEYS if k in params]
        if clash:
            raise ParamProblem(
                where,
                f"{skill}.{tool} previews unless confirmed, and this template confirms it itself after "
                f"its approval gate; remove {', '.join(clash)} from {where}",
            )
        params["confirm"] = True
    # With the schema known, follow it; without one, a target the caller named is passed on: a tool
    # that rejects the extra key fails before acting, a fix applied to the default target would not.
    if "target" not in params:
        takes_target = facts.accepts(skill, tool, "target")
        if takes_target or (takes_target is None and target):
            params["target"] = target
    return params


def baseline_remediate(p: BaselineRemediateParams, facts: ToolFacts) -> Plan:
    t = p.target
    s = StepList()
    s.add("pre_check_alarms", "monitor", "get_alarms", {"target": t})
    shown = [item.resource or "unknown" for item in p.drift_items[:5]]
    more = "..." if len(p.drift_items) > 5 else ""
    s.gate(f"Remediate {len(p.drift_items)} drift(s): {', '.join(shown)}{more}. Proceed?")
    for i, item in enumerate(p.drift_items):
        if item.rollback_params and not item.rollback_tool:
            raise ParamProblem(
                f"drift_items[{i}].rollback_tool", "rollback_params given without a rollback_tool"
            )
        tool = rename_tool(item.skill, item.tool)
        params = _item_params(facts, item.skill, tool, item.params, t, f"drift_items[{i}].params")
        rollback_tool = rename_tool(item.skill, item.rollback_tool) if item.rollback_tool else ""
        rollback_params = (
            _item_params(
                facts, item.skill, rollback_tool, item.rollback_params, t, f"drift_items[{i}].rollback_params"
            )
            if rollback_tool
            else {}
        )
        s.add(f"fix_{item.resource or f'item_{i}'}", item.skill, tool, params, rollback_tool, rollback_params)
    s.add("post_verify", "monitor", "get_alarms", {"target": t})
    return Plan(s.steps, {"drift_count": len(p.drift_items), "target": t})


BASELINE_REMEDIATE = BuiltinTemplate(
    "baseline_remediate",
    "Fix drifts found by baseline_audit, one step per drift, behind one approval and an alarm check.",
    BaselineRemediateParams,
    baseline_remediate,
    (
        {
            "drift_items": [
                {"resource": "app-01", "tool": "vm_power_off", "params": {"vm_name": "app-01"}},
                {
                    "resource": "app-02",
                    "tool": "reconfigure_vm",
                    "params": {"vm_name": "app-02", "cpu": 2},
                    "rollback_tool": "reconfigure_vm",
                    "rollback_params": {"vm_name": "app-02", "cpu": 4},
                },
                {
                    "resource": "old-seg",
                    "skill": "nsx",
                    "tool": "delete_segment",
                    "params": {"segment_id": "old-seg"},
                },
            ],
            "target": "vc-lab",
        },
    ),
)
