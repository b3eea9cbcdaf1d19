"""Fenced runs (engine/execution/runlease.py): a call is sent only right after its run's leases
were held, a save is made only under their current fences, a lapsed lease is taken again (new
fence) only while nobody took it, a Pilot never sweeps its own run, and a known outcome survives
a database blip.

"Another replica" is played the way one acts on the shared database: it takes a lease once it
has expired (``take_over``: the lease made to lapse, as a pause or an outage longer than the
lease leaves it, then acquired by another owner). The skill is a scripted dispatcher whose
session becomes ready, and whose sent call answers, when the test says: the exact points a pause
would hit. The same defects on real processes, a real skill and a real PostgreSQL restart are in
test_fenced_replicas.py (slow).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes import ScriptedDispatcher, SteppedDispatcher
from tests.support.mcp_client import connect
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import utcnow
from vmware_pilot.domain.enums import Event, StepStatus, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine import sweeper as sweeper_module
from vmware_pilot.engine.execution.runlease import run_key
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RunRequest
from vmware_pilot.engine.sweeper import Sweeper
from vmware_pilot.errors import DatabaseUnavailable, StateRefused
from vmware_pilot.ownership import new_run_owner
from vmware_pilot.store.protocol import Store

READ = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}, "group_id": "g"}
EVENTS = {"action": "events", "skill": "monitor", "tool": "get_events", "params": {}, "group_id": "g"}
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
REPLICA_B = "replica-b.example/4242/0123456789ab"
GUARD = 60  # seconds: a guard against hanging, not a timing claim


def on(vm: str) -> dict[str, Any]:
    return {"action": f"on_{vm}", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": vm}}


@pytest.fixture
def skill() -> SteppedDispatcher:
    return SteppedDispatcher()


@pytest.fixture
def pilot(backend_settings: Settings, skill: SteppedDispatcher) -> Iterator[PilotApp]:
    built = build_app(backend_settings, dispatcher=skill)
    yield built
    built.close()


def lapse(store: Store, key: str) -> int:
    """Let lease ``key`` expire, as a pause or an outage longer than the lease does; its fence."""
    lease = store.leases.lease(key)
    assert lease is not None and not lease.expired
    store.leases.release_lease(key, lease.owner, lease.fence)
    return lease.fence


def take_over(store: Store, key: str) -> int:
    """Another replica takes lease ``key`` once it expired; the new fence."""
    fence = lapse(store, key)
    taken = store.leases.acquire_lease(key, REPLICA_B, 30)
    assert taken == fence + 1
    return taken


async def within(work: asyncio.Task[Any]) -> Any:
    return await asyncio.wait_for(work, GUARD)


async def test_a_call_whose_leases_were_taken_while_its_session_started_is_never_sent(
    pilot: PilotApp, skill: SteppedDispatcher, actor: Actor
) -> None:
    wid = str(
        pilot.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a"), on("b")])).payload()[
            "workflow_id"
        ]
    )
    skill.ready["power_on_vm"] = asyncio.Event()
    run = asyncio.create_task(pilot.service.run_workflow(RunRequest(actor, wid)))
    await asyncio.wait_for(skill.arrived.wait(), GUARD)  # marked running; the session starts
    marked = pilot.store.workflows.load(wid)
    take_over(pilot.store, run_key(wid))
    take_over(pilot.store, wid)
    skill.ready["power_on_vm"].set()
    with pytest.raises(StateRefused, match="taken over by another Pilot process"):
        await within(run)
    assert skill.sent == [], "nothing was sent once the leases were another replica's"
    after = pilot.store.workflows.load(wid)
    assert after.version == marked.version and after.steps[0].status is StepStatus.RUNNING


async def test_losing_the_leases_cancels_every_call_not_yet_sent(
    pilot: PilotApp, skill: SteppedDispatcher, actor: Actor
) -> None:
    wid = str(
        pilot.service.create_workflow(CreateRequest(actor, "ops", "t", [READ, EVENTS])).payload()[
            "workflow_id"
        ]
    )
    skill.ready = {"get_alarms": asyncio.Event(), "get_events": asyncio.Event()}  # get_events: never
    run = asyncio.create_task(pilot.service.run_workflow(RunRequest(actor, wid)))
    await asyncio.wait_for(skill.arrived.wait(), GUARD)
    take_over(pilot.store, run_key(wid))
    skill.ready["get_alarms"].set()  # its send finds the leases gone: the waiting call is cancelled
    with pytest.raises(StateRefused, match="taken over"):
        await within(run)
    assert skill.sent == []
    steps = pilot.store.workflows.load(wid).steps
    assert [s.status for s in steps] == [StepStatus.RUNNING, StepStatus.RUNNING], "left to the taker"


async def test_a_save_under_a_run_lease_another_replica_took_writes_nothing_and_runs_nothing_more(
    pilot: PilotApp, skill: SteppedDispatcher, actor: Actor
) -> None:
    wid = str(
        pilot.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a"), on("b")])).payload()[
            "workflow_id"
        ]
    )
    skill.answer["power_on_vm"] = asyncio.Event()
    run = asyncio.create_task(pilot.service.run_workflow(RunRequest(actor, wid)))
    await asyncio.wait_for(skill.went_out.wait(), GUARD)
    in_flight = pilot.store.workflows.load(wid)
    take_over(pilot.store, run_key(wid))  # only the run lease: its step lease is still this run's
    skill.answer["power_on_vm"].set()
    with pytest.raises(StateRefused, match="taken over"):
        await within(run)
    after = pilot.store.workflows.load(wid)
    assert after.version == in_flight.version, "the outcome was not saved over the new holder's fence"
    assert [s.status for s in after.steps] == [StepStatus.RUNNING, StepStatus.PENDING]
    assert skill.sent == ["power_on_vm"], "step 1 was never sent"


async def test_a_lapsed_lease_nobody_took_is_taken_again_with_the_next_fence_before_the_send(
    pilot: PilotApp, skill: SteppedDispatcher, actor: Actor
) -> None:
    wid = str(
        pilot.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a")])).payload()["workflow_id"]
    )
    skill.ready["power_on_vm"] = asyncio.Event()
    run = asyncio.create_task(pilot.service.run_workflow(RunRequest(actor, wid)))
    await asyncio.wait_for(skill.arrived.wait(), GUARD)
    run_fence, step_fence = lapse(pilot.store, run_key(wid)), lapse(pilot.store, wid)
    skill.ready["power_on_vm"].set()
    out = await within(run)
    assert out.is_completed and skill.sent == ["power_on_vm"]
    run_lease, step_lease = pilot.store.leases.lease(run_key(wid)), pilot.store.leases.lease(wid)
    assert run_lease is not None and run_lease.fence == run_fence + 1, "taken again, never renewed"
    assert step_lease is not None and step_lease.fence == step_fence + 1
    assert pilot.store.audit.verify_audit(wid).ok


async def test_an_expired_lease_is_never_renewed_only_taken_again_while_nobody_took_it(
    app: PilotApp,
) -> None:
    store, mine, other = app.store, new_run_owner(), new_run_owner()
    assert store.leases.acquire_lease("k1", mine, 30) == 1
    assert store.leases.hold_leases([("k1", mine, 1)], 30) == [1], "a live lease is renewed"
    store.leases.release_lease("k1", mine, 1)  # lapsed
    assert store.leases.hold_leases([("k1", mine, 1)], 30) == [2], "a lapsed one is taken again"
    # That retake's answer lost (the connection dropped at its commit): holding with the fence
    # known before is not a loss, the lease is still this run's.
    assert store.leases.hold_leases([("k1", mine, 1)], 30) == [2]
    store.leases.release_lease("k1", mine, 2)
    assert store.leases.acquire_lease("k1", other, 30) == 3
    assert store.leases.hold_leases([("k1", mine, 2)], 30) is None, "another owner took it"
    assert store.leases.acquire_lease("k2", mine, 30) == 1
    store.leases.release_lease("k2", mine, 1)
    assert store.leases.hold_leases([("k2", mine, 1), ("k1", mine, 2)], 30) is None
    k2 = store.leases.lease("k2")
    assert k2 is not None and k2.expired and k2.fence == 1, "all or nothing: k2 was not taken again"


async def test_this_pilot_never_takes_its_own_run_for_a_dead_pilots(
    pilot: PilotApp, skill: SteppedDispatcher, actor: Actor
) -> None:
    wid = str(
        pilot.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a"), on("b")])).payload()[
            "workflow_id"
        ]
    )
    skill.answer["power_on_vm"] = asyncio.Event()
    run = asyncio.create_task(pilot.service.run_workflow(RunRequest(actor, wid)))
    await asyncio.wait_for(skill.went_out.wait(), GUARD)
    lapse(pilot.store, run_key(wid))  # as a database outage longer than the lease leaves them
    lapse(pilot.store, wid)
    before = pilot.store.workflows.load(wid)
    assert await Sweeper(lambda: pilot.service.runner, 0.1).sweep() == []
    assert pilot.store.workflows.load(wid).version == before.version, (
        "its own sweeper left the live run alone"
    )
    skill.answer["power_on_vm"].set()
    out = await within(run)
    assert out.is_completed
    assert [e.action for e in pilot.store.workflows.load(wid).audit_log].count(
        "interrupted_step_detected"
    ) == 0


def left_running(app: PilotApp, actor: Actor, plan: list[dict[str, Any]], index: int) -> str:
    """A workflow whose step ``index`` a dead Pilot left running (its lease long expired)."""
    wid = str(app.service.create_workflow(CreateRequest(actor, "ops", "t", plan)).payload()["workflow_id"])
    wf = app.store.workflows.load(wid)
    fire(wf, Event.START_RUN)
    for step in wf.steps[:index]:
        step.status = StepStatus.SUCCESS
    wf.steps[index].status = StepStatus.RUNNING
    wf.steps[index].started_at = utcnow()
    app.store.workflows.save(wf)
    return wid


async def test_a_crashed_workflows_remaining_steps_are_skipped(app: PilotApp, actor: Actor) -> None:
    wid = left_running(app, actor, [GATE, on("a"), on("b"), on("c")], 1)
    out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert out["outcome"] == "failed"
    assert [s["status"] for s in out["steps"]] == ["success", "interrupted", "skipped", "skipped"]


async def test_the_sweeper_goes_through_every_page_of_running_workflows(
    pilot: PilotApp, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweeper_module, "_PAGE", 2)
    wids = {left_running(pilot, actor, [on("a")], 0) for _ in range(5)}
    assert set(await Sweeper(lambda: pilot.service.runner, 0.1).sweep()) == wids
    assert {pilot.store.workflows.load(w).state for w in wids} == {WorkflowState.FAILED}


async def _at_gate_with_a_failed_release(
    pilot: PilotApp, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A workflow run to its gate on ``pilot`` whose run lease's release failed once (a database
    blip at that moment); its id."""
    wid = str(
        pilot.service.create_workflow(CreateRequest(actor, "ops", "t", [READ, GATE, on("a")])).payload()[
            "workflow_id"
        ]
    )
    release = pilot.store.leases.release_lease
    failed: list[str] = []

    def blip_once(key: str, owner: str, fence: int) -> None:
        if key == run_key(wid) and not failed:
            failed.append(key)
            raise DatabaseUnavailable("The workflow database is unavailable (test): connection reset")
        release(key, owner, fence)

    monkeypatch.setattr(pilot.store.leases, "release_lease", blip_once)
    assert ((await pilot.service.run_workflow(RunRequest(actor, wid))).payload())[
        "outcome"
    ] == "awaiting_approval"
    assert failed, "the run lease's release failed"
    return wid


