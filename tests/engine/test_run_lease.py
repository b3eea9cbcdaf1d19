"""The run lease (engine/execution/runlease.py): a workflow is never 'running' in the store without a live
run lease, from the run's first save to its last, and an approval's too; so a sweeper elsewhere
can tell a live run from one whose Pilot is gone."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.engine.execution.runlease import run_key
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RunRequest
from vmware_pilot.engine.sweeper import Sweeper
from vmware_pilot.errors import StateRefused

READ = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}}
EVENTS = {"action": "events", "skill": "monitor", "tool": "get_events", "params": {}}
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
WRITE = {"action": "on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "a"}}


async def test_every_save_of_a_running_workflow_is_made_under_a_live_run_lease_that_no_sweep_takes(
    dapp: PilotApp, backend_settings: Settings, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = build_app(backend_settings, dispatcher=ScriptedDispatcher())  # another replica's sweeper
    seen: list[tuple[str, bool]] = []
    swept: list[list[str]] = []
    save = dapp.store.workflows.save

    def watching(wf: Workflow, *args: Any, **kwargs: Any) -> None:
        save(wf, *args, **kwargs)
        if wf.state is WorkflowState.RUNNING:
            lease = dapp.store.leases.lease(run_key(wf.id))
            seen.append((wf.steps[0].status.value, lease is not None and not lease.expired))

    async def sweep_elsewhere(*_: Any) -> Any:
        swept.append(await Sweeper(lambda: other.service.runner, 0.1).sweep())
        return await call(*_)

    dispatcher = dapp.service.runner.dispatcher
    assert isinstance(dispatcher, ScriptedDispatcher)
    call = dispatcher.call
    monkeypatch.setattr(dapp.store.workflows, "save", watching)
    monkeypatch.setattr(dispatcher, "call", sweep_elsewhere)
    try:
        wid = str(
            dapp.service.create_workflow(
                CreateRequest(actor, "ops", "t", [READ, EVENTS, GATE, WRITE])
            ).payload()["workflow_id"]
        )
        assert ((await dapp.service.run_workflow(RunRequest(actor, wid))).payload())[
            "outcome"
        ] == "awaiting_approval"
        assert ((await dapp.service.approve(ApproveRequest(actor, wid, approver="alice"))).payload())[
            "outcome"
        ] == "completed"
    finally:
        other.close()
    assert len(seen) >= 6 and all(live for _, live in seen), seen
    assert swept and all(s == [] for s in swept), "no sweep took over the live run"
    lease = dapp.store.leases.lease(run_key(wid))
    assert lease is not None and lease.expired, "released when the run stopped"


async def test_a_run_whose_run_lease_another_pilot_holds_is_refused_and_nothing_changes(
    dapp: PilotApp, actor: Actor
) -> None:
    wid = str(
        dapp.service.create_workflow(CreateRequest(actor, "ops", "t", [READ, GATE])).payload()["workflow_id"]
    )
    assert dapp.store.leases.acquire_lease(run_key(wid), "otherhost/4242/abc", 60) is not None
    before = dapp.store.workflows.load(wid)
    with pytest.raises(StateRefused, match=r"running in another Pilot process \(pid 4242 on otherhost\)"):
        (await dapp.service.run_workflow(RunRequest(actor, wid))).payload()
    after = dapp.store.workflows.load(wid)
    assert (after.version, after.state) == (before.version, before.state)
