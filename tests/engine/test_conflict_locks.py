"""Conflict locks on objects (issue 26, engine/conflicts.py, store/locks.py), on each backend: a
workflow that runs holds the objects its write steps name; another workflow writing one of them
is refused at run and at the approval that would release it, naming the holder, its state and
its owner; the objects are free again once the holder completes, is cancelled, or its Pilot died
(its run lease lapsed, and the dead run can no longer hold its lease again)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from tests.support.backends import Database
from tests.support.fakes import ScriptedDispatcher
from tests.support.mcp_client import connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine import conflicts
from vmware_pilot.engine.execution import conductor
from vmware_pilot.engine.execution.runlease import run_key
from vmware_pilot.engine.requests import ApproveRequest, CancelRequest, CreateRequest, RunRequest
from vmware_pilot.engine.sweeper import Sweeper
from vmware_pilot.errors import StateRefused
from vmware_pilot.policy.load import policy_from_text

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
READ_A = {"action": "look", "skill": "monitor", "tool": "get_vm_info", "params": {"vm_name": "vm-a"}}


def on(vm: str, target: str = "") -> dict[str, Any]:
    params: dict[str, Any] = {"vm_name": vm}
    if target:
        params["target"] = target
    return {"action": f"on {vm}", "skill": "aiops", "tool": "power_on_vm", "params": params}


def create(app: PilotApp, steps: list[dict[str, Any]], who: str = "alice") -> str:
    return str(
        app.service.create_workflow(CreateRequest(Actor(who), "ops", "t", steps)).payload()["workflow_id"]
    )


async def at_gate(app: PilotApp, steps: list[dict[str, Any]], who: str = "alice") -> str:
    wid = create(app, steps, who)
    assert ((await app.service.run_workflow(RunRequest(Actor(who), wid))).payload())[
        "outcome"
    ] == "awaiting_approval"
    return wid


async def refused_run(app: PilotApp, wid: str, who: str = "bob") -> dict[str, Any]:
    before = app.store.workflows.load(wid)
    with pytest.raises(StateRefused) as caught:
        (await app.service.run_workflow(RunRequest(Actor(who), wid))).payload()
    after = app.store.workflows.load(wid)
    assert (after.version, after.state) == (before.version, before.state), "nothing was changed"
    return caught.value.payload()


def test_the_objects_locked_are_those_of_write_steps_by_kind_target_and_name(app: PilotApp) -> None:
    steps = [
        READ_A,
        GATE,
        on("vm-a"),
        on("vm-a", target="vc2"),
        {
            "action": "move",
            "skill": "aiops",
            "tool": "migrate_vm",
            "params": {"vm_name": "vm-b", "to_host": "esx-1", "datastore_name": "ds-1"},
        },
        {
            "action": "later",
            "skill": "aiops",
            "tool": "power_on_vm",
            "params": {"vm_name": "__from_step_0__:name"},
        },
    ]
    wf = app.store.workflows.load(create(app, steps))
    assert conflicts.locked_objects(wf, app.service.catalog) == {
        "vm||vm-a": "vm vm-a",
        "vm|vc2|vm-a": "vm vm-a on vc2",
        "vm||vm-b": "vm vm-b",
        "host||esx-1": "host esx-1",
    }, "reads, datastores and names only known at run time take nothing"


async def test_a_second_workflow_writing_a_held_vm_is_refused_naming_the_holder(dapp: PilotApp) -> None:
    first = await at_gate(dapp, [GATE, on("vm-a")], who="alice")
    second = create(dapp, [GATE, on("vm-a")], who="bob")
    refusal = await refused_run(dapp, second)
    assert refusal["refused"] == "object_held"
    assert refusal["held_by"] == {
        "workflow_id": first,
        "state": "awaiting_approval",
        "owner": "alice",
        "object": "vm vm-a",
    }
    assert first in refusal["error"] and "awaiting_approval" in refusal["error"] and refusal["hint"]
    other = create(dapp, [GATE, on("vm-b")], who="bob")
    assert ((await dapp.service.run_workflow(RunRequest(Actor("bob"), other))).payload())[
        "outcome"
    ] == "awaiting_approval"
    reads = create(dapp, [READ_A], who="bob")
    assert ((await dapp.service.run_workflow(RunRequest(Actor("bob"), reads))).payload())[
        "outcome"
    ] == "completed", "reads hold nothing"


async def test_the_lock_is_freed_when_the_holder_completes(dapp: PilotApp) -> None:
    first = await at_gate(dapp, [GATE, on("vm-a")])
    second = create(dapp, [GATE, on("vm-a")], who="bob")
    await refused_run(dapp, second)
    assert ((await dapp.service.approve(ApproveRequest(Actor("alice"), first, approver="carol"))).payload())[
        "outcome"
    ] == "completed"
    assert ((await dapp.service.run_workflow(RunRequest(Actor("bob"), second))).payload())[
        "outcome"
    ] == "awaiting_approval"


async def test_the_lock_is_freed_when_the_holder_is_cancelled(dapp: PilotApp) -> None:
    first = await at_gate(dapp, [GATE, on("vm-a")])
    second = create(dapp, [GATE, on("vm-a")], who="bob")
    await refused_run(dapp, second)
    (
        await dapp.service.cancel_workflow(
            CancelRequest(Actor("alice"), first, reason="not today", confirm=True)
        )
    ).payload()
    assert ((await dapp.service.run_workflow(RunRequest(Actor("bob"), second))).payload())[
        "outcome"
    ] == "awaiting_approval"


async def test_the_lock_is_freed_when_the_holders_run_lease_lapses_and_the_dead_run_is_fenced_off(
    dapp: PilotApp, backend_settings: Settings
) -> None:
    # The holder is 'running' under its run lease on another replica, as a Pilot mid-run is.
    other = build_app(backend_settings, dispatcher=ScriptedDispatcher())
    try:
        first = create(other, [on("vm-a")])
        wf = other.store.workflows.load(first)
        fence = other.store.leases.acquire_lease(run_key(first), "deadhost/1/x", 60)
        assert fence is not None
        assert await _take(other, wf) is None
        _save(other, wf, lambda w: conductor.start_run(w, "alice", other.store.now()))
    finally:
        other.close()
    second = create(dapp, [GATE, on("vm-a")], who="bob")
    assert (await refused_run(dapp, second))["held_by"]["state"] == "running"
    # Its Pilot dies: the lease is no longer held and lapses (released here: expired at once).
    dapp.store.leases.release_lease(run_key(first), "deadhost/1/x", fence)
    assert ((await dapp.service.run_workflow(RunRequest(Actor("bob"), second))).payload())[
        "outcome"
    ] == "awaiting_approval"
    held = [(run_key(first), "deadhost/1/x", fence)]
    assert dapp.store.leases.hold_leases(held, 60) is None, "the dead run cannot take its lease again"


async def test_a_run_holds_its_objects_from_its_take_before_it_is_marked_running(dapp: PilotApp) -> None:
    """The take and the save that marks the workflow running are two transactions: in between,
    the run's live lease is what holds its objects; once that lapses they are free and the run
    that took them is fenced off (its save under the old fence would be refused)."""
    starting = create(dapp, [on("vm-a")])
    fence = dapp.store.leases.acquire_lease(run_key(starting), "host/1/run", 60)
    assert fence is not None
    assert await _take(dapp, dapp.store.workflows.load(starting)) is None  # still 'pending'
    second = create(dapp, [GATE, on("vm-a")], who="bob")
    assert (await refused_run(dapp, second))["held_by"] == {
        "workflow_id": starting,
        "state": "pending",
        "owner": "alice",
        "object": "vm vm-a",
    }
    dapp.store.leases.release_lease(run_key(starting), "host/1/run", fence)  # that run stopped (lapsed)
    assert ((await dapp.service.run_workflow(RunRequest(Actor("bob"), second))).payload())[
        "outcome"
    ] == "awaiting_approval"
    assert dapp.store.leases.hold_leases([(run_key(starting), "host/1/run", fence)], 60) is None


async def test_the_approval_that_would_release_a_write_on_a_held_object_is_refused_and_not_recorded(
    dapp: PilotApp, database: Database
) -> None:
    waiting = await at_gate(dapp, [GATE, on("vm-a")], who="bob")
    with database.raw() as conn:  # it reached its gate before locks existed: it holds nothing
        conn.execute(text("DELETE FROM object_locks WHERE workflow_id = :id"), {"id": waiting})
    holder = await at_gate(dapp, [GATE, on("vm-a")], who="alice")
    before = dapp.store.workflows.load(waiting)
    with pytest.raises(StateRefused) as caught:
        (await dapp.service.approve(ApproveRequest(Actor("bob"), waiting, approver="carol"))).payload()
    assert caught.value.fields["held_by"]["workflow_id"] == holder
    assert caught.value.message.startswith(f"Refusing to approve workflow '{waiting}'")
    after = dapp.store.workflows.load(waiting)
    assert (after.version, after.state) == (before.version, WorkflowState.AWAITING_APPROVAL)


async def test_without_dispatch_a_workflow_holds_its_objects_at_a_gate_and_not_once_all_is_handed_out(
    app: PilotApp,
) -> None:
    first = await at_gate(app, [on("vm-a"), GATE, on("vm-a")])  # step 0 handed out, waiting at the gate
    second = create(app, [on("vm-a")], who="bob")
    assert (await refused_run(app, second))["held_by"] == {
        "workflow_id": first,
        "state": "awaiting_approval",
        "owner": "alice",
        "object": "vm vm-a",
    }
    done = (
        await app.service.approve(
            ApproveRequest(Actor("alice"), first, approver="carol", acknowledge_not_executed=True)
        )
    ).payload()
    assert done["outcome"] == "dispatch_required", "the last steps are the agent's now"
    assert ((await app.service.run_workflow(RunRequest(Actor("bob"), second))).payload())[
        "outcome"
    ] == "dispatch_required"


async def _take(app: PilotApp, wf: Workflow) -> conflicts.Hold | None:
    return conflicts.take(app.store, wf, app.service.catalog)


def _save(app: PilotApp, wf: Workflow, change: Any) -> None:
    app.service.runner.commit(wf, change)


@pytest.mark.backends("postgresql")
async def test_two_replicas_of_one_postgresql_share_the_locks_through_their_mcp_tools(
    backend_settings: Settings,
) -> None:
    first = build_app(backend_settings, dispatcher=ScriptedDispatcher())
    second = build_app(backend_settings, dispatcher=ScriptedDispatcher())
    try:
        async with connect(first, Actor("alice")) as alice, connect(second, Actor("bob")) as bob:
            holder = await alice.custom([GATE, on("vm-a")])
            assert (await alice.ok("run_workflow", workflow_id=holder))["outcome"] == "awaiting_approval"
            waiting = await bob.custom([GATE, on("vm-a")])
            refusal = await bob.refused("run_workflow", workflow_id=waiting)
            assert refusal["refused"] == "object_held"
            assert refusal["held_by"] == {
                "workflow_id": holder,
                "state": "awaiting_approval",
                "owner": "alice",
                "object": "vm vm-a",
            }
            assert (await bob.status(waiting))["state"] == "pending"
            assert (await alice.ok("approve", workflow_id=holder, approver="carol"))["outcome"] == "completed"
            assert (await bob.ok("run_workflow", workflow_id=waiting))["outcome"] == "awaiting_approval"
    finally:
        first.close()
        second.close()


WAIT = policy_from_text("conflicts: {mode: wait}\n")


async def test_in_wait_mode_a_write_on_a_held_vm_waits_on_another_replica_and_goes_on_once_freed(
    backend_settings: Settings,
) -> None:
    one, two = ScriptedDispatcher(), ScriptedDispatcher()
    first, second = build_app(backend_settings, dispatcher=one), build_app(backend_settings, dispatcher=two)
    for app in (first, second):
        app.service.runner.policy = lambda: WAIT
    try:
        holder = await at_gate(first, [GATE, on("vm-a")], who="alice")
        waiting = await at_gate(second, [GATE, on("vm-a")], who="bob")  # waits nowhere yet: no write
        out = (
            await second.service.approve(ApproveRequest(Actor("bob"), waiting, approver="carol"))
        ).payload()
        assert out["outcome"] == "awaiting_approval" and two.step_calls == [], "the write waits"
        (gate,) = second.service.get_workflow_status(waiting).payload()["gates"]
        assert gate["hold"]["kind"] == "conflict"
        assert gate["hold"]["details"]["held_by"] == {
            "workflow_id": holder,
            "state": "awaiting_approval",
            "owner": "alice",
            "object": "vm vm-a",
        }
        assert gate["message"].startswith(
            f"Step 1 (aiops.power_on_vm) waits: Waiting for workflow '{holder}'"
        )

        sweeper = Sweeper(lambda: second.service.runner, interval=60)
        assert await sweeper.sweep() == [], "still held"
        assert (
            (await first.service.approve(ApproveRequest(Actor("alice"), holder, approver="carol"))).payload()
        )["outcome"] == "completed"
        assert await sweeper.sweep() == [waiting]
        assert second.store.workflows.load(waiting).state is WorkflowState.COMPLETED
        assert [c[1] for c in one.step_calls] == ["power_on_vm"]
        assert [c[1] for c in two.step_calls] == ["power_on_vm"]
    finally:
        first.close()
        second.close()


async def test_in_wait_mode_a_write_with_no_gate_before_it_is_refused_as_it_has_nowhere_to_wait(
    dapp: PilotApp,
) -> None:
    dapp.service.runner.policy = lambda: WAIT
    await at_gate(dapp, [GATE, on("vm-a")])
    ungated = create(dapp, [on("vm-a")], who="bob")
    refusal = await refused_run(dapp, ungated)
    assert (
        refusal["refused"] == "object_held" and "no approval gate comes before the write" in refusal["hint"]
    )


async def test_review_and_policy_explain_name_the_workflow_holding_an_object(dapp: PilotApp) -> None:
    dapp.service.runner.policy = lambda: WAIT  # review reports policy findings while a policy is in force
    holder = await at_gate(dapp, [GATE, on("vm-a")])
    second = create(dapp, [READ_A, GATE, on("vm-b"), on("vm-a")], who="bob")
    (finding,) = [
        f
        for f in dapp.service.review_workflow(second).payload()["findings"]
        if f["kind"] == "policy_conflict"
    ]
    assert finding["step_index"] == 3 and finding["severity"] == "medium"
    assert (
        finding["message"]
        == f"vm vm-a is held by workflow '{holder}' (awaiting_approval, owner alice), which writes it too"
    )
    (entry,) = dapp.service.explain_policy(second).payload()["conflicts"]["conflicting"]
    assert (entry["workflow_id"], entry["state"], entry["owner"], entry["object"]) == (
        holder,
        "awaiting_approval",
        "alice",
        "vm vm-a",
    )
    (
        await dapp.service.cancel_workflow(CancelRequest(Actor("alice"), holder, reason="x", confirm=True))
    ).payload()
    assert dapp.service.explain_policy(second).payload()["conflicts"]["conflicting"] == []
