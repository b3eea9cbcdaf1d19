"""The gate page on the lab's simulator shows the state of every object kind its steps name (hosts,
datastores, networks beside VMs) and says plainly when a VM changed after the gate was first
shown: already powered off, renamed, gone. A private simulator, since this test renames and
deletes VMs; the changes are made through the vSphere API, as another administrator would."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.support.console_team import Team, at_gate, cancelled, lab_pilot, make_pilot_home, run
from tests.support.lab_harness import (
    SETUP_COMMAND,
    TARGET,
    Lab,
    at_vcenter,
    call_companion,
    missing_parts,
    running_lab,
)
from vmware_pilot.transports.client import connect_http

pytestmark = [pytest.mark.lab, pytest.mark.slow]

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, Team]]:
    """Its own simulator and a dispatching `vmware-pilot mcp --transport http` on it."""
    missing = missing_parts()
    if missing:
        pytest.fail(
            f"The lab is not built (missing: {', '.join(missing)}). Run `{SETUP_COMMAND}`.", pytrace=False
        )
    folder = tmp_path_factory.mktemp("console-targets")
    with running_lab(folder / "lab") as lab:
        home, tokens = make_pilot_home(folder, {"alice": "admin", "bob": "admin"})
        with lab_pilot(lab, folder, home, tokens) as team:
            yield lab, team


def aiops(tool: str, **params: Any) -> dict[str, Any]:
    return {
        "action": tool,
        "skill": "aiops",
        "tool": tool,
        "params": {"target": TARGET, "confirm": True, **params},
    }


@contextmanager
def console(team: Team) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=team.base, timeout=120, follow_redirects=True) as client:
        form = client.get("/console/login")
        found = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert found, form.text[:1000]
        signed = client.post("/console/login", data={"csrf": found.group(1), "token": team.tokens["alice"]})
        assert signed.status_code == 200, signed.text[:1000]
        yield client


def gate_text(client: httpx.Client, wid: str) -> str:
    page = client.get(f"/console/workflows/{wid}/gate")
    assert page.status_code == 200, page.text[:1000]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())


def test_the_gate_shows_hosts_datastores_and_networks_beside_their_steps(private: tuple[Lab, Team]) -> None:
    _, team = private
    migrate = aiops("migrate_vm", vm_name="DC0_C0_RP0_VM1", to_host="DC0_C0_H1", to_datastore="LocalDS_0")
    vmk = aiops(
        "add_host_vmk", host_name="ghost-host", portgroup="DC0_DVPG0", ip="10.0.0.9", netmask="255.0.0.0"
    )
    wid = at_gate(team, "bob", [GATE, migrate, vmk])
    with console(team) as client:
        text = gate_text(client, wid)
    assert "Now: DC0_C0_RP0_VM1: poweredOn, 1 vCPU, 32 MB" in text
    assert "Now: host DC0_C0_H1: connected, poweredOn, 2 cores, 4 GB memory" in text
    assert re.search(
        r"Now: datastore LocalDS_0: OTHER, [\d.]+ GB free, of [\d.]+ GB, accessible, \d+ VMs?", text
    ), text
    assert "Now: network DC0_DVPG0: " in text
    assert "Now: host ghost-host: not found → add_host_vmk" in text
    assert "NOT FOUND: there is no host ghost-host on lab" in text
    cancelled(team, wid)


def test_the_gate_says_when_a_vm_was_powered_off_renamed_or_deleted_after_it_was_first_shown(
    private: tuple[Lab, Team],
) -> None:
    lab, team = private
    off = "DC0_H0_VM0", "DC0_H0_VM1", "DC0_C0_RP0_VM0"
    wid = at_gate(team, "bob", [GATE, *(aiops("power_off_vm", vm_name=vm, force=True) for vm in off)])
    with console(team) as client:
        first = gate_text(client, wid)
        assert first.count(": poweredOn,") == 3 and "CHANGED" not in first and "GONE" not in first, first
        answer = run(
            call_companion(lab, "aiops", "power_off_vm", {"vm_name": off[0], "force": True, "confirm": True})
        )
        assert not answer.is_error, answer.text
        at_vcenter(lab, "rename", off[1], "DC0_H0_VM1-renamed")
        at_vcenter(lab, "destroy", off[2])
        text = gate_text(client, wid)
    assert (
        "Predicted (no change): Nothing to do: VM DC0_H0_VM0 is poweredOff already (as read at the gate), "
        "so power_off_vm would change nothing." in text
    )
    # The renamed VM's power-off fails in aiops' own words, and that is the gate's verdict.
    assert "Predicted to FAIL — FAILS at step 2 (aiops.power_off_vm): the preview by aiops failed:" in text, (
        text
    )
    assert re.search(
        r"CHANGED since the gate was first shown \([\d: -]+ UTC\): power_state poweredOn → poweredOff", text
    )
    assert re.search(
        r"RENAMED: the VM DC0_H0_VM1 on lab shown at [\d: -]+ UTC is now named DC0_H0_VM1-renamed", text
    )
    assert "GONE: VM DC0_C0_RP0_VM0 on lab was there when the gate was first shown" in text
    cancelled(team, wid)


def test_the_gate_says_first_that_the_run_fails_and_approving_anyway_takes_the_box_and_a_reason(
    private: tuple[Lab, Team],
) -> None:
    lab, team = private
    vm = "DC0_C0_RP0_VM1"  # on, without VMware Tools (as every VM of the simulator)
    off = aiops("power_off_vm", vm_name=vm, force=False)
    on = {
        "action": "on",
        "skill": "aiops",
        "tool": "power_on_vm",
        "params": {"vm_name": vm, "target": TARGET},
    }
    wid = at_gate(team, "bob", [GATE, off, on])
    with console(team) as client:
        page = client.get(f"/console/workflows/{wid}/gate").text
        text = gate_text(client, wid)
        assert text.index("Predicted to FAIL") < text.index("What you release"), "the verdict comes first"
        assert "FAILS at step 1 (aiops.power_off_vm): aiops refuses it: VMware Tools is not running" in text
        assert 'id="ack-failure"' in page and 'class="danger">Approve despite the predicted failure' in page
        power_on = page.split('id="rel-2"')[1].split("</section>")[0]
        assert 'class="alert"' not in power_on and "ALREADY" not in power_on, power_on
        digest = re.search(r'name="digest" value="([^"]+)"', page)
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert digest and csrf
        form = {"csrf": csrf.group(1), "digest": digest.group(1)}
        plain = client.post(f"/console/workflows/{wid}/approve", data=form, follow_redirects=False)
        assert plain.status_code == 409 and "Pilot predicts the run fails" in html.unescape(plain.text)
        unticked = {**form, "ack_failure_reason": "no box ticked"}
        assert client.post(f"/console/workflows/{wid}/approve", data=unticked).status_code == 409
        ticked = {**form, "ack_failure": "yes", "ack_failure_reason": "aiops should refuse; checking"}
        went = client.post(f"/console/workflows/{wid}/approve", data=ticked, follow_redirects=False)
        assert went.status_code == 303, went.text[:500]

    async def settled() -> dict[str, Any]:
        async with connect_http(team.server.url, team.tokens["bob"]) as mcp:
            for _ in range(300):
                status = (await mcp.call("get_workflow_status", {"workflow_id": wid})).payload
                # The approval runs after the console's answer: "running" with no step in flight
                # yet is not the end.
                if status["state"] not in ("awaiting_approval", "running"):
                    break
                await asyncio.sleep(0.2)
            return dict(status)

    status = run(settled())
    assert status["state"] == "failed" and status["steps"][1]["status"] == "failed", status["steps"]
    (approval,) = status["gates"][0]["approvals"]
    assert (
        approval["acknowledged_failure"] == "aiops should refuse; checking"
        and approval["channel"] == "console"
    )
    assert (
        run(call_companion(lab, "monitor", "get_vm_info", {"vm_name": vm})).data["power_state"] == "poweredOn"
    )
