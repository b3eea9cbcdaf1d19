"""`vmware-pilot run` through the entry point: hand-back and dispatch, gates asked at the terminal."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from tests.support import FAKE_SKILL
from tests.support.fakes import ScriptedDispatcher
from vmware_pilot import app as app_module
from vmware_pilot.app import build_app
from vmware_pilot.cli.main import app as cli
from vmware_pilot.cli.run import parse_params
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.execution import gate_records
from vmware_pilot.engine.requests import ApproveRequest

runner = CliRunner()
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Echo?"}}
ME = Actor.os_user().name
INCIDENT = ("run", "incident_response", "-p", "alert_entity=web-01", "-p", "alert_name=High CPU")


def invoke(*args: str, user: str = "olivia", **env: str) -> Result:
    return runner.invoke(cli, list(args), env={"LOGNAME": user, **env})


def stored(settings: Settings, workflow_id: str) -> dict[str, Any]:
    app = build_app(settings)
    try:
        return app.service.get_workflow_status(workflow_id).payload()
    finally:
        app.close()


def steps_file(tmp_path: Path, steps: list[dict[str, Any]], name: str = "echo-test") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "description": "echo through a skill", "steps": steps}))
    return path


def test_params_read_json_values_and_keep_text() -> None:
    assert parse_params(["cpu=4", "on=true", 'vms=["a","b"]', "name=web-01", "note=a=b"]) == {
        "cpu": 4,
        "on": True,
        "vms": ["a", "b"],
        "name": "web-01",
        "note": "a=b",
    }


def test_run_hands_back_and_approves_a_gate_as_the_os_user(tmp_path: Path, settings: Settings) -> None:
    read = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines"}
    result = invoke("run", "--steps", str(steps_file(tmp_path, [GATE, read])), "--yes", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["outcome"], data["approved_by"]) == ("dispatch_required", ME)
    assert [p["tool"] for p in data["pending_dispatch"]] == ["list_virtual_machines"]
    assert "Echo?" in result.stderr, "the gate was shown"
    status = stored(settings, data["id"])
    assert [s["status"] for s in status["steps"]] == ["success", "not_executed"]
    assert status["gates"][0]["approvals"][0]["channel"] == "cli"


def test_run_yes_does_not_vouch_for_steps_it_just_handed_out(settings: Settings) -> None:
    result = invoke(*INCIDENT, "--yes", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["outcome"], data["approved_by"]) == ("awaiting_approval", "")
    assert [p["tool"] for p in data["pending_dispatch"]] == ["get_alarms", "get_events"]
    status = stored(settings, data["id"])
    assert [s["status"] for s in status["steps"]] == ["not_executed", "not_executed", "pending", "pending"]


def test_run_shows_a_gate_from_one_prediction(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate panel, its decision summary and what the person may do come from one prediction
    (the run's own result predicts the gate it stops at once more: two in all, three before)."""
    predicted: list[str] = []
    real = gate_records.prediction_of

    def counted(wf: Any, gate_index: int, *args: Any) -> Any:
        predicted.append(wf.id)
        return real(wf, gate_index, *args)

    monkeypatch.setattr(gate_records, "prediction_of", counted)
    result = invoke(*INCIDENT, "--yes", "--json")  # stops at the gate: --yes cannot vouch for hand-outs
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["outcome"] == "awaiting_approval"
    assert "High CPU" in result.stderr, "the gate was shown"
    assert predicted == [data["id"], data["id"]]


def test_run_without_a_terminal_stops_at_the_gate(settings: Settings) -> None:
    result = invoke(*INCIDENT)
    assert result.exit_code == 0, result.output
    assert "vmware-pilot approve" in result.stdout and "--ack-not-executed" in result.stdout
    assert "monitor.get_alarms" in result.stdout
    (row,) = json.loads(invoke("workflows", "--json").stdout)["workflows"]
    assert row["state"] == "awaiting_approval"


def test_run_refuses_unusable_arguments() -> None:
    assert invoke("run").exit_code == 2
    assert invoke("run", "incident_response", "--steps", "x.yaml").exit_code == 2
    bad = invoke("run", "incident_response", "-p", "alert_entity")
    assert bad.exit_code == 2 and "key=value" in bad.stderr
    missing = invoke("run", "incident_response", "-p", "alert_entity=web-01")
    assert missing.exit_code == 2 and "alert_name" in missing.stderr
    unknown = invoke("run", "no_such_template")
    assert unknown.exit_code != 0 and "no_such_template" in unknown.stderr


def test_run_of_a_steps_file_applies_the_gate_rule(tmp_path: Path) -> None:
    ungated = steps_file(
        tmp_path, [{"action": "rm", "skill": "aiops", "tool": "delete_vm", "params": {"vm_name": "x"}}]
    )
    result = invoke("run", "--steps", str(ungated), "--yes")
    assert result.exit_code == 1
    assert "require_approval" in result.stderr
    assert json.loads(invoke("workflows", "--json").stdout)["count"] == 0, "nothing was created"


