"""The clone_and_test built-in: try a change on a linked clone, then on the VM.

See docs/contract.md#built-in-templates.

A resize goes through ``reconfigure_vm`` (no confirm parameter); a guest command through
``run_vm_guest_command``, which previews unless confirmed, so it always follows a gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from vmware_pilot.templates.builtin.base import BuiltinTemplate, ParamProblem, Plan, StepList
from vmware_pilot.templates.params import NonBlank, Target, TemplateParams
from vmware_pilot.templates.toolfacts import ToolFacts

__all__ = ["CLONE_AND_TEST"]

_RESIZE_KEYS = ("cpu", "memory_mb", "memory_gb")
_GUEST_KEYS = ("command", "username", "arguments", "password", "working_directory")


class CloneAndTestParams(TemplateParams):
    target_vm: Annotated[
        NonBlank, Field(description="VM whose change is tried on a clone first, then applied to it.")
    ]
    change_spec: Annotated[
        dict[str, Any],
        Field(
            description="The change: a resize {cpu, memory_mb or memory_gb} or a guest command {command, username, arguments?, password?, working_directory?}."
        ),
    ]
    monitor_minutes: Annotated[
        Annotated[int, Field(ge=0)],
        Field(description="Minutes to watch the clone's alarms and events before the approval."),
    ] = 5
    target: Target = ""
    snapshot_name: Annotated[
        NonBlank, Field(description="Snapshot of target_vm the linked clone is made from.")
    ]


def _positive_int(spec: Mapping[str, Any], key: str) -> int:
    value = spec[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParamProblem(
            f"change_spec.{key}", f"change_spec.{key} must be a positive integer, got {value!r}"
        )
    return value


def _resize(spec: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    extra = sorted(set(spec) - set(_RESIZE_KEYS))
    if extra:
        raise ParamProblem(
            f"change_spec.{extra[0]}",
            f"a resize change_spec takes only {', '.join(_RESIZE_KEYS)}; remove {', '.join(extra)}",
        )
    if "memory_gb" in spec and "memory_mb" in spec:
        raise ParamProblem("change_spec.memory_gb", "give memory_gb or memory_mb, not both")
    change: dict[str, Any] = {}
    if "cpu" in spec:
        change["cpu"] = _positive_int(spec, "cpu")
    if "memory_mb" in spec:
        change["memory_mb"] = _positive_int(spec, "memory_mb")
    if "memory_gb" in spec:
        gb = spec["memory_gb"]
        mb = gb * 1024 if isinstance(gb, int | float) and not isinstance(gb, bool) else None
        if mb is None or mb <= 0 or mb != int(mb):
            raise ParamProblem(
                "change_spec.memory_gb", f"memory_gb must be a positive number of whole MiB, got {gb!r}"
            )
        change["memory_mb"] = int(mb)
    parts = [f"{change['cpu']} vCPU"] if "cpu" in change else []
    parts += [f"{change['memory_mb']} MB memory"] if "memory_mb" in change else []
    return change, "resize to " + " / ".join(parts)


def _guest(spec: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    extra = sorted(set(spec) - set(_GUEST_KEYS))
    if extra:
        raise ParamProblem(
            f"change_spec.{extra[0]}",
            f"change_spec is a resize ({', '.join(_RESIZE_KEYS)}) or a guest command "
            f"({', '.join(_GUEST_KEYS)}); '{extra[0]}' is neither",
        )
    for key in ("command", "username"):
        value = spec.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ParamProblem(
                f"change_spec.{key}", f"a guest-command change_spec needs a non-blank string '{key}'"
            )
    for key in ("arguments", "working_directory"):
        if key in spec and not isinstance(spec[key], str):
            raise ParamProblem(f"change_spec.{key}", f"change_spec.{key} must be a string")
    password = spec.get("password", "")
    if not (isinstance(password, str) or (isinstance(password, dict) and list(password) == ["$env"])):
        raise ParamProblem("change_spec.password", 'password is a string or {"$env": "VARIABLE_NAME"}')
    return {k: spec[k] for k in _GUEST_KEYS if k in spec}, f"guest command '{spec['command']}'"


def clone_and_test(p: CloneAndTestParams, facts: ToolFacts) -> Plan:
    spec = p.change_spec
    if not spec:
        raise ParamProblem("change_spec", "change_spec is empty: say what to change")
    resize = any(k in spec for k in _RESIZE_KEYS)
    change, what = _resize(spec) if resize else _guest(spec)
    staging, t = f"{p.target_vm}-staging", p.target
    s = StepList()
    s.add(
        "clone",
        "aiops",
        "deploy_linked_clone",
        {
            "source_vm_name": p.target_vm,
            "snapshot_name": p.snapshot_name,
            "new_name": staging,
            "power_on": False,
            "target": t,
        },
    )
    if resize:
        s.add("apply_changes", "aiops", "reconfigure_vm", {"vm_name": staging, **change, "target": t})
    power_off = {"vm_name": staging, "force": True, "target": t, "confirm": True}
    s.add(
        "power_on_staging",
        "aiops",
        "power_on_vm",
        {"vm_name": staging, "target": t},
        "power_off_vm",
        power_off,
    )
    if not resize:
        shown = " ".join(x for x in (str(change["command"]), str(change.get("arguments", ""))) if x)
        s.gate(
            f"Run '{shown}' as guest user '{change['username']}' inside the staging VM '{staging}'. Proceed?"
        )
        s.add(
            "apply_changes",
            "aiops",
            "run_vm_guest_command",
            {"vm_name": staging, **change, "target": t, "confirm": True},
        )
    s.add("monitor", "monitor", "investigate_vm", {"vm_name": staging, "target": t})
    caveat = (
        "On production the resize needs CPU/memory hot-add if the VM is running, and it is not rolled back."
        if resize
        else "On production the command runs inside the running VM."
    )
    s.gate(
        f"Staging VM '{staging}' is a linked clone of '{p.target_vm}' at snapshot '{p.snapshot_name}' "
        f"with the change applied ({what}), powered on and checked once. Without a dispatcher Pilot "
        f"ran none of this itself, and it does not wait {p.monitor_minutes} minute(s) of monitoring: "
        f"check the staging VM first. {caveat} Apply to production?"
    )
    prod = {"vm_name": p.target_vm, **change, "target": t}
    if resize:
        s.add("apply_to_production", "aiops", "reconfigure_vm", prod)
    else:
        s.add("apply_to_production", "aiops", "run_vm_guest_command", {**prod, "confirm": True})
    s.add("cleanup", "aiops", "power_off_vm", power_off)
    params = {
        "target_vm": p.target_vm,
        "change_spec": dict(spec),
        "staging_vm": staging,
        "snapshot_name": p.snapshot_name,
        "monitor_minutes": p.monitor_minutes,
        "target": t,
    }
    return Plan(s.steps, params)


CLONE_AND_TEST = BuiltinTemplate(
    "clone_and_test",
    "Try a VM change on a linked clone from a snapshot, then apply it to the VM after approval.",
    CloneAndTestParams,
    clone_and_test,
    (
        {"target_vm": "web-01", "snapshot_name": "pre-change", "change_spec": {"cpu": 4, "memory_gb": 8}},
        {
            "target_vm": "web-01",
            "snapshot_name": "pre-change",
            "change_spec": {
                "command": "/usr/bin/systemctl",
                "arguments": "restart nginx",
                "username": "root",
            },
            "target": "vc-lab",
        },
    ),
)
