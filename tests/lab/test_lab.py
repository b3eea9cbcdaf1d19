"""The lab itself: real companion skills over MCP stdio against the running vCenter simulator."""

from __future__ import annotations

import pytest

from tests.support.lab_harness import Lab, call_companion, power_state

pytestmark = pytest.mark.lab

# Not DC0_H0_VM0: the dispatch tests change that one.
VM = "DC0_C0_RP0_VM1"


async def test_monitor_lists_the_simulator_vms_over_mcp(lab: Lab) -> None:
    answer = await call_companion(lab, "monitor", "list_virtual_machines", {})

    assert not answer.is_error, answer.text
    names = {vm["name"] for vm in answer.data["items"]}
    assert {"DC0_H0_VM0", "DC0_H0_VM1", "DC0_C0_RP0_VM0", VM} <= names


async def test_monitor_reads_vm_info_because_every_vm_has_a_snapshot(lab: Lab) -> None:
    answer = await call_companion(lab, "monitor", "get_vm_info", {"vm_name": "DC0_H0_VM1"})

    assert not answer.is_error, answer.text
    assert answer.data["name"] == "DC0_H0_VM1"
    assert answer.data["snapshot_count"] >= 1


async def test_aiops_power_off_previews_then_needs_force_then_power_on_restores(lab: Lab) -> None:
    assert await power_state(lab, VM) == "poweredOn"
    try:
        preview = await call_companion(lab, "aiops", "power_off_vm", {"vm_name": VM})
        assert not preview.is_error and preview.data["action"] == "preview"
        assert await power_state(lab, VM) == "poweredOn"

        # The simulator's guests run no VMware Tools: a graceful shutdown is refused.
        graceful = await call_companion(lab, "aiops", "power_off_vm", {"vm_name": VM, "confirm": True})
        assert graceful.is_error and "VMware Tools" in graceful.data["error"]

        off = await call_companion(
            lab, "aiops", "power_off_vm", {"vm_name": VM, "confirm": True, "force": True}
        )
        assert not off.is_error and off.data["action"] == "powered_off", off.text
        assert await power_state(lab, VM) == "poweredOff"

        # power_on_vm takes no confirm and refuses unknown parameters.
        refused = await call_companion(lab, "aiops", "power_on_vm", {"vm_name": VM, "confirm": True})
        assert refused.is_error and "confirm" in refused.text
        assert await power_state(lab, VM) == "poweredOff"

        on = await call_companion(lab, "aiops", "power_on_vm", {"vm_name": VM})
        assert not on.is_error and "powered on" in on.data, on.text
        assert await power_state(lab, VM) == "poweredOn"
    finally:
        if await power_state(lab, VM) != "poweredOn":
            await call_companion(lab, "aiops", "power_on_vm", {"vm_name": VM})


def test_simulator_takes_method_delays_and_refuses_malformed_ones(lab: Lab) -> None:
    lab.set_delay("PowerOffVM_Task", 1500)
    lab.set_delay("PowerOffVM_Task", 0)

    with pytest.raises(RuntimeError, match="refused"):
        lab.set_delay("PowerOffVM_Task", -1)
