"""The window gate (issue 26, engine/windows.py), on each backend, with a clock the test sets
(``Store.now``, the database's clock every window is judged on): outside its change window, or
inside a blackout, a write step is not sent; the run waits at its gate, which says when it may
go on, and the sweeper continues it once the window opens; a person holding a role the window
names may approve an exception; reads run at any time."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import ScriptedDispatcher
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import ApproveRequest, CreateRequest, RunRequest
from vmware_pilot.engine.sweeper import Sweeper
from vmware_pilot.errors import StateRefused
from vmware_pilot.policy.load import policy_from_text

REPO = Path(__file__).resolve().parents[2]
POLICY = policy_from_text(
    """
windows:
  - name: year-end-freeze
    blackout: true
    match: {target: "prod-*"}
    dates: [{from: "2026-12-20T00:00:00+01:00", to: "2027-01-04T00:00:00+01:00"}]
  - name: weekend-maintenance
    match: {target: "lab-*"}
    weekly: [{days: [sat, sun], from: "06:00", to: "18:00"}]
    timezone: Europe/Berlin
    approvers: [operator]
"""
)
WEDNESDAY = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # the weekend window is closed
SATURDAY_0600_BERLIN = datetime(2026, 12, 5, 5, 0, tzinfo=UTC)  # it opens
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}


def read(where: str) -> dict[str, Any]:
    """A read naming ``where`` (a window matches its name: reads are never held anyway)."""
    return {
        "action": f"alarms {where}",
        "skill": "monitor",
        "tool": "get_alarms",
        "params": {"target": where},
    }


def power_on(vm: str) -> dict[str, Any]:
    return {"action": f"on {vm}", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": vm}}


class Clock:
    """The database's clock as the test sets it."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def clock(dapp: PilotApp, monkeypatch: pytest.MonkeyPatch) -> Clock:
    at = Clock(WEDNESDAY)
    monkeypatch.setattr(dapp.store, "now", at)
    dapp.service.runner.policy = lambda: POLICY
    return at


def sent(dispatcher: ScriptedDispatcher) -> list[str]:
    return [
        f"{tool}:{params.get('vm_name') or params.get('target')}" for _, tool, params in dispatcher.step_calls
    ]


async def held_at_gate(app: PilotApp, vm: str) -> str:
    wid = str(
        app.service.create_workflow(
            CreateRequest(Actor("alice"), "ops", "t", [read(vm), GATE, power_on(vm)])
        ).payload()["workflow_id"]
    )
    assert ((await app.service.run_workflow(RunRequest(Actor("alice"), wid))).payload())[
        "outcome"
    ] == "awaiting_approval"
    out = (await app.service.approve(ApproveRequest(Actor("alice"), wid, approver="carol"))).payload()
    assert out["outcome"] == "awaiting_approval", "the approved write waits for its window"
    return wid


async def test_a_write_outside_its_window_waits_at_its_gate_and_goes_on_when_the_window_opens(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, clock: Clock
) -> None:
    wid = await held_at_gate(dapp, "lab-vm1")
    assert sent(dispatcher) == ["get_alarms:lab-vm1"], "the read ran, the write was not sent"
    status = dapp.service.get_workflow_status(wid).payload()
    (gate,) = status["gates"]
    assert gate["status"] == "pending" and gate["hold"]["kind"] == "window"
    assert gate["hold"]["resumes_at"] == "2026-12-05T05:00:00.000000+00:00"
    assert gate["message"].startswith(
        "Step 2 (aiops.power_on_vm) is outside the change window 'weekend-maintenance' of the policy. "
        "It may run from 2026-12-05T05:00:00.000000+00:00; the run goes on by itself then. "
        "An exception may be approved by operator."
    )
    assert any(e["action"] == "outside_change_window" for e in status["audit_log"])

    sweeper = Sweeper(lambda: dapp.service.runner, interval=60)
    assert await sweeper.sweep() == [], "still closed: nothing resumes"
    clock.at = SATURDAY_0600_BERLIN
    assert await sweeper.sweep() == [wid]
    done = dapp.service.get_workflow_status(wid).payload()
    assert done["state"] == "completed"
    assert sent(dispatcher) == ["get_alarms:lab-vm1", "power_on_vm:lab-vm1"]
    lifted = [e for e in done["audit_log"] if e["action"] == "hold_lifted"]
    assert len(lifted) == 1 and "approved by carol" in lifted[0]["detail"]


async def test_reads_run_at_any_time_and_writes_no_window_governs_run_too(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, clock: Clock
) -> None:
    reads = str(
        dapp.service.create_workflow(
            CreateRequest(Actor("alice"), "ops", "t", [read("lab-vm1"), read("prod-db")])
        ).payload()["workflow_id"]
    )
    assert ((await dapp.service.run_workflow(RunRequest(Actor("alice"), reads))).payload())[
        "outcome"
    ] == "completed"
    other = str(
        dapp.service.create_workflow(
            CreateRequest(Actor("alice"), "ops", "t", [GATE, power_on("dev-vm")])
        ).payload()["workflow_id"]
    )
    (await dapp.service.run_workflow(RunRequest(Actor("alice"), other))).payload()
    assert ((await dapp.service.approve(ApproveRequest(Actor("alice"), other, approver="carol"))).payload())[
        "outcome"
    ] == "completed"
    assert sent(dispatcher) == ["get_alarms:lab-vm1", "get_alarms:prod-db", "power_on_vm:dev-vm"]


