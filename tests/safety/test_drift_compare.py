"""The drift check's pure half (safety/predict.py): which fields a write step depends on and what
the gate's prediction expects them to be right before it (``expected_before``), and which of
them differ in a fresh read (``drifted``), as tables."""

from __future__ import annotations

from typing import Any

import pytest

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.domain.model import Step
from vmware_pilot.domain.records import Inspection
from vmware_pilot.safety.predict import depends_on, drifted, expected_before

ON = {"power_state": "poweredOn"}
OFF = {"power_state": "poweredOff"}
TOOLS = "guestToolsRunning"


def plan(*rows: tuple[str, str, dict[str, Any]]) -> list[Step]:
    gate = Step(0, "require_approval", "pilot", "approve", {"message": "Go?"}, status=StepStatus.SUCCESS)
    return [
        gate,
        *(Step(i, tool, skill, tool, dict(params)) for i, (skill, tool, params) in enumerate(rows, 1)),
    ]


def vm(name: str = "vm0", read: str = "ok", **fields: Any) -> dict[str, Any]:
    """A VM as the gate's inspection (or the drift check's read) stores it."""
    entry: dict[str, Any] = {"kind": "vm", "name": name, "target": "", "read": read}
    if read == "ok":
        entry["summary"] = {k: v for k, v in fields.items() if k not in ("snapshots", "tools_status")}
        entry["snapshots"] = list(fields.get("snapshots", []))
        if "tools_status" in fields:
            entry["tools_status"] = fields["tools_status"]
    return entry


RESTART = plan(
    ("aiops", "power_off_vm", {"vm_name": "vm0", "force": False, "confirm": True}),
    ("aiops", "power_on_vm", {"vm_name": "vm0"}),
    ("monitor", "get_alarms", {}),
)


def expect(steps: list[Step], index: int, *targets: dict[str, Any]) -> list[str]:
    inspection = Inspection.model_validate({"targets": list(targets), "at": "2026-12-02T10:00:00+00:00"})
    got = expected_before(index, steps[1:], steps, inspection, Catalog())
    return [f"{e.label} {e.field}={e.value} ({'gate' if e.set_by is None else e.set_by})" for e in got]


@pytest.mark.parametrize(
    ("steps", "index", "targets", "wanted"),
    [
        pytest.param(
            RESTART,
            1,
            [vm(**ON, tools_status=TOOLS)],
            [
                "vm0 exists=True (gate)",
                "vm0 power_state=poweredOn (gate)",
                f"vm0 tools_status={TOOLS} (gate)",
            ],
            id="a graceful power-off depends on existence, power state and Tools, as read at the gate",
        ),
        pytest.param(
            RESTART,
            2,
            [vm(**ON, tools_status=TOOLS)],
            ["vm0 exists=True (gate)", "vm0 power_state=poweredOff (1)"],
            id="the power-on after the plan's power-off expects the VM off, as step 1 leaves it",
        ),
        pytest.param(
            plan(("aiops", "power_off_vm", {"vm_name": "vm0", "force": True})),
            1,
            [vm(**ON, tools_status="guestToolsNotRunning")],
            [
                "vm0 exists=True (gate)",
                "vm0 power_state=poweredOn (gate)",
                "vm0 tools_status=guestToolsNotRunning (gate)",
            ],
            id="a hard power-off still sets Tools, so it compares them",
        ),
        pytest.param(
            plan(
                ("aiops", "create_vm_snapshot", {"vm_name": "vm0", "snapshot_name": "pre"}),
                ("aiops", "revert_vm_snapshot", {"vm_name": "vm0", "snapshot_name": "pre"}),
            ),
            2,
            [vm(**ON, snapshots=["base"])],
            ["vm0 exists=True (gate)", "vm0 snapshots=['base', 'pre'] (1)"],
            id="a revert expects the snapshot the plan's own step made (the fields it leaves unknown are left out)",
        ),
        pytest.param(
            RESTART,
            3,
            [vm(**ON)],
            [],
            id="a read depends on nothing",
        ),
        pytest.param(
            RESTART,
            1,
            [vm(read="failed")],
            [],
            id="an object whose read failed at the gate has nothing to compare",
        ),
        pytest.param(
            plan(("aiops", "some_new_tool", {"vm_name": "vm0"})),
            1,
            [vm(**ON)],
            [],
            id="a tool with no declared effect depends on nothing Pilot knows",
        ),
    ],
)
def test_what_a_write_step_was_approved_against(
    steps: list[Step], index: int, targets: list[dict[str, Any]], wanted: list[str]
) -> None:
    assert expect(steps, index, *targets) == wanted