async def test_a_run_lease_whose_release_failed_does_not_hold_up_the_next_run_here(
    pilot: PilotApp, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    wid = await _at_gate_with_a_failed_release(pilot, actor, monkeypatch)
    out = (
        await pilot.service.approve(ApproveRequest(actor, wid, approver="alice"))
    ).payload()  # at once, on the same Pilot
    assert out["outcome"] == "completed"


async def test_a_run_lease_whose_release_failed_is_released_when_the_database_answers_again(
    backend_settings: Settings, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same failed release, seen from another replica: the lease (300 s) is freed by a retry
    in the background, not by waiting for it to expire."""
    pilot = build_app(
        backend_settings.model_copy(update={"lease_seconds": 300}), dispatcher=ScriptedDispatcher()
    )
    other = build_app(backend_settings, dispatcher=ScriptedDispatcher())
    try:
        wid = await _at_gate_with_a_failed_release(pilot, actor, monkeypatch)
        deadline = asyncio.get_running_loop().time() + GUARD
        while not (lease := other.store.leases.lease(run_key(wid))) or not lease.expired:
            assert asyncio.get_running_loop().time() < deadline, "the run lease was never released"
            await asyncio.sleep(0.05)
        out = (
            await other.service.approve(ApproveRequest(actor, wid, approver="alice"))
        ).payload()  # on another replica
        assert out["outcome"] == "completed"
    finally:
        pilot.close()
        other.close()


async def test_a_run_lease_held_in_this_process_is_never_named_another_pilot_process(
    app: PilotApp, actor: Actor
) -> None:
    wid = str(
        app.service.create_workflow(CreateRequest(actor, "ops", "t", [READ, GATE])).payload()["workflow_id"]
    )
    assert app.store.leases.acquire_lease(run_key(wid), new_run_owner(), 30) is not None  # another run here
    with pytest.raises(StateRefused) as info:
        (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert "another run in this Pilot process" in info.value.message
    assert "another Pilot process" not in info.value.message


def failing_saves(
    store: Store, monkeypatch: pytest.MonkeyPatch, when: Any, times: int, land: bool
) -> list[int]:
    """Make the next ``times`` saves for which ``when(wf)`` holds fail as a database blip does:
    before the commit, or (``land``) after it, the answer lost. Returns the failures so far."""
    save = store.workflows.save
    failures: list[int] = []

    def blip(wf: Workflow, *args: Any, **kwargs: Any) -> None:
        if len(failures) < times and when(wf):
            failures.append(wf.version)
            if land:
                save(wf, *args, **kwargs)
            raise DatabaseUnavailable(
                "The workflow database is unavailable (test): server closed the connection"
            )
        save(wf, *args, **kwargs)

    monkeypatch.setattr(store.workflows, "save", blip)
    return failures


def outcome_save(wf: Workflow) -> bool:
    """The save that records a step's outcome."""
    return any(e.action == "step_completed" for e in wf.new_events)


@pytest.mark.parametrize("land", [False, True], ids=["not-committed", "committed-answer-lost"])
async def test_a_known_outcome_survives_a_database_blip_and_is_recorded_once(
    pilot: PilotApp, actor: Actor, monkeypatch: pytest.MonkeyPatch, land: bool
) -> None:
    wid = str(
        pilot.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a"), on("b")])).payload()[
            "workflow_id"
        ]
    )
    failures = failing_saves(pilot.store, monkeypatch, outcome_save, 2, land)
    out = (await pilot.service.run_workflow(RunRequest(actor, wid))).payload()
    assert failures and out["outcome"] == "completed"
    actions = [e.action for e in pilot.store.workflows.load(wid).audit_log]
    assert actions.count("step_completed") == 2, "each outcome recorded exactly once"
    assert pilot.store.audit.verify_audit(wid).ok


async def test_a_run_stopped_by_a_database_outage_never_says_nothing_was_changed(
    backend_settings: Settings, skill: SteppedDispatcher, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a real MCP session: the outcome's save fails for longer than the (short) lease."""
    pilot = build_app(backend_settings.model_copy(update={"lease_seconds": 0.5}), dispatcher=skill)
    try:
        wid = str(
            pilot.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a")])).payload()[
                "workflow_id"
            ]
        )
        failing_saves(pilot.store, monkeypatch, outcome_save, 10**6, land=False)
        async with connect(pilot) as client:
            out = await client.refused("run_workflow", workflow_id=wid)
    finally:
        pilot.close()
    text = f"{out['error']} {out.get('hint', '')}"
    assert "nothing was changed" not in text.lower() and "Something was changed" in text, out
    assert out.get("retryable") is not True
    assert skill.sent == ["power_on_vm"]
