"""Built-ins that mostly read: alert handling, compliance scans and baselines.

See docs/contract.md#built-in-templates.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from vmware_pilot.domain.clock import utcnow
from vmware_pilot.templates.builtin.base import BuiltinTemplate, ParamProblem, Plan, StepList
from vmware_pilot.templates.params import NonBlank, Target, TemplateParams
from vmware_pilot.templates.toolfacts import ToolFacts

__all__ = ["BASELINE_AUDIT", "BASELINE_CAPTURE", "COMPLIANCE_SCAN", "INCIDENT_RESPONSE", "INVESTIGATE_ALERT"]


# --- incident_response ----------------------------------------------------------------------


class IncidentResponseParams(TemplateParams):
    alert_entity: Annotated[
        NonBlank, Field(description="Object the alarm fired on (VM, host, …), as vCenter names it.")
    ]
    alert_name: Annotated[NonBlank, Field(description="Name of the vCenter alarm to acknowledge.")]
    target: Target = ""


def incident_response(p: IncidentResponseParams, facts: ToolFacts) -> Plan:
    t = p.target
    s = StepList()
    s.add("get_alarms", "monitor", "get_alarms", {"target": t})
    s.add("get_events", "monitor", "get_events", {"hours": 1, "severity": "critical", "target": t})
    s.gate(f"Alarm '{p.alert_name}' is active on '{p.alert_entity}'. Acknowledge it?")
    s.add(
        "acknowledge",
        "aiops",
        "acknowledge_vcenter_alarm",
        {"entity_name": p.alert_entity, "alarm_name": p.alert_name, "target": t},
    )
    return Plan(s.steps, {"alert_entity": p.alert_entity, "alert_name": p.alert_name, "target": t})


INCIDENT_RESPONSE = BuiltinTemplate(
    "incident_response",
    "Gather alarms and recent critical events for an alert, then acknowledge it after approval.",
    IncidentResponseParams,
    incident_response,
    ({"alert_entity": "esxi-07", "alert_name": "Host CPU usage", "target": "vc-lab"},),
)


# --- investigate_alert ----------------------------------------------------------------------


class InvestigateAlertParams(TemplateParams):
    alert_entity: Annotated[NonBlank, Field(description="Object the alert concerns (VM, host, …).")]
    alert_name: Annotated[
        str, Field(description="Name of the alert; empty uses alert_entity as the label.")
    ] = ""
    deep_dive: Annotated[
        bool,
        Field(
            description="Add a second evidence round (anomalies, capacity, recent alerts) with its own check."
        ),
    ] = False
    target: Target = ""
    aria_target: Annotated[
        str, Field(description="Aria Operations target for the Aria reads; empty uses target.")
    ] = ""


def investigate_alert(p: InvestigateAlertParams, facts: ToolFacts) -> Plan:
    label = p.alert_name or p.alert_entity
    t, aria = p.target, p.aria_target or p.target
    s = StepList()
    s.add("gather_alarms", "monitor", "get_alarms", {"target": t}, group_id="round1-gather")
    s.add("gather_events", "monitor", "get_events", {"hours": 2, "target": t}, group_id="round1-gather")
    s.add(
        "gather_aria_alerts",
        "aria",
        "list_alerts",
        {"active_only": True, "target": aria},
        group_id="round1-gather",
    )
    check = (
        "test the explanation for falsifiability, sufficiency, necessity and mechanism "
        "(references/investigation-protocol.md)"
    )
    s.gate(
        f"Round 1 evidence for '{label}' is in. The reads cover the whole inventory: keep what concerns "
        f"'{p.alert_entity}' and {check}. APPROVE if the explanation holds; REJECT to escalate, or start "
        "again with deep_dive=true."
    )
    if p.deep_dive:
        s.add("gather_anomalies", "aria", "list_anomalies", {"target": aria}, group_id="round2-gather")
        s.add(
            "gather_capacity",
            "monitor",
            "get_cluster_health_summary",
            {"target": t},
            group_id="round2-gather",
        )
        s.add(
            "gather_recent_alerts",
            "aria",
            "list_alerts",
            {"active_only": False, "target": aria},
            group_id="round2-gather",
        )
        s.gate(
            f"Round 2 evidence for '{label}' is in: {check} again. APPROVE if it holds; REJECT and "
            "escalate if a third round is needed (the protocol stops at three)."
        )
    params = {
        "alert_entity": p.alert_entity,
        "alert_name": p.alert_name,
        "deep_dive": p.deep_dive,
        "target": t,
        "aria_target": p.aria_target,
    }
    return Plan(s.steps, params)


INVESTIGATE_ALERT = BuiltinTemplate(
    "investigate_alert",
    "Root-cause an alert in evidence rounds (vCenter and Aria reads), with a human check after each.",
    InvestigateAlertParams,
    investigate_alert,
    (
        {"alert_entity": "db-01", "alert_name": "VM memory usage", "target": "vc-lab"},
        {"alert_entity": "db-01", "deep_dive": True, "target": "vc-lab", "aria_target": "aria-lab"},
    ),
)


# --- compliance_scan ------------------------------------------------------------------------


class ComplianceScanParams(TemplateParams):
    target: Target = ""
    check_alarms: Annotated[bool, Field(description="Include the active alarms.")] = True
    check_capacity: Annotated[
        bool,
        Field(description="Include capacity: Aria's overview of cluster_id, or the cluster health summary."),
    ] = True
    cluster_id: Annotated[
        str,
        Field(
            description="Aria id of the cluster whose capacity is read; empty reads the vCenter cluster summary."
        ),
    ] = ""


def compliance_scan(p: ComplianceScanParams, facts: ToolFacts) -> Plan:
    t = p.target
    s = StepList()
    if p.check_alarms:
        s.add("check_alarms", "monitor", "get_alarms", {"target": t})
    if p.check_capacity and p.cluster_id:
        s.add("check_capacity", "aria", "get_capacity_overview", {"cluster_id": p.cluster_id, "target": t})
    elif p.check_capacity:
        s.add("check_capacity", "monitor", "get_cluster_health_summary", {"target": t})
    s.add("check_anomalies", "aria", "list_anomalies", {"target": t})
    params = {
        "target": t,
        "check_alarms": p.check_alarms,
        "check_capacity": p.check_capacity,
        "cluster_id": p.cluster_id,
    }
    return Plan(s.steps, params)


COMPLIANCE_SCAN = BuiltinTemplate(
    "compliance_scan",
    "Read-only health sweep: active alarms, capacity (Aria or cluster summary) and anomalies.",
    ComplianceScanParams,
    compliance_scan,
    ({"target": "vc-lab"}, {"target": "vc-lab", "cluster_id": "domain-c8", "check_alarms": False}),
)


# --- baselines --------------------------------------------------------------------------------


def _baseline_name(name: str, field: str) -> str:
    if not name.strip():
        raise ParamProblem(field, f"{field} must not be blank")
    if "/" in name or "\\" in name or name.startswith(".") or "\0" in name:
        raise ParamProblem(field, f"{field} names a file: no '/', '\\', NUL or leading '.', got {name!r}")
    return name


def _baseline_path(name: str) -> str:
    return f"~/.vmware/baselines/{name}.json"


class BaselineCaptureParams(TemplateParams):
    target: Target = ""
    include_vms: Annotated[bool, Field(description="Read the virtual machines.")] = True
    include_hosts: Annotated[bool, Field(description="Read the ESXi hosts.")] = True
    include_network: Annotated[bool, Field(description="Read the NSX segments.")] = True
    include_storage: Annotated[bool, Field(description="Read the datastores.")] = True
    include_alarms: Annotated[bool, Field(description="Read the active alarms.")] = True
    baseline_name: Annotated[
        str, Field(description="Name to save the baseline under; empty names it after the capture time.")
    ] = ""


# The inventory a baseline holds: (include flag, what, skill, tool), in capture order.
_INVENTORY = (
    ("include_vms", "vms", "monitor", "list_virtual_machines"),
    ("include_hosts", "hosts", "monitor", "list_esxi_hosts"),
    ("include_network", "segments", "nsx", "list_segments"),
    ("include_storage", "datastores", "storage", "list_all_datastores"),
)


def _inventory_reads(s: StepList, prefix: str, p: TemplateParams, target: str) -> None:
    """One read step per included part of the inventory, named ``<prefix>_<what>``."""
    for flag, what, skill, tool in _INVENTORY:
        if getattr(p, flag):
            s.add(f"{prefix}_{what}", skill, tool, {"target": target})


def baseline_capture(p: BaselineCaptureParams, facts: ToolFacts) -> Plan:
    name = (
        _baseline_name(p.baseline_name, "baseline_name")
        if p.baseline_name
        else (f"baseline-{utcnow():%Y%m%d-%H%M%S}")
    )
    t = p.target
    s = StepList()
    _inventory_reads(s, "capture", p, t)
    if p.include_alarms:
        s.add("capture_alarms", "monitor", "get_alarms", {"target": t})
    if not s.steps:
        raise ParamProblem("include_vms", "every include_* flag is false: there is nothing to capture")
    params = {
        "baseline_name": name,
        "baseline_path": _baseline_path(name),
        "target": t,
        "include_vms": p.include_vms,
        "include_hosts": p.include_hosts,
        "include_network": p.include_network,
        "include_storage": p.include_storage,
        "include_alarms": p.include_alarms,
    }
    return Plan(s.steps, params)


BASELINE_CAPTURE = BuiltinTemplate(
    "baseline_capture",
    "Read the current inventory (VMs, hosts, segments, datastores, alarms) to save as a baseline.",
    BaselineCaptureParams,
    baseline_capture,
    ({"target": "vc-lab", "baseline_name": "before-upgrade"}, {"include_network": False}),
)


class BaselineAuditParams(TemplateParams):
    baseline_name: Annotated[str, Field(description="Saved baseline to compare against.")] = "latest"
    target: Target = ""
    include_vms: Annotated[bool, Field(description="Read the virtual machines.")] = True
    include_hosts: Annotated[bool, Field(description="Read the ESXi hosts.")] = True
    include_network: Annotated[bool, Field(description="Read the NSX segments.")] = True
    include_storage: Annotated[bool, Field(description="Read the datastores.")] = True


def baseline_audit(p: BaselineAuditParams, facts: ToolFacts) -> Plan:
    name = _baseline_name(p.baseline_name, "baseline_name")
    t = p.target
    s = StepList()
    _inventory_reads(s, "current", p, t)
    s.add("check_anomalies", "aria", "list_anomalies", {"target": t})
    return Plan(s.steps, {"baseline_name": name, "baseline_path": _baseline_path(name), "target": t})


BASELINE_AUDIT = BuiltinTemplate(
    "baseline_audit",
    "Read the current inventory and anomalies to compare against a saved baseline.",
    BaselineAuditParams,
    baseline_audit,
    ({"baseline_name": "before-upgrade", "target": "vc-lab"},),
)
