"""Secret shapes in free text are masked at rest: under ordinary keys, in the goal, the description,
saved YAML, `status --json`, the catalog cache; a notify URL with credentials is refused at start-up."""

from __future__ import annotations

import json
import shlex
import sqlite3
import sys
from pathlib import Path

from typer.testing import CliRunner

from tests.support import FAKE_SERVERS
from tests.support.mcp_client import GATE, Client
from vmware_pilot.app import PilotApp
from vmware_pilot.cli.main import app as cli
from vmware_pilot.config import Settings

SECRETS = ("pa55w0rd-url", "hunter2-note", "tok-abcdef123456", "s3cret-arg", "goal-pw-99")
STEP = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {
        "vm_name": "web-01",
        "endpoint": "https://admin:pa55w0rd-url@vc.local/sdk",
        "note": "login with password=hunter2-note",
        "headers": ["Authorization: Bearer tok-abcdef123456"],
        "args": "--db-password=s3cret-arg -v",
    },
}
runner = CliRunner()


def everything_stored(settings: Settings) -> str:
    """Every document and audit detail in the database, as text."""
    with sqlite3.connect(settings.home / "pilot.db") as db:
        docs = [row[0] for row in db.execute("select document from workflows")]
        details = [row[0] for row in db.execute("select detail from audit_events")]
    return "\n".join(docs + details)


def assert_masked(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert leaked == [], text


async def test_secret_shapes_in_params_goal_and_description_are_masked_at_rest(
    client: Client, pilot_app: PilotApp, settings: Settings
) -> None:
    created = await client.ok(
        "create_workflow",
        name="shapes",
        description="use Bearer tok-abcdef123456 and https://root:pa55w0rd-url@vc/",
        steps=[GATE, STEP],
        save_as_template=True,
    )
    draft = await client.ok(
        "design_workflow", goal="log in with password=goal-pw-99", constraints="token: s3cret-arg"
    )
    status = await client.status(created["workflow_id"])
    params = status["steps"][1]["params"]
    assert params["endpoint"] == "https://admin:***@vc.local/sdk"
    assert params["note"] == "login with password=***"
    assert params["headers"] == ["Authorization: Bearer ***"]
    assert params["vm_name"] == "web-01"
    assert status["params"]["description"] == "use Bearer *** and https://root:***@vc/"
    assert_masked(json.dumps(status))
    assert_masked(json.dumps(await client.status(draft["workflow_id"])))
    assert_masked(everything_stored(settings))
    assert_masked(Path(created["template_file"]).read_text())
    result = runner.invoke(cli, ["status", created["workflow_id"], "--json"])
    assert result.exit_code == 0, result.output
    assert "login with password=***" in result.stdout
    assert_masked(result.output)


async def test_the_creating_process_still_hands_out_the_clear_text(client: Client) -> None:
    wid = await client.custom([STEP | {"action": "look", "tool": "get_vm_info"} | {"skill": "monitor"}])
    out = await client.ok("run_workflow", workflow_id=wid)
    (handed,) = out["pending_dispatch"]
    assert handed["params"]["note"] == "login with password=hunter2-note"


def fake_skill(*args: str) -> str:
    server = FAKE_SERVERS / "paged_server.py"
    return shlex.join([sys.executable, str(server), *args])


def test_catalog_refresh_masks_secrets_on_skill_command_lines(settings: Settings) -> None:
    command = fake_skill(
        "--password", "hunter2-note", "--token=tok-abcdef123456", "https://u:pa55w0rd-url@h/x"
    )
    env = {"VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"vks": command})}
    result = runner.invoke(cli, ["catalog", "refresh", "--skill", "vks", "--json"], env=env)
    assert result.exit_code == 0, result.output
    cache = settings.catalog_cache_path.read_text()
    assert "--password '***'" in json.loads(cache)["vks"]["server"]
    assert_masked(cache)
    assert_masked(result.output)
    shown = runner.invoke(cli, ["catalog", "show", "vks"], env=env)
    assert_masked(shown.output)


def test_a_notify_url_with_credentials_is_refused_at_start_up() -> None:
    env = {"VMWARE_PILOT_NOTIFY_URL": "https://hooks:pa55w0rd-url@hooks.example.com/pilot"}
    for args in (["workflows"], ["mcp"], ["status", "wf-x"]):
        result = runner.invoke(cli, args, env=env)
        assert result.exit_code == 2, (args, result.output)
        assert "VMWARE_PILOT_NOTIFY_URL" in result.stderr and "credentials" in result.stderr
        assert "X-Pilot-Signature" in result.stderr  # the hint: what to use instead
        assert_masked(result.output)


def test_a_notify_url_refusal_never_prints_the_credentials_it_refuses() -> None:
    for url in (
        "https://:np-empty-user@hooks.example.com/pilot",  # a password with no user
        "https://np-token-only@hooks.example.com/pilot",  # a token as the user
        "https://hooks:np-with@at-sign@hooks.example.com/",  # a password holding '@'
        "ftp://hooks:np-not-http@hooks.example.com/",  # refused for its scheme
        "hooks:np-no-scheme@hooks.example.com",  # refused as not a URL
        "http://[::1:np-bad-host@x",  # an unreadable host
    ):
        result = runner.invoke(cli, ["workflows"], env={"VMWARE_PILOT_NOTIFY_URL": url})
        assert result.exit_code == 2, (url, result.output)
        assert "VMWARE_PILOT_NOTIFY_URL" in result.stderr
        assert "np-" not in result.output and "at-sign" not in result.output, result.output


async def test_a_list_of_credentials_and_a_password_only_url_are_masked_at_rest(
    client: Client, settings: Settings
) -> None:
    step = {
        **STEP,
        "params": {
            "vm_name": "web-01",
            "creds": ["admin", "cr-pw-list"],
            "cache": "redis://:cr-pw-redis@cache.local:6379/0",
            "note": "login with creds: [admin, cr-pw-text]",
        },
    }
    created = await client.ok("create_workflow", name="creds", description="d", steps=[GATE, step])
    params = (await client.status(created["workflow_id"]))["steps"][1]["params"]
    assert params["creds"] == "***"
    assert params["cache"] == "redis://:***@cache.local:6379/0"
    assert params["note"] == "login with creds: ***"
    assert "cr-pw-" not in everything_stored(settings)