async def test_inside_a_blackout_a_write_waits_until_the_blackout_ends(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, clock: Clock
) -> None:
    clock.at = datetime(2026, 12, 24, 12, 0, tzinfo=UTC)
    wid = await held_at_gate(dapp, "prod-web")
    (gate,) = dapp.service.get_workflow_status(wid).payload()["gates"]
    assert "is inside the blackout 'year-end-freeze'" in gate["message"]
    assert gate["hold"]["resumes_at"] == "2027-01-03T23:00:00.000000+00:00"
    assert "names nobody who may approve an exception" in gate["message"]
    with pytest.raises(StateRefused) as caught:
        (
            await dapp.service.approve(ApproveRequest(Actor("olga", kind="token", role="operator"), wid))
        ).payload()
    assert caught.value.fields["refused"] == "window_exception"
    clock.at = datetime(2027, 1, 3, 23, 0, tzinfo=UTC)
    assert await Sweeper(lambda: dapp.service.runner, interval=60).sweep() == [wid]
    assert sent(dispatcher)[-1] == "power_on_vm:prod-web"


async def test_an_exception_is_approved_only_by_a_role_the_window_names(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, clock: Clock
) -> None:
    wid = await held_at_gate(dapp, "lab-vm1")
    before = dapp.store.workflows.load(wid).version
    vera = Actor("vera", kind="token", role="viewer")
    # A door that asks a person (the CLI's prompt) is refused before the person is asked.
    asked: list[str] = []

    async def confirm() -> bool:
        asked.append("asked")
        return True

    with pytest.raises(StateRefused) as refused:
        await dapp.service.approve(
            ApproveRequest(vera, wid, door="cli", approver=vera.label), confirm=confirm
        )
    assert refused.value.fields["refused"] == "window_exception" and asked == []
    with pytest.raises(StateRefused) as caught:
        (await dapp.service.approve(ApproveRequest(vera, wid))).payload()
    refusal = caught.value.payload()
    assert refusal["refused"] == "window_exception" and refusal["approvers"] == ["operator"]
    assert refusal["next_opening"] == "2026-12-05T05:00:00.000000+00:00"
    assert "only operator may, and token:vera holds viewer" in refusal["error"]
    assert dapp.store.workflows.load(wid).version == before, "nothing recorded"

    out = (
        await dapp.service.approve(ApproveRequest(Actor("olga", kind="token", role="operator"), wid))
    ).payload()
    assert out["outcome"] == "completed", "approved as an exception while the window is closed"
    assert sent(dispatcher) == ["get_alarms:lab-vm1", "power_on_vm:lab-vm1"]


async def test_an_identity_provider_group_the_window_names_approves_an_exception(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, clock: Clock
) -> None:
    wid = await held_at_gate(dapp, "lab-vm2")
    person = Actor("sub-1", kind="oidc", role="approver", display="Olga", groups=("operator",))
    assert ((await dapp.service.approve(ApproveRequest(person, wid))).payload())["outcome"] == "completed"
    assert sent(dispatcher)[-1] == "power_on_vm:lab-vm2"


async def test_a_run_whose_next_write_has_no_gate_to_wait_at_is_refused_outside_its_window(
    dapp: PilotApp, dispatcher: ScriptedDispatcher, clock: Clock
) -> None:
    wid = str(
        dapp.service.create_workflow(
            CreateRequest(Actor("alice"), "ops", "t", [read("lab-vm1"), power_on("lab-vm1")])
        ).payload()["workflow_id"]
    )
    before = dapp.store.workflows.load(wid)
    with pytest.raises(StateRefused) as caught:
        (await dapp.service.run_workflow(RunRequest(Actor("alice"), wid))).payload()
    refusal = caught.value.payload()
    assert refusal["refused"] == "outside_change_window" and refusal["step_index"] == 1
    assert refusal["next_opening"] == "2026-12-05T05:00:00.000000+00:00"
    after = dapp.store.workflows.load(wid)
    assert (after.version, after.state) == (before.version, before.state) and sent(dispatcher) == []
    clock.at = SATURDAY_0600_BERLIN
    assert ((await dapp.service.run_workflow(RunRequest(Actor("alice"), wid))).payload())[
        "outcome"
    ] == "completed"
    assert sent(dispatcher) == ["get_alarms:lab-vm1", "power_on_vm:lab-vm1"]


async def test_the_window_of_the_policy_file_in_the_pilot_home_holds_the_write(
    backend_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's example file, as written: read from the Pilot home, or (a database URL) imported
    as the database's policy row; no override of the policy in force."""
    text = (REPO / "docs" / "policies.example.yaml").read_text(encoding="utf-8")
    backend_settings.home_path.mkdir(parents=True, exist_ok=True)
    (backend_settings.home_path / "policies.yaml").write_text(text, encoding="utf-8")
    dispatcher = ScriptedDispatcher()
    app = build_app(backend_settings, dispatcher=dispatcher)
    try:
        if backend_settings.database_url:
            app.store.policy.put_policy(text, policy_from_text(text).digest, "tester")
        monkeypatch.setattr(app.store, "now", Clock(WEDNESDAY))
        wid = await held_at_gate(app, "lab-vm1")
        (gate,) = app.service.get_workflow_status(wid).payload()["gates"]
        assert gate["hold"]["kind"] == "window" and "'weekend-maintenance'" in gate["message"]
        assert sent(dispatcher) == ["get_alarms:lab-vm1"]
    finally:
        app.close()
