"""Settling an interrupted write step (``safety.settle.judge``), as tables: the step's declared
effect against the state read after the interruption and vCenter's tasks on its objects."""

from __future__ import annotations

from typing import Any

import pytest

from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step
from vmware_pilot.safety.settle import judge

TARGET = "lab"


def step(tool: str, **params: Any) -> Step:
    return Step(1, tool, "aiops", tool, {"target": TARGET, **params}, status=StepStatus.INTERRUPTED)


def vm(
    name: str = "web", power: str = "poweredOn", snapshots: tuple[str, ...] = (), **fields: Any
) -> dict[str, Any]:
    summary = {"power_state": power, **fields}
    return {
        "kind": "vm",
        "name": name,
        "target": TARGET,
        "read": "ok",
        "summary": summary,
        "snapshots": list(snapshots),
    }


def gone(name: str = "web") -> dict[str, Any]:
    return {"kind": "vm", "name": name, "target": TARGET, "read": "not_found"}


def failed_read(name: str = "web") -> dict[str, Any]:
    return {"kind": "vm", "name": name, "target": TARGET, "read": "failed", "error": "connection refused"}


def host(name: str) -> dict[str, Any]:
    return {
        "kind": "host",
        "name": name,
        "target": TARGET,
        "read": "ok",
        "summary": {"connection_state": "connected"},
    }


def task(
    state: str, entity: str = "web", name: str = "VirtualMachine.powerOff", error: str = ""
) -> dict[str, Any]:
    return {"name": name, "entity": entity, "state": state, "error": error or None}


OFF = step("power_off_vm", vm_name="web", force=True, confirm=True)
ON = step("power_on_vm", vm_name="web")
SNAP = step("create_vm_snapshot", vm_name="web", snapshot_name="before-patch")
DROP_SNAP = step("delete_vm_snapshot", vm_name="web", snapshot_name="old")
DELETE = step("delete_vm", vm_name="web", confirm=True)
MIGRATE = step("migrate_vm", vm_name="web", to_host="esx-2")
CLONE = step("clone_vm", vm_name="web", new_name="web-2", power_on=True)
UNDECLARED = Step(1, "x", "nsx", "apply_everything", {}, status=StepStatus.INTERRUPTED)

