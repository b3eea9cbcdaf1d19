"""The operator commands through the `vmware-pilot` entry point (typer CliRunner, no terminal).

The person is the OS account running the command (``ME``); ``LOGNAME`` is set to other names to
show that the environment cannot change who approves. Workflows are set up, and other people
approve, through the same service a server would use on the same store.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner, Result

from tests.support.prechecks import count_prechecks
from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.cli import views
from vmware_pilot.cli.main import app as cli
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.enums import StepStatus
from vmware_pilot.engine.requests import ApproveRequest, CancelRequest, CreateRequest, RunRequest
from vmware_pilot.results import BlastRadius
from vmware_pilot.safety.blast import rollback_blast_radius

runner = CliRunner()
CLI = Path(sys.executable).with_name("vmware-pilot")
# An agent on stdio acts as the OS account it runs under: the same caller as the person here.
AGENT = Actor.os_user()
ME = AGENT.name
GATE = {
    "action": "require_approval",
    "skill": "pilot",
    "tool": "approve",
    "params": {"message": "Power off web-01?"},
}
READ = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}
OFF = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "web-01", "vc_password": "hunter2"},
    "rollback_tool": "power_on_vm",
    "rollback_params": {"vm_name": "web-01"},
}
# A literal secret is handed only to the workflow's creator; released by someone else, by reference.
OFF_BY_REF = {**OFF, "params": {"vm_name": "web-01", "vc_password": {"$env": "VC_PASSWORD"}}}


@pytest.fixture
def pilot(settings: Settings) -> Iterator[PilotApp]:
    app = build_app(settings)
    yield app
    app.close()


def invoke(*args: str, user: str = "olivia", input: str | None = None, **env: str) -> Result:
    return runner.invoke(cli, list(args), input=input, env={"LOGNAME": user, **env})


def at_gate(pilot: PilotApp, *steps: dict[str, Any]) -> str:
    wid = str(
        pilot.service.create_workflow(
            CreateRequest(AGENT, "off-web", "d", list(steps) or [GATE, OFF])
        ).payload()["workflow_id"]
    )
    out = asyncio.run(pilot.service.run_workflow(RunRequest(AGENT, wid))).payload()
    assert out["outcome"] == "awaiting_approval"
    return wid


def status(pilot: PilotApp, wid: str) -> dict[str, Any]:
    return pilot.service.get_workflow_status(wid).payload()


def actions(pilot: PilotApp, wid: str) -> list[str]:
    return [e["action"] for e in status(pilot, wid)["audit_log"]]


# --- reads ---------------------------------------------------------------------------------
def test_workflows_lists_newest_first_and_filters_by_state(pilot: PilotApp) -> None:
    waiting = at_gate(pilot)
    other = str(
        pilot.service.create_workflow(CreateRequest(AGENT, "reads", "d", [READ])).payload()["workflow_id"]
    )
    listed = json.loads(invoke("workflows", "--json").stdout)
    assert [w["id"] for w in listed["workflows"]] == [other, waiting] and listed["count"] == 2
    only = json.loads(invoke("workflows", "--state", "awaiting_approval", "--json").stdout)
    assert [w["id"] for w in only["workflows"]] == [waiting]
    assert [
        w["id"] for w in json.loads(invoke("workflows", "--limit", "1", "--json").stdout)["workflows"]
    ] == [other]
    table = invoke("workflows")
    assert table.exit_code == 0 and waiting in table.stdout and "awaiting_approval" in table.stdout
    assert invoke("workflows", "--state", "sleeping").exit_code == 2


def test_workflows_pages_with_offset_and_names_the_next_page(pilot: PilotApp) -> None:
    ids = [
        str(
            pilot.service.create_workflow(CreateRequest(AGENT, "reads", "d", [READ])).payload()["workflow_id"]
        )
        for _ in range(5)
    ]
    newest = ids[::-1]
    first = json.loads(invoke("workflows", "--limit", "2", "--json").stdout)
    assert [w["id"] for w in first["workflows"]] == newest[:2] and first["next_offset"] == 2
    last = json.loads(invoke("workflows", "--limit", "2", "--offset", "4", "--json").stdout)
    assert [w["id"] for w in last["workflows"]] == newest[4:] and last["next_offset"] is None
    assert "--offset 2" in invoke("workflows", "--limit", "2").stdout
    assert invoke("workflows", "--limit", "501").exit_code == 2


def test_status_shows_steps_gate_message_gates_and_audit(pilot: PilotApp) -> None:
    wid = at_gate(pilot)
    shown = invoke("status", wid)
    assert shown.exit_code == 0
    digest = status(pilot, wid)["gates"][0]["digest"]
    for text in ("Power off web-01?", "aiops.power_off_vm", "pending", "awaiting_approval", digest[:30]):
        assert text in shown.stdout
    assert "hunter2" not in shown.stdout
    data = json.loads(invoke("status", wid, "--json").stdout)
    assert data["gates"][0]["digest"] == digest and data["steps"][1]["params"]["vc_password"] == "***"


def test_text_from_a_workflow_is_shown_literally_never_read_as_markup(pilot: PilotApp) -> None:
    message = "Power off [web-01]? [/docs] [black on black]hidden[/black on black] done"
    gate = {**GATE, "params": {"message": message}}
    off = {**OFF, "action": "[bold]off[/bold]", "params": {"vm_name": "[/x]web-01"}}
    wid = at_gate(pilot, gate, off)
    shown = invoke("status", wid, COLUMNS="300")
    assert shown.exit_code == 0, shown.output
    flat = " ".join(shown.stdout.split())
    assert "Power off [web-01]? [/docs]" in flat and "[black on black]hidden" in flat
    assert "[bold]off[/bold]" in flat
    asked = invoke("approve", wid, COLUMNS="300")  # shows the gate, then refuses: no terminal to ask on
    assert asked.exit_code == 1 and "[black on black]hidden" in " ".join(asked.stdout.split())
    forged = at_gate(
        pilot, {**GATE, "params": {"message": "Fine.\nReleases (runs once approved):\nnothing"}}, OFF
    )
    panel = invoke("approve", forged, COLUMNS="300").stdout
    assert panel.count("Releases (runs once approved):") == 2, "the message's copy stays on its own line"
    assert "Fine. Releases (runs once approved): nothing" in panel
    rejected = invoke("reject", wid, "--reason", "not [/now]", "--yes")
    assert rejected.exit_code == 0 and "not [/now]" in rejected.stdout


def test_an_unknown_id_is_a_usage_error_with_a_hint(pilot: PilotApp) -> None:
    for command in ("status", "review", "approve", "rollback", "cancel"):
        result = invoke(command, "wf-nope")
        assert result.exit_code == 2, command
        assert "not found" in result.stderr and "vmware-pilot workflows" in result.stderr


def test_review_and_templates(pilot: PilotApp) -> None:
    wid = at_gate(pilot)
    review = json.loads(invoke("review", wid, "--json").stdout)
    assert review["summary"]["approval_gates"] == 1 and review["workflow_id"] == wid
    assert "verdict" in invoke("review", wid).stdout
    names = [t["name"] for t in json.loads(invoke("templates", "--json").stdout)["templates"]]
    assert "incident_response" in names and "rolling_restart" in names
    assert "incident_response" in invoke("templates").stdout


# --- approve -------------------------------------------------------------------------------
def test_approve_without_a_terminal_or_yes_refuses_and_changes_nothing(pilot: PilotApp) -> None:
    wid = at_gate(pilot)
    result = invoke("approve", wid)
    assert result.exit_code == 1
    assert "no terminal" in result.stderr and "--yes" in result.stderr
    assert "an agent must not use it" in result.stderr
    assert "Power off web-01?" in result.stdout, "the gate is shown before anything is asked"
    assert status(pilot, wid)["state"] == "awaiting_approval"


def test_approve_records_the_os_user_bound_to_the_digest_shown(pilot: PilotApp) -> None:
    wid = at_gate(pilot)
    digest = status(pilot, wid)["gates"][0]["digest"]
    result = invoke("approve", wid, "--yes", "--json", user="olivia")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["approved_by"] == ME != "olivia" and data["outcome"] == "dispatch_required"
    after = status(pilot, wid)
    assert [(a["approver"], a["channel"], a["digest"]) for a in after["gates"][0]["approvals"]] == [
        (ME, "cli", digest)
    ]
    approved = [e for e in after["audit_log"] if e["action"] == "approved"]
    assert approved[0]["actor"] == ME and digest in approved[0]["detail"]
    assert "hunter2" not in result.stdout


def test_approve_at_the_terminal_runs_the_precheck_once(
    pilot: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI shows the gate, then hands one request to the service, which checks it once before
    the question and records it with that check (it used to check, ask, then check again)."""
    wid = at_gate(pilot)
    prechecks = count_prechecks(monkeypatch)
    result = invoke("approve", wid, "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["approved_by"] == ME
    assert prechecks == [wid]


def test_a_refused_approval_at_the_terminal_is_refused_before_the_question(
    pilot: PilotApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    wid = at_gate(pilot, READ, GATE, OFF)  # the read was handed out: unacknowledged, it refuses
    prechecks = count_prechecks(monkeypatch)
    result = invoke("approve", wid, input="y\n")
    assert result.exit_code != 0 and "--ack-not-executed" in result.stderr
    assert "Approve this gate" not in result.output, "refused before the person is asked"
    assert prechecks == [wid] and status(pilot, wid)["state"] == "awaiting_approval"


def test_approve_full_shows_what_the_gate_releases_with_its_risk(pilot: PilotApp) -> None:
    wid = at_gate(pilot, READ, GATE, OFF)
    result = invoke("approve", wid, "--full")
    for text in (
        "Power off web-01?",
        "aiops.power_off_vm",
        "power_on_vm",
        "list_virtual_machines",
        "not_executed",
    ):
        assert text in result.stdout
    assert "write" in result.stdout or "destructive" in result.stdout
    flat = " ".join(result.stdout.split())
    assert '"vm_name": "web-01"' in flat and '"vc_password": "***"' in flat and "hunter2" not in flat
    # The released step is the workflow's last: no rollback can ever run after it, and it says so.
    assert "No rollback will undo this step: it is the workflow's last" in flat
    assert "A rollback would run" not in flat
    assert "Current state not known" in flat, "hand-back mode says it did not read the targets"
    # The prediction comes first: without dispatch nothing was read, so it cannot say more.
    flat = " ".join(invoke("approve", wid, "--full", COLUMNS="400").stdout.split())
    assert flat.index("Prediction: UNKNOWN: cannot predict step 2 (aiops.power_off_vm)") < flat.index(
        "Releases"
    )
    assert "Its precondition cannot be checked: web-01 (it was not read)" in flat
    assert "Pilot runs without dispatch (hand-back mode), so it read nothing" in flat


def test_approve_needs_ack_for_handed_out_steps(pilot: PilotApp) -> None:
    wid = at_gate(pilot, READ, GATE, OFF)
    refused = invoke("approve", wid, "--yes")
    assert refused.exit_code == 1 and "--ack-not-executed" in refused.stderr
    assert status(pilot, wid)["state"] == "awaiting_approval"
    done = invoke("approve", wid, "--yes", "--ack-not-executed")
    assert done.exit_code == 0, done.output
    assert [s["status"] for s in status(pilot, wid)["steps"]] == ["reported_done", "success", "not_executed"]
    assert "aiops.power_off_vm" in done.stdout, "the steps to perform now are printed"


def test_approve_without_dispatch_releases_the_steps_to_the_agent_not_the_person(pilot: PilotApp) -> None:
    bot = Actor(name="ops-agent", kind="token", role="operator")
    wid = str(
        pilot.service.create_workflow(CreateRequest(bot, "off-web", "d", [GATE, OFF_BY_REF])).payload()[
            "workflow_id"
        ]
    )
    asyncio.run(pilot.service.run_workflow(RunRequest(bot, wid))).payload()
    done = invoke("approve", wid, "--yes")
    assert done.exit_code == 0, done.output
    flat = " ".join(done.stdout.split())
    assert "handed to the agent that runs this workflow (token:ops-agent), not to you" in flat
    assert "handed to the agent that runs workflow" in flat and "token:ops-agent" in flat
    assert "not to you" in flat and "next run_workflow" in flat
    assert "perform them yourself" not in flat
    out = asyncio.run(pilot.service.run_workflow(RunRequest(bot, wid))).payload()
    assert [p["index"] for p in out["pending_dispatch"]] == [1]


def test_the_cli_approves_when_the_policy_reserves_approval_for_people(settings: Settings) -> None:
    human = build_app(Settings(home=settings.home, approvals="human"))
    try:
        wid = at_gate(human)
        result = invoke("approve", wid, "--yes", VMWARE_PILOT_APPROVALS="human")
        assert result.exit_code == 0, result.output
        assert status(human, wid)["approved_by"] == ME
    finally:
        human.close()


def test_approve_refuses_an_expired_gate_and_reject_still_works(pilot: PilotApp) -> None:
    wid = at_gate(pilot, {**GATE, "params": {"message": "Go?", "expires_in_minutes": 0.001}}, OFF)
    asyncio.run(asyncio.sleep(0.1))
    expired = invoke("approve", wid, "--yes")
    assert expired.exit_code == 1 and "expired" in expired.stderr and "reject" in expired.stderr
    assert "EXPIRED" in invoke("status", wid).stdout
    assert "awaiting_approval (gate expired)" in invoke("workflows", COLUMNS="200").stdout
    listed = json.loads(invoke("workflows", "--json").stdout)["workflows"]
    assert [w.get("expired") for w in listed if w["id"] == wid] == [True]
    assert actions(pilot, wid).count("gate_expired") == 1  # recorded once, however often it is seen
    rejected = invoke("reject", wid, "--reason", "too late", "--yes")
    assert rejected.exit_code == 0, rejected.output
    assert status(pilot, wid)["state"] == "cancelled" and "rejected" in actions(pilot, wid)


def test_approve_refuses_a_plan_changed_since_the_gate(pilot: PilotApp) -> None:
    wid = at_gate(pilot)
    wf = pilot.store.workflows.load(wid)  # another writer of the database changes the released step
    wf.steps[1].params["vm_name"] = "db-01"
    pilot.store.workflows.save(wf)
    result = invoke("approve", wid, "--yes")
    assert result.exit_code == 1 and "changed" in result.stderr
    assert "approved" not in actions(pilot, wid)


def test_a_quorum_gate_takes_distinct_people(pilot: PilotApp) -> None:
    wid = at_gate(pilot, {**GATE, "params": {"message": "Go?", "approvals_required": 2}}, OFF_BY_REF)
    first = invoke("approve", wid, "--yes", user="olivia")
    assert first.exit_code == 0 and "1 more approval" in first.stdout
    assert status(pilot, wid)["state"] == "awaiting_approval"
    # Another name in the environment is still the same account: one person cannot make a quorum.
    again = invoke("approve", wid, "--yes", user="peter")
    assert again.exit_code == 1 and "already approved" in again.stderr
    assert status(pilot, wid)["state"] == "awaiting_approval"
    second = asyncio.run(
        pilot.service.approve(ApproveRequest(Actor("peter"), wid, approver="peter"))
    ).payload()
    assert second["approved_by"] == f"{ME}, peter"
    assert actions(pilot, wid).count("approval_recorded") == 1


def test_approve_of_a_workflow_not_at_a_gate_is_refused(pilot: PilotApp) -> None:
    wid = str(
        pilot.service.create_workflow(CreateRequest(AGENT, "reads", "d", [READ])).payload()["workflow_id"]
    )
    result = invoke("approve", wid, "--yes")
    assert result.exit_code == 1 and "not waiting at an approval gate" in result.stderr


@pytest.mark.slow
def test_cli_processes_write_to_the_store_a_running_server_keeps_open(pilot: PilotApp) -> None:
    """``pilot`` holds the store open as a server does; each CLI process opens and closes it."""

    def cli_process(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CLI), *args], check=False, env=dict(os.environ), capture_output=True, text=True
        )

    wid = at_gate(pilot)
    listed = cli_process("workflows", "--json")
    assert wid in listed.stdout, listed.stderr
    approved = cli_process("approve", wid, "--yes", "--json")
    assert approved.returncode == 0, approved.stderr
    after = status(pilot, wid)
    assert (after["state"], after["approved_by"]) == ("pending", ME), "the open store sees the CLI's write"
    asyncio.run(pilot.service.cancel_workflow(CancelRequest(AGENT, wid, "done", confirm=True))).payload()
    shown = cli_process("status", wid, "--json")
    assert json.loads(shown.stdout)["state"] == "cancelled", "and the CLI sees the server's"


