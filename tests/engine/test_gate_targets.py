"""The objects a gate reads beside its steps: the table of kinds (which params name them, which
companion read tool returns them), and what the gate says when an object is not as the plan
expects (already so, created already, renamed, gone, changed since the gate was first shown)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fakes import ScriptedDispatcher, refused
from vmware_pilot.app import PilotApp
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.drift import changes
from vmware_pilot.engine.requests import CreateRequest, RunRequest
from vmware_pilot.engine.targets import KINDS, Named, find_item, named_objects, state_line

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
HOSTS = {
    "items": [
        {"name": "esx-1", "connection_state": "connected", "power_state": "poweredOn", "cpu_cores": 8},
        {"name": "esx-2", "connection_state": "notResponding", "power_state": "poweredOn", "cpu_cores": 8},
    ],
    "truncated": False,
}
DATASTORES = {
    "items": [{"name": "ds-1", "type": "VMFS", "free_gb": 100.5, "total_gb": 500.0, "url": "ds:///1"}]
}


def ok(payload: Any) -> StepOutcome:
    return StepOutcome(OutcomeKind.SUCCEEDED, payload)


def step(skill: str, tool: str, **params: Any) -> dict[str, Any]:
    return {"action": tool, "skill": skill, "tool": tool, "params": {"target": "lab", **params}}


# --- the table ---------------------------------------------------------------------------------


def test_every_kind_reads_through_a_real_read_tool_that_takes_its_key(
    companion_tools: dict[str, Any],
) -> None:
    for row in KINDS:
        tools = {t["name"]: t for t in companion_tools[row.read_skill]["tools"]}
        assert row.read_tool in tools, (row.kind, row.read_tool)
        tool = tools[row.read_tool]
        assert tool["annotations"].get("readOnlyHint") is True, (row.kind, row.read_tool)
        props = tool["inputSchema"].get("properties") or {}
        if row.locate == "get":
            assert row.key in props, (row.kind, row.key)
        assert ("target" in props) == row.takes_target, (row.kind, row.read_tool)


def test_every_param_in_the_table_is_one_a_companion_tool_of_its_skills_takes(
    companion_tools: dict[str, Any],
) -> None:
    for row in KINDS:
        taken = {
            p
            for skill in row.skills
            for t in companion_tools[skill]["tools"]
            for p in (t["inputSchema"].get("properties") or {})
        }
        assert set(row.params) <= taken, (row.kind, set(row.params) - taken)
        for tool, param in row.named_by + row.creates:
            schemas = [t for s in row.skills for t in companion_tools[s]["tools"] if t["name"] == tool]
            assert schemas and param in schemas[0]["inputSchema"]["properties"], (row.kind, tool, param)


def test_a_step_names_each_object_kind_its_params_identify() -> None:
    migrate = named_objects(
        "aiops", "migrate_vm", {"vm_name": "web", "to_host": "esx-2", "to_datastore": "ds-1", "target": "vc"}
    )
    assert [(n.kind, n.name, n.target, n.creates) for n in migrate] == [
        ("vm", "web", "vc", False),
        ("host", "esx-2", "vc", False),
        ("datastore", "ds-1", "vc", False),
    ]
    assert named_objects("aiops", "create_cluster", {"name": "c9"}) == [Named("cluster", "c9", "", True)]
    assert named_objects("aiops", "delete_cluster", {"name": "c9"}) == [Named("cluster", "c9", "", False)]
    # "name" names a cluster only for the cluster tools, and a namespace only for vks's.
    assert named_objects("aiops", "create_vm", {"vm_name": "n", "name": "x"}) == [Named("vm", "n", "", True)]
    assert [n.kind for n in named_objects("vks", "delete_namespace", {"name": "ns1"})] == ["namespace"]
    assert [n.kind for n in named_objects("nsx", "delete_segment", {"segment_id": "s1"})] == ["segment"]
    assert [
        n.name for n in named_objects("aiops", "create_drs_rule", {"vm_names": ["a", "b"], "cluster": "c"})
    ] == [
        "a",
        "b",
        "c",
    ]
    assert named_objects("monitor", "get_alarms", {"limit": 5}) == []


def test_a_list_answer_cut_short_is_not_taken_for_an_absent_object() -> None:
    assert find_item({"items": [{"name": "a"}], "truncated": True}, "name", "b") == (None, True)
    item, cut = find_item(HOSTS, "name", "esx-2") or (None, True)
    assert item is not None and item["connection_state"] == "notResponding" and not cut
    assert find_item({"ok": True}, "name", "esx-2") is None, "an answer without a list finds nothing"


def test_state_lines_say_the_kind_and_its_fields_or_why_the_state_is_not_known() -> None:
    host = {
        "kind": "host",
        "name": "esx-1",
        "read": "ok",
        "summary": {"connection_state": "connected", "cpu_cores": 8},
    }
    assert state_line(host) == "host esx-1: connected, 8 cores"
    cluster = {
        "kind": "cluster",
        "name": "c",
        "read": "ok",
        "summary": {"host_count": 3, "drs_enabled": False},
    }
    assert state_line(cluster) == "cluster c: 3 hosts, DRS off"
    store = {"kind": "datastore", "name": "d", "read": "ok", "summary": {"accessible": False, "vm_count": 1}}
    assert state_line(store) == "datastore d: NOT accessible, 1 VM"
    assert state_line({"kind": "datastore", "name": "d", "read": "failed", "error": "x"}) == (
        "datastore d: read FAILED (x)"
    )
    assert state_line(
        {"kind": "segment", "name": "s", "read": "not_found", "note": "does not exist yet"}
    ) == ("segment s: does not exist yet")


# --- what the gate says -----------------------------------------------------------------------


def vm(power: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "vm",
        "name": "web",
        "target": "vc",
        "read": "ok",
        "summary": {"power_state": power},
        **extra,
    }


def test_drift_leaves_already_so_and_exists_already_to_the_step_by_step_prediction() -> None:
    """Whether a step has nothing to do is judged against the state the plan leaves at that point
    (safety.predict), never per object against the state before the plan."""
    assert changes(vm("poweredOff"), ["power_off_vm", "power_on_vm"], [], None) == []
    exists = {"kind": "segment", "name": "s1", "read": "ok", "summary": {}}
    assert changes(exists, ["create_segment"], ["create_segment"], None) == []
    absent = {"kind": "segment", "name": "s1", "read": "not_found"}
    assert changes(absent, ["create_segment"], ["create_segment"], None) == []


def test_the_gate_tells_renamed_gone_and_never_found_apart() -> None:
    base = {"at": "2026-01-02T03:04:05.000000+00:00", "read": "ok", "summary": {"power_state": "poweredOn"}}
    gone = {"kind": "vm", "name": "web", "target": "vc", "read": "not_found"}
    (renamed,) = changes(gone, ["power_off_vm"], [], base, renamed_to="web-old")
    assert renamed.startswith(
        "RENAMED: the VM web on vc shown at 2026-01-02 03:04:05 UTC is now named web-old"
    )
    (deleted,) = changes(gone, ["delete_vm"], [], base)
    assert deleted.startswith(
        "GONE: VM web on vc was there when the gate was first shown (2026-01-02 03:04:05 UTC)"
    )
    assert "delete_vm would have nothing to remove" in deleted
    (never,) = changes(gone, ["power_off_vm"], [], None)
    assert never.startswith("NOT FOUND: there is no VM web on vc")
    assert changes({**gone, "read": "failed", "error": "timeout"}, ["power_off_vm"], [], base) == []


def test_a_change_since_the_gate_was_first_shown_lists_each_field_that_moved() -> None:
    base = {
        "at": "2026-01-02T03:04:05+00:00",
        "read": "ok",
        "summary": {"power_state": "poweredOn"},
        "snapshots": ["a"],
    }
    (said,) = changes(vm("suspended", snapshots=[]), ["power_off_vm"], [], base)
    assert said == (
        "CHANGED since the gate was first shown (2026-01-02 03:04:05 UTC): "
        "power_state poweredOn → suspended; snapshots a → none."
    )


# --- through the engine -----------------------------------------------------------------------


async def at_gate(app: PilotApp, actor: Actor, steps: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    wid: str = app.service.create_workflow(CreateRequest(actor, "ops", "test", steps)).payload()[
        "workflow_id"
    ]
    out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "awaiting_approval", out
    return wid, app.service.pending_gate(wid).payload()


def targets_of(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{t['kind']} {t['name']}": t for t in view["targets"]}


async def test_hosts_and_datastores_are_read_with_one_list_call_each_and_shown_beside_their_step(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers.update(list_esxi_hosts=ok(HOSTS), list_all_datastores=ok(DATASTORES))
    vmk = step("aiops", "add_host_vmk", host_name="esx-1", portgroup="pg", ip="1.2.3.4", netmask="255.0.0.0")
    rescan = step("storage", "rescan_storage", host_name="esx-2")
    browse = step("aiops", "browse_datastore", datastore_name="ds-1")
    ghost = step("storage", "enable_iscsi", host_name="esx-9")
    wid, view = await at_gate(dapp, actor, [GATE, vmk, rescan, browse, ghost])
    found = targets_of(view)
    assert found["host esx-1"]["line"] == "host esx-1: connected, poweredOn, 8 cores"
    assert found["host esx-2"]["summary"]["connection_state"] == "notResponding"
    assert found["datastore ds-1"]["line"] == "datastore ds-1: VMFS, 100.5 GB free, of 500.0 GB"
    assert found["host esx-9"]["read"] == "not_found"
    assert found["host esx-9"]["changes"][0].startswith("NOT FOUND: there is no host esx-9 on lab")
    # The network's read answered without a list (this dispatcher's default): failed, not absent.
    assert found["network pg"]["read"] == "failed" and found["network pg"]["changes"] == []
    assert [r["targets"] for r in view["releases"]] == [["esx-1", "pg"], ["esx-2"], ["ds-1"], ["esx-9"]]
    reads = [c[1] for c in dispatcher.calls if c[1].startswith("list_")]
    assert sorted(reads) == ["list_all_datastores", "list_all_networks", "list_esxi_hosts"]
    audit = dapp.service.get_workflow_status(wid).payload()["audit_log"]
    (inspected,) = [e for e in audit if e["action"] == "gate_inspected"]
    assert "host esx-1: connected" in inspected["detail"] and "datastore ds-1: VMFS" in inspected["detail"]


async def test_a_read_that_fails_is_shown_as_failed_and_claims_nothing_about_the_object(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["list_esxi_hosts"] = refused("vmware-monitor-mcp is not installed")
    dispatcher.answers["get_vm_info"] = StepOutcome(
        OutcomeKind.FAILED, {"error": "Target 'lab' not found in config"}, "failed"
    )
    _, view = await at_gate(dapp, actor, [GATE, step("aiops", "migrate_vm", vm_name="web", to_host="esx-1")])
    found = targets_of(view)
    assert found["host esx-1"]["read"] == "failed" and "not installed" in found["host esx-1"]["line"]
    # "not found" about the target, not the VM: a failed read, never "the VM is gone".
    assert found["vm web"]["read"] == "failed" and found["vm web"]["changes"] == []
    assert found["vm web"]["line"] == "web: read FAILED (Target 'lab' not found in config)"


async def test_a_vm_renamed_or_deleted_after_the_gate_was_first_shown_is_named_as_such(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    present = {"a": True, "b": True}

    def info(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        name = params["vm_name"]
        if not present[name]:
            return StepOutcome(OutcomeKind.FAILED, {"error": f"VM not found. Requested: '{name}'"}, "failed")
        return ok({"name": name, "power_state": "poweredOn", "uuid": f"uuid-{name}"})

    dispatcher.answers["get_vm_info"] = info
    dispatcher.answers["list_virtual_machines"] = ok({"items": [{"name": "a-new", "uuid": "uuid-a"}]})
    wid, first = await at_gate(
        dapp,
        actor,
        [GATE, step("aiops", "power_off_vm", vm_name="a"), step("aiops", "power_off_vm", vm_name="b")],
    )
    assert all(t["changes"] == [] for t in first["targets"])
    present.update(a=False, b=False)
    again = targets_of((await dapp.service.show_gate(actor, wid)).payload())
    assert again["vm a"]["changes"][0].startswith("RENAMED: the VM a on lab shown at ")
    assert "is now named a-new" in again["vm a"]["changes"][0]
    assert again["vm b"]["changes"][0].startswith("GONE: VM b on lab was there when the gate was first shown")
    # The reference stays the first showing: a third look still compares with it.
    third = targets_of((await dapp.service.show_gate(actor, wid)).payload())
    assert third["vm b"]["reference_at"] == first["targets"][1]["reference_at"] != ""


async def test_the_reference_starts_again_when_the_plan_changes(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    power = {"now": "poweredOn"}
    dispatcher.answers["get_vm_info"] = lambda s, t, p: ok(
        {"name": p["vm_name"], "power_state": power["now"]}
    )
    wid, _ = await at_gate(dapp, actor, [GATE, step("aiops", "power_off_vm", vm_name="web")])
    power["now"] = "suspended"
    (changed,) = ((await dapp.service.show_gate(actor, wid)).payload())["targets"]
    assert any(c.startswith("CHANGED since the gate was first shown") for c in changed["changes"])
    wf = dapp.store.workflows.load(wid)
    wf.steps[1].params["force"] = True  # a new plan: what it is compared with is read again
    dapp.store.workflows.save(wf)
    (fresh,) = ((await dapp.service.show_gate(actor, wid)).payload())["targets"]
    assert fresh["changes"] == [] and fresh["reference_at"] != changed["reference_at"]


@pytest.mark.parametrize("tool", ["create_vm", "deploy_vm_from_ova"])
async def test_an_object_the_step_creates_is_expected_to_be_absent(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor, tool: str
) -> None:
    dispatcher.answers["get_vm_info"] = StepOutcome(
        OutcomeKind.FAILED, {"error": "VM not found. Requested: 'new-vm'"}, "failed"
    )
    _, view = await at_gate(dapp, actor, [GATE, step("aiops", tool, vm_name="new-vm", ova_path="/x.ova")])
    (target,) = view["targets"]
    assert target["changes"] == [] and target["line"] == f"new-vm: does not exist yet ({tool} creates it)"


async def test_the_gate_says_a_step_has_nothing_to_do_only_at_its_point_of_the_plan(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    dispatcher.answers["get_vm_info"] = ok({"name": "web", "power_state": "poweredOff", "uuid": "u"})
    dispatcher.answers["get_segment"] = ok({"display_name": "s1", "type": "ROUTED"})
    off = step("aiops", "power_off_vm", vm_name="web", force=True)
    on = step("aiops", "power_on_vm", vm_name="web")
    seg = step("nsx", "create_segment", segment_id="s1", display_name="s1", subnet="10.0.0.1/24")
    _, view = await at_gate(dapp, actor, [GATE, off, on, off, seg])
    outcomes = [(s["step"], s["outcome"]) for s in view["prediction"]["steps"]]
    assert outcomes == [(1, "no_change"), (2, "succeeds"), (3, "succeeds"), (4, "fails")]
    alerts = view["alerts"]
    assert alerts[0].startswith("FAILS at step 4 (nsx.create_segment): segment s1 exists already")
    assert (
        "Step 1 (aiops.power_off_vm) NO_CHANGE: Nothing to do: VM web is poweredOff already (as read at "
        "the gate), so power_off_vm would change nothing." in alerts
    )
    # The power-on after it is a change, and the power-off after that is one too: no "already" for them.
    assert not any(a.startswith(("Step 2 ", "Step 3 ")) for a in alerts), alerts
    assert view["prediction"]["steps"][1]["changes"][0] == {
        "object": "web",
        "field": "power_state",
        "before": "poweredOff",
        "after": "poweredOn",
    }