def _run_with_dispatch(tmp_path: Path, settings: Settings, **env: str) -> None:
    path = steps_file(
        tmp_path, [GATE, {"action": "echo", "skill": "aiops", "tool": "echo", "params": {"value": "hi"}}]
    )
    result = invoke("run", "--steps", str(path), "--dispatch", "--yes", "--json", **env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["outcome"] == "completed" and "pending_dispatch" not in data
    step = stored(settings, data["id"])["steps"][1]
    assert step["status"] == "success" and step["result"]["value"] == "hi"


def test_run_with_dispatch_runs_the_steps_through_the_dispatcher(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command with the dispatcher `--dispatch` selects replaced by one in this process that
    answers as the skill's echo tool does (the skill's own server: the slow test below)."""
    skill = ScriptedDispatcher()
    monkeypatch.setattr(app_module, "stdio_dispatcher", lambda settings, catalog: skill)
    _run_with_dispatch(tmp_path, settings)
    assert skill.step_calls == [("aiops", "echo", {"value": "hi"})] and skill.closed


@pytest.mark.slow  # the skill's MCP server is a process
def test_run_with_dispatch_runs_the_steps_in_the_skill(tmp_path: Path, settings: Settings) -> None:
    commands = json.dumps({"aiops": shlex.join([sys.executable, str(FAKE_SKILL)])})
    _run_with_dispatch(tmp_path, settings, VMWARE_PILOT_SKILL_COMMANDS=commands)


def test_run_records_one_approval_of_a_quorum_gate_and_stops(tmp_path: Path, settings: Settings) -> None:
    gate = {**GATE, "params": {"message": "Echo?", "approvals_required": 2}}
    path = steps_file(tmp_path, [gate, {"action": "list", "skill": "aiops", "tool": "list_virtual_machines"}])
    result = invoke("run", "--steps", str(path), "--yes")
    assert result.exit_code == 0, result.output
    assert "1 more approval" in result.stdout
    (row,) = json.loads(invoke("workflows", "--json").stdout)["workflows"]
    again = invoke("approve", row["id"], "--yes", "--json", user="peter")
    assert again.exit_code == 1 and "already approved" in again.stderr
    app = build_app(settings)
    try:
        second = asyncio.run(
            app.service.approve(ApproveRequest(Actor("peter"), row["id"], approver="peter"))
        ).payload()
    finally:
        app.close()
    assert second["approved_by"] == f"{ME}, peter"


@pytest.mark.slow
def test_approve_and_rollback_of_a_workflow_pilot_runs_need_dispatch(
    tmp_path: Path, settings: Settings
) -> None:
    echo = {"action": "echo", "skill": "aiops", "tool": "echo", "params": {"value": "hi"}}
    undoable = {**echo, "rollback_tool": "echo", "rollback_params": {"value": "undo"}}
    second = {**GATE, "params": {"message": "Again?"}}
    path = steps_file(tmp_path, [GATE, undoable, second, echo])
    skills = {
        "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"aiops": shlex.join([sys.executable, str(FAKE_SKILL)])})
    }
    started = invoke("run", "--steps", str(path), "--dispatch", "--json", **skills)  # no terminal: waits
    wid = json.loads(started.stdout)["id"]
    first = invoke("approve", wid, "--yes", "--dispatch", "--json", **skills)
    assert first.exit_code == 0, first.output
    assert [s["status"] for s in json.loads(first.stdout)["steps"]] == [
        "success",
        "success",
        "pending",
        "pending",
    ]
    # Pilot ran step 1 itself: approving without dispatch would hand step 3 to the person instead.
    handed = invoke("approve", wid, "--yes", **skills)
    assert handed.exit_code == 1 and "--dispatch" in handed.stderr
    assert stored(settings, wid)["state"] == "awaiting_approval"
    failing = invoke("rollback", wid, "--yes", **skills)
    assert failing.exit_code == 1 and "--dispatch" in failing.stderr
    assert stored(settings, wid)["state"] == "awaiting_approval", "no undo was attempted"
    undone = invoke("rollback", wid, "--yes", "--dispatch", "--json", **skills)
    assert undone.exit_code == 0, undone.output
    assert json.loads(undone.stdout)["action"] == "rolled_back"
    assert stored(settings, wid)["steps"][1]["status"] == "rolled_back"


def test_run_of_a_steps_file_refuses_a_reference_that_cannot_resolve(tmp_path: Path) -> None:
    read = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines"}
    use = {"action": "use", "skill": "monitor", "tool": "get_events", "params": {"x": "__from_step_4__:id"}}
    result = invoke("run", "--steps", str(steps_file(tmp_path, [read, use])), "--yes")
    assert result.exit_code == 2
    assert "Step 1: params.x" in result.stderr and "__from_step_N__" in result.stderr
    assert json.loads(invoke("workflows", "--json").stdout)["count"] == 0, "nothing was created"


def test_run_of_a_steps_file_refuses_aliases_and_empty_plans_without_quoting_them(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    levels = "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 7))
    bomb.write_text("a0: &a0 [SECRETWORD, x]\n" + levels + "steps: [*a6]\n")
    result = invoke("run", "--steps", str(bomb), "--yes")
    assert result.exit_code == 2 and "aliases" in result.stderr and "SECRETWORD" not in result.stderr
    empty = tmp_path / "empty.yaml"
    empty.write_text("name: nothing\nsteps: []\n")
    assert invoke("run", "--steps", str(empty), "--yes").exit_code == 2


@pytest.mark.slow
def test_a_skills_stderr_stays_off_the_operators_terminal(tmp_path: Path, settings: Settings) -> None:
    """The real entry point (the skill inherits file descriptors, which CliRunner does not capture)."""
    path = steps_file(tmp_path, [GATE, {"action": "noise", "skill": "aiops", "tool": "noisy", "params": {}}])
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("VMWARE_PILOT_")},
        "VMWARE_PILOT_HOME": str(settings.home_path),
        "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"aiops": shlex.join([sys.executable, str(FAKE_SKILL)])}),
        "LOGNAME": "olivia",
    }
    pilot = Path(sys.executable).with_name("vmware-pilot")
    done = subprocess.run(
        [str(pilot), "run", "--steps", str(path), "--dispatch", "--yes", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "a line for the log" not in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert "\n" not in error and "the skill failed loudly and said more on a second line" in error
