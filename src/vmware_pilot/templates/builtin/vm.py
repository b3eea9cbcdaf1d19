"""Built-ins that change virtual machines through vmware-aiops.

See docs/contract.md#built-in-templates.

Parameters each tool receives fit that tool's input schema in the companion snapshot;
``confirm: true`` goes only to tools that declare it, and only after an approval gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from vmware_pilot.templates.builtin.base import BuiltinTemplate, ParamProblem, Plan, StepList
from vmware_pilot.templates.params import NonBlank, SecretText, Target, TemplateParams
from vmware_pilot.templates.toolfacts import ToolFacts

__all__ = [
    "CAPACITY_EXPANSION",
    "DISASTER_RECOVERY",
    "PATCH_DEPLOYMENT",
    "PLAN_AND_APPROVE",
    "ROLLING_RESTART",
]

PositiveInt = Annotated[int, Field(ge=1)]


def _unique(names: Sequence[str], field: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise ParamProblem(f"{field}[{i}]", f"'{name}' is listed twice in {field}")
        seen.add(name)


# --- plan_and_approve -----------------------------------------------------------------------


class PlanAndApproveParams(TemplateParams):
    operations: Annotated[
        Annotated[list[dict[str, Any]], Field(min_length=1)],
        Field(
            description="The plan's operations, each {action, vm_name?, …} as vmware-aiops create_vm_plan takes them."
        ),
    ]
    target: Target = ""
    description: Annotated[
        str,
        Field(description="What the plan does, shown at the gate; empty describes it from the operations."),
    ] = ""


def plan_and_approve(p: PlanAndApproveParams, facts: ToolFacts) -> Plan:
    for i, op in enumerate(p.operations):
        if not isinstance(op.get("action"), str) or not op["action"].strip():
            raise ParamProblem(
                f"operations[{i}].action", "every operation needs an 'action' (e.g. power_off)"
            )
    vm_names = list(dict.fromkeys(str(op["vm_name"]) for op in p.operations if op.get("vm_name")))
    desc = p.description or f"Batch operation on {', '.join(vm_names)} ({len(p.operations)} steps)"
    s = StepList()
    plan = s.add(
        "create_plan", "aiops", "create_vm_plan", {"operations": list(p.operations), "target": p.target}
    )
    s.gate(f"Plan ready: {desc}. Review the plan's preview and approve to apply it?")
    ref = {"plan_id": f"__from_step_{plan}__:plan_id", "target": p.target, "confirm": True}
    s.add("apply_plan", "aiops", "apply_vm_plan", ref, "rollback_vm_plan", ref)
    return Plan(
        s.steps,
        {"operations": list(p.operations), "description": desc, "vm_names": vm_names, "target": p.target},
    )


PLAN_AND_APPROVE = BuiltinTemplate(
    "plan_and_approve",
    "Create a vmware-aiops plan, have a human approve it, then apply it (undo: roll the plan back).",
    PlanAndApproveParams,
    plan_and_approve,
    (
        {
            "operations": [
                {"action": "power_off", "vm_name": "app-01"},
                {"action": "create_snapshot", "vm_name": "app-01", "snapshot_name": "pre-upgrade"},
            ],
            "target": "vc-lab",
        },
    ),
)


# --- rolling_restart ------------------------------------------------------------------------


class RollingRestartParams(TemplateParams):
    vm_names: Annotated[
        Annotated[list[NonBlank], Field(min_length=1)],
        Field(description="VMs to restart, in order, one at a time."),
    ]
    target: Target = ""


def rolling_restart(p: RollingRestartParams, facts: ToolFacts) -> Plan:
    _unique(p.vm_names, "vm_names")
    t = p.target
    s = StepList()
    s.add("pre_check", "monitor", "get_alarms", {"target": t})
    s.gate(f"Restart {len(p.vm_names)} VM(s) one at a time: {', '.join(p.vm_names)}. Proceed?")
    for vm in p.vm_names:
        on = {"vm_name": vm, "target": t}
        s.add(
            f"power_off_{vm}",
            "aiops",
            "power_off_vm",
            {"vm_name": vm, "force": False, "target": t, "confirm": True},
            "power_on_vm",
            on,
        )
        s.add(f"power_on_{vm}", "aiops", "power_on_vm", on)
        s.add(f"health_check_{vm}", "monitor", "get_alarms", {"target": t})
    return Plan(s.steps, {"vm_names": list(p.vm_names), "target": t})


ROLLING_RESTART = BuiltinTemplate(
    "rolling_restart",
    "Restart VMs one by one (graceful power off, power on, alarm check) after one approval.",
    RollingRestartParams,
    rolling_restart,
    ({"vm_names": ["app-01", "app-02"], "target": "vc-lab"},),
)


# --- capacity_expansion ---------------------------------------------------------------------


class CapacityExpansionParams(TemplateParams):
    vm_name: Annotated[NonBlank, Field(description="VM to resize.")]
    cpu: Annotated[PositiveInt | None, Field(description="New number of vCPUs; null leaves it.")] = None
    memory_mb: Annotated[PositiveInt | None, Field(description="New memory in MB; null leaves it.")] = None
    target: Target = ""


def capacity_expansion(p: CapacityExpansionParams, facts: ToolFacts) -> Plan:
    if p.cpu is None and p.memory_mb is None:
        raise ParamProblem("cpu", "nothing to expand: give cpu, memory_mb or both")
    t = p.target
    operation: dict[str, Any] = {"action": "reconfigure", "vm_name": p.vm_name}
    changes = []
    if p.cpu is not None:
        operation["cpu"] = p.cpu
        changes.append(f"CPU→{p.cpu}")
    if p.memory_mb is not None:
        operation["memory_mb"] = p.memory_mb
        changes.append(f"Memory→{p.memory_mb}MB")
    s = StepList()
    s.add("check_capacity", "aria", "get_remaining_capacity", {"resource_id": p.vm_name, "target": t})
    s.add(
        "check_rightsizing",
        "aria",
        "list_rightsizing_recommendations",
        {"resource_id": p.vm_name, "target": t},
    )
    plan = s.add("create_plan", "aiops", "create_vm_plan", {"operations": [operation], "target": t})
    s.gate(f"Expand '{p.vm_name}': {', '.join(changes)}. The plan is created; approve to apply it?")
    ref = {"plan_id": f"__from_step_{plan}__:plan_id", "target": t, "confirm": True}
    s.add("apply_change", "aiops", "apply_vm_plan", ref, "rollback_vm_plan", ref)
    s.add("verify_health", "monitor", "get_alarms", {"target": t})
    return Plan(s.steps, {"vm_name": p.vm_name, "cpu": p.cpu, "memory_mb": p.memory_mb, "target": t})


CAPACITY_EXPANSION = BuiltinTemplate(
    "capacity_expansion",
    "Check a VM's headroom, then resize its CPU and/or memory through an approved aiops plan.",
    CapacityExpansionParams,
    capacity_expansion,
    ({"vm_name": "db-01", "cpu": 8, "memory_mb": 32768, "target": "vc-lab"}, {"vm_name": "db-01", "cpu": 4}),
)


# --- disaster_recovery ----------------------------------------------------------------------


class DisasterRecoveryParams(TemplateParams):
    vm_name: Annotated[NonBlank, Field(description="VM to revert.")]
    snapshot_name: Annotated[NonBlank, Field(description="Known-good snapshot to revert to.")] = "baseline"
    target: Target = ""


def disaster_recovery(p: DisasterRecoveryParams, facts: ToolFacts) -> Plan:
    t = p.target
    s = StepList()
    s.gate(f"Revert '{p.vm_name}' to snapshot '{p.snapshot_name}' (changes since then are lost). Confirm?")
    s.add(
        "revert_snapshot",
        "aiops",
        "restore_vm_clean_slate",
        {"vm_name": p.vm_name, "snapshot_name": p.snapshot_name, "target": t, "confirm": True},
    )
    s.add("verify_vm", "monitor", "get_vm_info", {"vm_name": p.vm_name, "target": t})
    s.add("verify_network", "nsx", "list_segments", {"target": t})
    s.add("verify_health", "monitor", "get_alarms", {"target": t})
    return Plan(s.steps, {"vm_name": p.vm_name, "snapshot_name": p.snapshot_name, "target": t})


DISASTER_RECOVERY = BuiltinTemplate(
    "disaster_recovery",
    "Revert a VM to a known-good snapshot after approval, then check the VM, network and alarms.",
    DisasterRecoveryParams,
    disaster_recovery,
    ({"vm_name": "app-01", "snapshot_name": "golden", "target": "vc-lab"},),
)


# --- patch_deployment -----------------------------------------------------------------------


class PatchDeploymentParams(TemplateParams):
    vm_names: Annotated[
        Annotated[list[NonBlank], Field(min_length=1)], Field(description="VMs to patch, one at a time.")
    ]
    patch_local_path: Annotated[
        NonBlank, Field(description="Path of the patch file on the machine running the aiops skill.")
    ]
    patch_guest_path: Annotated[NonBlank, Field(description="Where the patch is written inside each guest.")]
    install_command: Annotated[NonBlank, Field(description="Guest command that installs the patch.")]
    username: Annotated[NonBlank, Field(description="Guest OS user that runs the command.")]
    password: Annotated[
        SecretText, Field(description='Guest OS password, best as a secret reference {"$env": "VARIABLE"}.')
    ] = ""
    target: Target = ""


def patch_deployment(p: PatchDeploymentParams, facts: ToolFacts) -> Plan:
    _unique(p.vm_names, "vm_names")
    t = p.target
    login = {"username": p.username, "password": p.password, "target": t, "confirm": True}
    s = StepList()
    s.gate(f"Patch {len(p.vm_names)} VM(s) one at a time: {', '.join(p.vm_names)}. Proceed?")
    for vm in p.vm_names:
        s.add(
            f"upload_{vm}",
            "aiops",
            "upload_vm_guest_file",
            {"vm_name": vm, "local_path": p.patch_local_path, "guest_path": p.patch_guest_path, **login},
        )
        s.add(
            f"install_{vm}",
            "aiops",
            "run_vm_guest_command_with_output",
            {"vm_name": vm, "command": p.install_command, **login},
        )
        s.add(f"verify_{vm}", "monitor", "get_alarms", {"target": t})
    return Plan(s.steps, {"vm_names": list(p.vm_names), "patch": p.patch_local_path, "target": t})


PATCH_DEPLOYMENT = BuiltinTemplate(
    "patch_deployment",
    "Upload a patch into each VM's guest and install it, one VM at a time, after one approval.",
    PatchDeploymentParams,
    patch_deployment,
    (
        {
            "vm_names": ["app-01", "app-02"],
            "patch_local_path": "/srv/patches/fix.sh",
            "patch_guest_path": "/opt/patches/fix.sh",
            "install_command": "/bin/sh /opt/patches/fix.sh",
            "username": "root",
            "password": {"$env": "GUEST_PASSWORD"},
            "target": "vc-lab",
        },
    ),
)