# --- reject, cancel, rollback --------------------------------------------------------------
def test_reject_needs_a_reason_and_audits_it(pilot: PilotApp) -> None:
    wid = at_gate(pilot)
    assert invoke("reject", wid, "--yes").exit_code == 2
    assert invoke("reject", wid, "--reason", " ", "--yes").exit_code == 2
    assert invoke("reject", wid, "--reason", "wrong vm").exit_code == 1  # no terminal, no --yes
    result = invoke("reject", wid, "--reason", "wrong vm", "--yes", "--json", user="peter")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["state"], data["outcome"], data["action"], data["rejected_by"]) == (
        "cancelled",
        "cancelled",
        "cancelled",
        ME,
    )
    log = status(pilot, wid)["audit_log"]
    assert [e["detail"] for e in log if e["action"] == "rejected"] == [
        f"{ME} rejected the gate at step 0: wrong vm"
    ]


def test_cancel_previews_the_blast_radius_then_cancels(pilot: PilotApp) -> None:
    wid = at_gate(pilot, READ, GATE, OFF)
    preview = invoke("cancel", wid, "--reason", "change freeze")
    assert preview.exit_code == 1 and "cancel preview" in preview.stdout
    assert status(pilot, wid)["state"] == "awaiting_approval"
    done = invoke("cancel", wid, "--reason", "change freeze", "--yes", "--json")
    assert done.exit_code == 0 and json.loads(done.stdout)["state"] == "cancelled"
    again = invoke("cancel", wid, "--yes")
    assert again.exit_code == 1 and "blocked" in again.stderr


