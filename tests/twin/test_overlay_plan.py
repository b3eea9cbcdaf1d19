"""The overlay plan (``twin.overlay``), in process: which ``govc-twin`` commands are derived from
which of the gate's reads, against the capture's objects, and in which order."""

from __future__ import annotations

from typing import Any

from vmware_pilot.twin.overlay import maintenance_reads, overlay_plan
from vmware_pilot.twin.rehearse import rehearsal_digest
from vmware_pilot.twin.simulator import not_on_a_twin

FACTS: dict[str, dict[str, Any]] = {
    "HostSystem:host-1": {"type": "HostSystem", "name": "H1", "maintenance_mode": "false"},
    "HostSystem:host-2": {"type": "HostSystem", "name": "H2", "maintenance_mode": "true"},
    "VirtualMachine:vm-1": {
        "type": "VirtualMachine",
        "name": "VM1",
        "power_state": "poweredOn",
        "host": "host-1",
        "snapshots": ["base", "old"],
    },
}


def vm(**fields: Any) -> dict[str, Any]:
    return {"kind": "vm", "name": "VM1", "read": "ok", "power_state": "poweredOn", "host": "H1", **fields}


def migrate_preview(host: str, maintenance: bool) -> dict[str, Any]:
    radius = {
        "target_host": {"name": host, "connection_state": "connected", "in_maintenance_mode": maintenance}
    }
    return {"status": "previewed", "payload": {"blast_radius": radius}}


def removal_preview(host: str, maintenance: bool) -> dict[str, Any]:
    return {"status": "refused", "payload": {"blast_radius": {"host": host, "maintenance_mode": maintenance}}}


def args(ops: list[Any]) -> list[tuple[str, ...]]:
    return [op.args for op in ops]


def test_a_vm_read_as_captured_gets_its_power_state_only() -> None:
    ops = overlay_plan([vm(snapshots=["base", "old"])], {}, FACTS)
    assert args(ops) == [("vm.power", "-on", "-force", "VM1")]
    assert [op.says for op in ops] == ["VM1 poweredOn"]


def test_snapshots_taken_or_removed_since_the_capture_are_put_on_the_twin() -> None:
    ops = overlay_plan([vm(power_state="poweredOff", snapshots=["base", "after-capture"])], {}, FACTS)
    assert args(ops) == [
        ("vm.power", "-off", "-force", "VM1"),
        ("snapshot.remove", "-vm", "VM1", "old"),
        ("snapshot.create", "-vm", "VM1", "after-capture"),
    ]
    assert [op.says for op in ops][1:] == ["VM1 snapshot old removed", "VM1 snapshot after-capture taken"]


def test_a_failed_snapshot_read_leaves_the_twin_s_snapshots_alone() -> None:
    failed = vm(snapshots=[], error="snapshots not read: timed out")
    assert args(overlay_plan([failed], {}, FACTS)) == [("vm.power", "-on", "-force", "VM1")]
    assert args(overlay_plan([{**vm(), "snapshots": None}], {}, FACTS)) == [
        ("vm.power", "-on", "-force", "VM1")
    ]


def test_a_vm_read_on_another_host_is_moved_there_before_its_power_is_set() -> None:
    ops = overlay_plan([vm(host="H2")], {}, FACTS)
    assert args(ops)[:2] == [("vm.migrate", "-host", "H2", "VM1"), ("vm.power", "-on", "-force", "VM1")]
    assert ops[0].says == "VM1 on host H2"
    # A host the capture does not hold, or a read that failed: nothing to move.
    assert args(overlay_plan([vm(host="H9")], {}, FACTS)) == [("vm.power", "-on", "-force", "VM1")]
    assert overlay_plan([{"kind": "vm", "name": "VM1", "read": "failed", "host": "H2"}], {}, FACTS) == []


def test_maintenance_mode_from_the_previews_exits_first_and_enters_last() -> None:
    previews = {"2": removal_preview("H1", True), "3": migrate_preview("H2", False)}
    assert maintenance_reads(previews) == {"H1": True, "H2": False}
    ops = overlay_plan([vm(host="H2")], previews, FACTS)
    assert args(ops) == [
        ("host.maintenance", "-exit", "H2"),
        ("vm.migrate", "-host", "H2", "VM1"),
        ("vm.power", "-on", "-force", "VM1"),
        ("host.maintenance", "-enter", "H1"),
    ]
    assert ops[0].says == "host H2 out of maintenance mode" and ops[-1].says == "host H1 in maintenance mode"


def test_maintenance_read_as_captured_or_not_read_changes_nothing() -> None:
    assert (
        overlay_plan([], {"1": migrate_preview("H1", False), "2": removal_preview("H2", True)}, FACTS) == []
    )
    unmeasured = {
        "1": {"payload": {"blast_radius": {"target_host": {"name": "H1", "in_maintenance_mode": None}}}}
    }
    assert maintenance_reads(unmeasured) == {}
    assert maintenance_reads({"1": {"status": "no_preview", "summary": "A read"}, "2": "junk"}) == {}


def test_objects_the_capture_does_not_hold_are_left_alone() -> None:
    other = {**vm(), "name": "NEW", "snapshots": ["x"]}
    assert overlay_plan([other], {"1": migrate_preview("H7", True)}, FACTS) == []


def test_which_skills_run_on_a_twin_and_why_the_others_do_not() -> None:
    assert not_on_a_twin("aiops") == not_on_a_twin("monitor") == not_on_a_twin("storage") == ""
    assert not_on_a_twin("nsx") == (
        "vmware-nsx needs an NSX manager, which a twin (a vCenter simulator) does not have"
    )
    assert "an Aria Operations server" in not_on_a_twin("aria")
    assert not_on_a_twin("pilot") == "pilot is not one of the skills a twin starts (monitor, aiops, storage)"


def test_the_rehearsal_digest_covers_what_was_put_on_the_twin() -> None:
    record = {"status": "rehearsed", "capture": {"digest": "sha256:00"}, "steps": [], "diff": []}
    plain = rehearsal_digest({**record, "overlay": ["VM1 poweredOn"]})
    assert plain == rehearsal_digest({**record, "overlay": ["VM1 poweredOn"], "seconds": 3.2})
    assert plain != rehearsal_digest({**record, "overlay": ["VM1 poweredOn", "VM1 snapshot s taken"]})