def test_nothing_is_expected_when_the_gate_read_nothing() -> None:
    assert expected_before(1, RESTART[1:], RESTART, None, Catalog()) == []


def moved(index: int, at_gate: dict[str, Any], now: dict[str, Any], steps: list[Step] = RESTART) -> list[str]:
    inspection = Inspection(targets=[at_gate])
    expected = expected_before(index, steps[1:], steps, inspection, Catalog())
    return [
        f"{d.expected.field}: {d.payload()['approved']} -> {d.payload()['now']}"
        for d in drifted(expected, [now])
    ]


@pytest.mark.parametrize(
    ("index", "at_gate", "now", "wanted"),
    [
        pytest.param(1, vm(**ON, tools_status=TOOLS), vm(**ON, tools_status=TOOLS), [], id="nothing moved"),
        pytest.param(
            1,
            vm(**ON, tools_status=TOOLS),
            vm(**OFF, tools_status="guestToolsNotRunning"),
            ["power_state: poweredOn -> poweredOff", f"tools_status: {TOOLS} -> guestToolsNotRunning"],
            id="powered off by someone between approval and dispatch",
        ),
        pytest.param(
            1,
            vm(**ON, tools_status=TOOLS),
            vm(read="not_found"),
            ["exists: True -> False"],
            id="gone: its existence, not each field of it",
        ),
        pytest.param(
            1,
            vm(**ON, tools_status=TOOLS),
            vm(read="failed"),
            [],
            id="a read that fails now shows no difference",
        ),
        pytest.param(
            1,
            vm(**ON, tools_status=TOOLS),
            vm(**ON),
            [],
            id="a field the new read does not give is not compared",
        ),
        pytest.param(
            2,
            vm(**ON, tools_status=TOOLS),
            vm(**OFF, tools_status="guestToolsNotRunning"),
            [],
            id="the plan's own power-off is not drift for the power-on after it",
        ),
        pytest.param(
            2,
            vm(**ON, tools_status=TOOLS),
            vm(**ON, tools_status=TOOLS),
            ["power_state: poweredOff -> poweredOn"],
            id="powered on again by someone after the plan's power-off",
        ),
        pytest.param(
            1,
            vm(**ON, cpu=2, tools_status=TOOLS),
            vm(**ON, cpu=4, tools_status=TOOLS),
            [],
            id="a field the step does not depend on moved: no drift",
        ),
    ],
)
def test_what_moved_since_the_approval(
    index: int, at_gate: dict[str, Any], now: dict[str, Any], wanted: list[str]
) -> None:
    assert moved(index, at_gate, now) == wanted


def test_the_order_a_skill_lists_snapshots_in_is_no_drift() -> None:
    steps = plan(("aiops", "delete_vm_snapshot", {"vm_name": "vm0", "snapshot_name": "a"}))
    assert moved(1, vm(**ON, snapshots=["a", "b"]), vm(**ON, snapshots=["b", "a"]), steps) == []
    assert moved(1, vm(**ON, snapshots=["a", "b"]), vm(**ON, snapshots=["b"]), steps) == [
        "snapshots: ['a', 'b'] -> ['b']"
    ]


def test_what_a_handed_out_write_depends_on() -> None:
    assert depends_on(RESTART[1], RESTART, Catalog()) == [("vm0", ["exists", "power_state", "tools_status"])]
    assert depends_on(RESTART[3], RESTART, Catalog()) == []