def test_rollback_previews_then_acts(pilot: PilotApp) -> None:
    wid = at_gate(pilot, READ, GATE, OFF)
    preview = invoke("rollback", wid)
    assert preview.exit_code == 1 and "rollback preview" in preview.stdout
    assert status(pilot, wid)["state"] == "awaiting_approval"
    done = invoke("rollback", wid, "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["action"] == "rolled_back"
    assert status(pilot, wid)["state"] == "failed"
    cancelled = at_gate(pilot)
    assert invoke("cancel", cancelled, "--yes").exit_code == 0
    blocked = invoke("rollback", cancelled, "--yes")
    assert blocked.exit_code == 1 and "blocked" in blocked.stderr and "cancelled" in blocked.stderr


def test_operator_commands_explain_bad_settings_and_an_unusable_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VMWARE_PILOT_SKILL_COMMANDS", "not json")
    bad_json = CliRunner().invoke(cli, ["workflows"])
    assert bad_json.exit_code == 2 and "invalid settings" in bad_json.output
    monkeypatch.delenv("VMWARE_PILOT_SKILL_COMMANDS")
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv("VMWARE_PILOT_HOME", str(not_a_folder))
    unusable = CliRunner().invoke(cli, ["workflows"])
    assert unusable.exit_code == 2 and "hint:" in unusable.output
    assert unusable.exception is None or isinstance(unusable.exception, SystemExit)


def test_approve_is_compact_and_ends_with_the_decision(pilot: PilotApp) -> None:
    wid = at_gate(pilot, {**GATE, "params": {"message": "Go?", "approvals_required": 2}}, OFF)
    shown = invoke("approve", wid, COLUMNS="200").stdout
    assert "params:" not in shown and "plan digest" not in shown and f"approve {wid} --full" in shown
    rows = [line.strip(" │╰╭─╮╯") for line in shown.splitlines() if line.strip(" │╰╭─╮╯")]
    top = rows.index("Decision")  # the last panel: nothing but the summary follows it
    said = rows[top + 1 :]
    assert said[0] == f"Asked by {ME} — d" and said[1].startswith("Verdict: unknown"), said
    assert "Approvals: 0 of 2; 2 more needed" in said and said[-1] == "You may approve or reject.", said
    full = invoke("approve", wid, "--full", COLUMNS="200").stdout
    assert "params:" in full and "plan digest" in full and full.rstrip().endswith("╯")
    assert full.index("plan digest") < full.index(f"Asked by {ME}")


def test_approve_records_a_comment_and_refuses_a_second_approval_by_the_same_person(pilot: PilotApp) -> None:
    wid = at_gate(pilot, {**GATE, "params": {"message": "Go?", "approvals_required": 2}}, OFF)
    first = invoke("approve", wid, "--yes", "--comment", "Checked the LB pool")
    assert first.exit_code == 0, first.output
    (approval,) = status(pilot, wid)["gates"][0]["approvals"]
    assert approval["comment"] == "Checked the LB pool"
    again = invoke("approve", wid, "--yes")
    assert again.exit_code == 1 and "You already approved this gate" in again.stderr
    assert "You cannot approve: You already approved" in again.stdout  # said in place of the prompt


def test_the_rollback_preview_speaks_plainly(pilot: PilotApp) -> None:
    wid = at_gate(pilot, READ, GATE, OFF)
    shown = invoke("rollback", wid, COLUMNS="200").stdout
    assert "rollback preview: the workflow would end" in shown and "Nothing to roll back" in shown
    wf = pilot.store.workflows.load(wid)  # as after a run that powered web-01 off and then failed
    wf.steps[2].status = StepStatus.SUCCESS
    radius = BlastRadius.model_validate(
        rollback_blast_radius(wf, pilot.service.catalog, acknowledge_unknown_effects=False)
    )
    console = Console(width=200, record=True)
    console.print(views.blast_panel("rollback", radius))
    text = console.export_text()
    for raw in ("would_roll_back", "left_in_place", "performed_outside_pilot", "would_skip"):
        assert raw not in text, text
    assert "would be undone, newest first" in text
    assert 'step 2 aiops.power_off_vm ← undone by aiops.power_on_vm {"vm_name": "web-01"}' in text