# (name, step, reads, tasks, before, may_still_land) → (effect, words in the reason)
CASES: list[
    tuple[str, Step, list[dict[str, Any]], list[dict[str, Any]] | None, dict[Any, Any], bool, str, str]
] = [
    (
        "power-off landed",
        OFF,
        [vm(power="poweredOff")],
        [],
        {},
        False,
        "applied",
        "web power_state is poweredOff",
    ),
    (
        "power-off landed, its task seen",
        OFF,
        [vm(power="poweredOff")],
        [task("success")],
        {},
        True,
        "applied",
        "task VirtualMachine.powerOff on web success",
    ),
    (
        "power-off did not land, no task",
        OFF,
        [vm()],
        [],
        {},
        False,
        "not_applied",
        "web power_state is poweredOn, not as power_off_vm would leave it; no task on it in progress",
    ),
    (
        "power-off failed in vCenter",
        OFF,
        [vm()],
        [task("error", error="InvalidPowerState")],
        {},
        False,
        "not_applied",
        "task VirtualMachine.powerOff on web error (InvalidPowerState)",
    ),
    (
        "power-off still running",
        OFF,
        [vm()],
        [task("running")],
        {},
        False,
        "unknown",
        "may still take effect",
    ),
    ("power-off queued", OFF, [vm(power="poweredOff")], [task("queued")], {}, False, "unknown", "queued"),
    ("power-off sent moments ago", OFF, [vm()], [], {}, True, "unknown", "may still land"),
    ("tasks not read", OFF, [vm()], None, {}, False, "unknown", "tasks could not be read"),
    (
        "target not read",
        OFF,
        [failed_read()],
        [],
        {},
        False,
        "unknown",
        "web could not be read: connection refused",
    ),
    ("target not in the reads", OFF, [], [], {}, False, "unknown", "web could not be read: it was not read"),
    (
        "off already before the step",
        OFF,
        [vm(power="poweredOff")],
        [],
        {("web", "power_state"): "poweredOff"},
        False,
        "not_applied",
        "as it already was before the step",
    ),
    (
        "on before, off now",
        OFF,
        [vm(power="poweredOff")],
        [],
        {("web", "power_state"): "poweredOn"},
        False,
        "applied",
        "as power_off_vm leaves it",
    ),
    ("power-on landed", ON, [vm()], [], {}, False, "applied", "web power_state is poweredOn"),
    (
        "snapshot made",
        SNAP,
        [vm(snapshots=("before-patch",))],
        [],
        {},
        False,
        "applied",
        "snapshots is before-patch",
    ),
    (
        "snapshot not made",
        SNAP,
        [vm(snapshots=("baseline",))],
        [],
        {},
        False,
        "not_applied",
        "snapshots is baseline",
    ),
    ("snapshot deleted", DROP_SNAP, [vm(snapshots=("baseline",))], [], {}, False, "applied", "snapshots"),
    (
        "snapshot still there",
        DROP_SNAP,
        [vm(snapshots=("old",))],
        [],
        {},
        False,
        "not_applied",
        "snapshots is old",
    ),
    ("VM deleted", DELETE, [gone()], [], {}, False, "applied", "web exists is False"),
    ("VM still there", DELETE, [vm(power="poweredOff")], [], {}, False, "not_applied", "web exists is True"),
    ("migrated", MIGRATE, [vm(host="esx-2"), host("esx-2")], [], {}, False, "applied", "web host is esx-2"),
    (
        "not migrated",
        MIGRATE,
        [vm(host="esx-1"), host("esx-2")],
        [],
        {},
        False,
        "not_applied",
        "web host is esx-1",
    ),
    (
        "clone made but off",
        CLONE,
        [vm(), vm("web-2", power="poweredOff")],
        [],
        {},
        False,
        "unknown",
        "only part of the effect is in place",
    ),
    ("clone made and on", CLONE, [vm(), vm("web-2")], [], {}, False, "applied", "web-2 exists is True"),
    ("clone not made", CLONE, [vm(), gone("web-2")], [], {}, False, "not_applied", "web-2 exists is False"),
    (
        "no declared effect",
        UNDECLARED,
        [],
        [],
        {},
        False,
        "unknown",
        "no declared effect for nsx.apply_everything",
    ),
]


@pytest.mark.parametrize(
    ("step_", "reads", "tasks", "before", "may_still_land", "effect", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_judge(
    step_: Step,
    reads: list[dict[str, Any]],
    tasks: list[dict[str, Any]] | None,
    before: dict[Any, Any],
    may_still_land: bool,
    effect: str,
    words: str,
) -> None:
    settled = judge(step_, step_.params, reads, tasks, before=before, may_still_land=may_still_land)
    assert settled.effect == effect, settled
    assert words in settled.reason, settled.reason


def test_what_was_compared_is_given_as_evidence() -> None:
    settled = judge(OFF, OFF.params, [vm(power="poweredOff")], [])
    assert settled.compared == [
        {"object": "web", "field": "power_state", "expected": "poweredOff", "found": "poweredOff"}
    ]


def test_a_graceful_power_off_is_judged_on_the_power_state_alone() -> None:
    """VMware Tools follow the power state: a VM off with Tools still reported running is applied."""
    graceful = step("power_off_vm", vm_name="web", confirm=True)
    settled = judge(graceful, graceful.params, [vm(power="poweredOff", tools_status="guestToolsRunning")], [])
    assert settled.effect == "applied"
    assert [c["field"] for c in settled.compared] == ["power_state"]


def test_a_task_still_running_on_the_vm_holds_the_judgment() -> None:
    """Without it the same read is ``not_applied``; with it the step may still take effect."""
    assert judge(OFF, OFF.params, [vm()], [task("running")]).effect == "unknown"
    assert (
        judge(OFF, OFF.params, [vm()], [task("success", name="VirtualMachine.powerOn")]).effect
        == "not_applied"
    )
