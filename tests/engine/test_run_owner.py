"""Run leases: a step in flight under another run's live lease is not a crash; a run never starts a
step twice; a run whose lease was taken writes nothing more.

Other replicas are played by lease rows with their owners (any host, any pid) and by a second
PilotApp on the same database; expiry is the database's clock (an expired lease is one taken for
a negative time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import Database
from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.clock import utcnow
from vmware_pilot.domain.enums import Event, StepStatus
from vmware_pilot.domain.records import RunOwner
from vmware_pilot.domain.transitions import fire
from vmware_pilot.engine.requests import (
    ApproveRequest,
    CancelRequest,
    CreateRequest,
    RollbackRequest,
    RunRequest,
)
from vmware_pilot.errors import StateRefused
from vmware_pilot.ownership import this_process

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
REPLICA_B = "replica-b.example/4242/0123456789ab"


def on(vm: str) -> dict[str, Any]:
    return {"action": f"on_{vm}", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": vm}}


def running_elsewhere(app: PilotApp, actor: Actor, lease_seconds: float | None) -> str:
    """A workflow whose step 1 replica B marked running, holding a lease for ``lease_seconds``
    (negative: already expired; None: no lease at all, as left by an older Pilot)."""
    wid: str = app.service.create_workflow(CreateRequest(actor, "ops", "t", [GATE, on("a")])).payload()[
        "workflow_id"
    ]
    wf = app.store.workflows.load(wid)
    fire(wf, Event.START_RUN)
    wf.steps[0].status = StepStatus.SUCCESS
    wf.steps[1].status = StepStatus.RUNNING
    wf.steps[1].started_at = utcnow()
    wf.run_owner = RunOwner(host="replica-b.example", pid=4242, owner=REPLICA_B)
    if lease_seconds is not None:
        assert app.store.leases.acquire_lease(wid, REPLICA_B, lease_seconds) == 1
    app.store.workflows.save(wf)
    return wid


async def test_a_step_under_another_replicas_live_lease_is_not_taken_for_a_crash(
    app: PilotApp, actor: Actor
) -> None:
    wid = running_elsewhere(app, actor, lease_seconds=30)
    before = app.store.workflows.load(wid)
    with pytest.raises(StateRefused) as info:
        (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert "pid 4242 on replica-b.example" in info.value.message
    assert "get_workflow_status" in info.value.hint and "expires within" in info.value.hint
    after = app.store.workflows.load(wid)
    assert (after.version, after.steps[1].status) == (before.version, StepStatus.RUNNING), "nothing changed"
    lease = app.store.leases.lease(wid)
    assert lease is not None and (lease.owner, lease.fence) == (REPLICA_B, 1)


@pytest.mark.parametrize("lease_seconds", [-1.0, None], ids=["expired", "none"])
async def test_a_step_whose_lease_expired_is_a_crash_whatever_host_or_pid(
    app: PilotApp, actor: Actor, lease_seconds: float | None
) -> None:
    wid = running_elsewhere(app, actor, lease_seconds)
    out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
    assert (out["outcome"], out["steps"][1]["status"]) == ("failed", "interrupted")
    assert app.store.workflows.load(wid).run_owner is None
    lease = app.store.leases.lease(wid)
    assert lease is not None and lease.expired, "the verdict's lease was released"
    assert lease.fence == (2 if lease_seconds is not None else 1), "taking the lease bumped its fence"


async def test_the_lease_is_held_while_a_step_is_in_flight_and_released_after(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    wid: str = dapp.service.create_workflow(CreateRequest(actor, "ops", "t", [GATE, on("a")])).payload()[
        "workflow_id"
    ]
    seen: list[Any] = []

    def record(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        seen.append((dapp.store.workflows.load(wid).run_owner, dapp.store.leases.lease(wid)))
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

    dispatcher.answers["power_on_vm"] = record
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    out = (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert out["outcome"] == "completed"
    [(owner, lease)] = seen
    assert owner == this_process(lease.owner), "this process's host and pid, and the run's lease owner"
    assert lease is not None and not lease.expired
    assert dapp.store.workflows.load(wid).run_owner is None
    after = dapp.store.leases.lease(wid)
    assert after is not None and after.expired and after.fence == lease.fence


@pytest.mark.slow  # waits out a 4 s call on 1.5 s leases
async def test_the_lease_is_renewed_while_a_long_call_is_in_flight(
    pilot_home: Path, database: Database, actor: Actor
) -> None:
    dispatcher = ScriptedDispatcher(delay=4.0)
    settings = Settings(home=pilot_home, database_url=database.settings_url, lease_seconds=1.5)
    app = build_app(settings, dispatcher=dispatcher)
    try:
        wid: str = app.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a")])).payload()[
            "workflow_id"
        ]
        leases: list[Any] = []

        def record(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
            leases.append(app.store.leases.lease(wid))  # answered after the 4 s call: 2.7 lease times
            return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

        dispatcher.answers["power_on_vm"] = record
        out = (await app.service.run_workflow(RunRequest(actor, wid))).payload()
        assert out["outcome"] == "completed"
        assert leases[0] is not None and not leases[0].expired, "renewed by the heartbeat"
    finally:
        app.close()


async def test_a_run_whose_lease_was_taken_mid_call_writes_nothing_more(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor, database: Database
) -> None:
    wid: str = dapp.service.create_workflow(CreateRequest(actor, "ops", "t", [on("a"), on("b")])).payload()[
        "workflow_id"
    ]
    replica_b = build_app(dapp.settings)
    during: list[int] = []
    try:

        def stalled_then_taken_over(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
            during.append(replica_b.store.workflows.load(wid).version)
            # This run stalled past its lease; replica B takes the expired lease over.
            lease = replica_b.store.leases.lease(wid)
            assert lease is not None
            replica_b.store.leases.release_lease(wid, lease.owner, lease.fence)
            assert replica_b.store.leases.acquire_lease(wid, REPLICA_B, 30) == lease.fence + 1
            return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

        dispatcher.answers["power_on_vm"] = stalled_then_taken_over
        with pytest.raises(StateRefused, match="taken over by another Pilot process"):
            (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
        after = replica_b.store.workflows.load(wid)
        assert after.version == during[0], "nothing was written after the step started"
        assert after.steps[0].status is StepStatus.RUNNING and after.steps[1].status is StepStatus.PENDING
        assert "step_completed" not in [e.action for e in after.audit_log]
        assert [c[2]["vm_name"] for c in dispatcher.calls] == ["a"]
        lease = replica_b.store.leases.lease(wid)
        assert lease is not None and lease.owner == REPLICA_B, "this run's release did not free B's lease"
    finally:
        replica_b.close()


async def test_a_run_stops_when_another_caller_ended_the_workflow_meanwhile(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    wid: str = dapp.service.create_workflow(
        CreateRequest(actor, "ops", "t", [GATE, on("a"), on("b")])
    ).payload()["workflow_id"]

    def meanwhile_failed_elsewhere(skill: str, tool: str, params: dict[str, Any]) -> StepOutcome:
        wf = dapp.store.workflows.load(wid)  # another Pilot declared the run dead and failed the workflow
        wf.steps[1].status = StepStatus.INTERRUPTED
        fire(wf, Event.FAIL)
        dapp.store.workflows.save(wf)
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

    dispatcher.answers["power_on_vm"] = meanwhile_failed_elsewhere
    (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    with pytest.raises(StateRefused, match="changed by another caller"):
        (await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    assert [c[2]["vm_name"] for c in dispatcher.step_calls] == ["a"], "step 2 was never dispatched"
    assert dapp.store.workflows.load(wid).steps[2].status is StepStatus.PENDING


async def test_rollback_and_cancel_wait_for_a_live_lease_even_when_acknowledged(
    app: PilotApp, actor: Actor
) -> None:
    wid = running_elsewhere(app, actor, lease_seconds=30)
    before = app.store.workflows.load(wid).version
    with pytest.raises(StateRefused, match="running in another Pilot process"):
        (
            await app.service.rollback(
                RollbackRequest(actor, wid, confirm=True, acknowledge_unknown_effects=True)
            )
        ).payload()
    with pytest.raises(StateRefused, match="running in another Pilot process"):
        (
            await app.service.cancel_workflow(
                CancelRequest(actor, wid, confirm=True, acknowledge_unknown_effects=True)
            )
        ).payload()
    assert app.store.workflows.load(wid).version == before, "nothing changed"
    app.store.leases.release_lease(wid, REPLICA_B, 1)  # replica B's lease ran out
    out = (
        await app.service.cancel_workflow(
            CancelRequest(actor, wid, confirm=True, acknowledge_unknown_effects=True)
        )
    ).payload()
    assert out["state"] == "cancelled", "once the lease expired the acknowledgement applies"


@pytest.mark.usefixtures("database")  # two replicas of one database / its statements
async def test_an_approval_at_another_replica_continues_the_run_there(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, actor: Actor
) -> None:
    wid: str = dapp.service.create_workflow(
        CreateRequest(actor, "ops", "t", [on("a"), GATE, on("b")])
    ).payload()["workflow_id"]
    assert ((await dapp.service.run_workflow(RunRequest(actor, wid))).payload())[
        "outcome"
    ] == "awaiting_approval"
    elsewhere = ScriptedDispatcher()
    replica_b = build_app(dapp.settings, dispatcher=elsewhere)
    try:
        out = (await replica_b.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload()
    finally:
        replica_b.close()
    assert out["outcome"] == "completed"
    assert [c[2]["vm_name"] for c in dispatcher.step_calls] == ["a"], "the first replica ran up to the gate"
    assert [c[2]["vm_name"] for c in elsewhere.step_calls] == ["b"], "the approving replica ran the rest"
    lease = dapp.store.leases.lease(wid)
    assert lease is not None and lease.expired and lease.fence == 2, "each run leased its step in turn"
    assert dapp.store.audit.verify_audit(wid).ok
