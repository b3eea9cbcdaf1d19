"""Pilot's own pooled stdio client (dispatch/session.py, on the 2.x SDK) against the lab's companion
skills, which run the 1.x SDK in their own environment: handshake, tools/list, calls, judging."""

from __future__ import annotations

import pytest

from tests.support.lab_harness import Lab
from vmware_pilot.dispatch.judge import judge, payload_of
from vmware_pilot.dispatch.locate import SkillCommand
from vmware_pilot.dispatch.protocol import OutcomeKind
from vmware_pilot.dispatch.session import SkillSession

pytestmark = pytest.mark.lab


async def test_pilots_client_speaks_to_a_1x_companion(lab: Lab) -> None:
    session = SkillSession(SkillCommand("monitor", (lab.command("monitor"),), "setting"), env=lab.env)
    await session.start(60)
    try:
        assert session.server_info.startswith("vmware-monitor ")
        schemas = await session.input_schemas(30)
        assert "vm_name" in schemas["get_vm_info"]["properties"]

        listed = await session.call("list_virtual_machines", {}, 60)
        names = {vm["name"] for vm in payload_of(listed)["items"]}
        assert {"DC0_H0_VM0", "DC0_C0_RP0_VM1"} <= names
        assert judge("monitor", "list_virtual_machines", listed).kind is OutcomeKind.SUCCEEDED

        unknown = await session.call("get_vm_info", {"vm_name": "no-such-vm"}, 60)
        assert judge("monitor", "get_vm_info", unknown).kind is OutcomeKind.FAILED
    finally:
        await session.close()
