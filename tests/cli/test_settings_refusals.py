"""Every start-up and settings error is one refusal and its hint, exit 2, no traceback: through the
installed entry points, for each command (issue 28, "one line for every start-up error").

A ``VMWARE_PILOT_*`` name that is no setting is warned about with the nearest known one, and the
command goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Runner, entry_point
from vmware_pilot.cli.refusals import load_settings
from vmware_pilot.config import Settings, settings_problem, unknown_settings
from vmware_pilot.errors import StartupRefused

BIN = Path(sys.executable).parent

# Each command that reads the settings, in a form that would otherwise get as far as its work.
COMMANDS = [
    ("vmware-pilot", "workflows"),
    ("vmware-pilot", "status", "wf-1"),
    ("vmware-pilot", "review", "wf-1"),
    ("vmware-pilot", "templates"),
    ("vmware-pilot", "templates", "export", "exported"),
    ("vmware-pilot", "approve", "wf-1", "--yes"),
    ("vmware-pilot", "reject", "wf-1", "--reason", "no", "--yes"),
    ("vmware-pilot", "cancel", "wf-1", "--yes"),
    ("vmware-pilot", "rollback", "wf-1", "--yes"),
    ("vmware-pilot", "run", "incident_response", "-p", "alert_entity=web-01", "-p", "alert_name=CPU"),
    ("vmware-pilot", "audit", "verify"),
    ("vmware-pilot", "catalog", "show"),
    ("vmware-pilot", "catalog", "refresh"),
    ("vmware-pilot", "token", "create", "probe"),
    ("vmware-pilot", "token", "list"),
    ("vmware-pilot", "token", "roles"),
    ("vmware-pilot", "mcp"),
    ("vmware-pilot", "mcp", "--dispatch"),
    ("vmware-pilot-mcp",),
    ("vmware-pilot", "mcp", "--transport", "http", "--port", "0"),
]
SERVERS = {"mcp", "vmware-pilot-mcp"}

BAD_SETTINGS = {
    "database-url": ("VMWARE_PILOT_DATABASE_URL", "garbage", "is not a database URL"),
    "database-port": (
        "VMWARE_PILOT_DATABASE_URL",
        "postgresql://pilot:pw@db:port/x",
        "is not a database URL",
    ),
    "skill-commands-json": ("VMWARE_PILOT_SKILL_COMMANDS", "{vm: x}", "is not valid JSON"),
    "skill-commands-shape": ("VMWARE_PILOT_SKILL_COMMANDS", '["vm"]', "valid dictionary"),
    "log-level": ("VMWARE_PILOT_LOG_LEVEL", "LOUD", "is not one of DEBUG, INFO"),
}


def _run(
    command: tuple[str, ...], cwd: Path, run: Runner = entry_point, **env: str
) -> subprocess.CompletedProcess[str]:
    return run(command[0], *command[1:], env=env, cwd=cwd)


def _one_refusal(done: subprocess.CompletedProcess[str], command: tuple[str, ...]) -> tuple[str, str]:
    """The refusal and its hint, after checking there is nothing else: exit 2, no traceback."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == "", done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, done.stderr
    server = command[0] == "vmware-pilot-mcp" or command[1] == "mcp"
    first, hint = ("vmware-pilot mcp: ", "  ") if server else ("error: ", "hint: ")
    assert lines[0].startswith(first) and lines[1].startswith(hint), done.stderr
    return lines[0], lines[1]


@pytest.mark.slow  # an entry-point process per command and setting
@pytest.mark.parametrize("bad", list(BAD_SETTINGS), ids=list(BAD_SETTINGS))
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:3]) for c in COMMANDS])
def test_invalid_settings_are_one_refusal_from_every_command(
    command: tuple[str, ...], bad: str, tmp_path: Path
) -> None:
    name, value, said = BAD_SETTINGS[bad]
    refusal, hint = _one_refusal(_run(command, tmp_path, **{name: value}), command)
    assert "invalid settings" in refusal and name in refusal and said in refusal
    assert "pw" not in refusal  # a database URL's password is never echoed
    assert "VMWARE_PILOT_*" in hint


# The commands that write to the home (the store, the token file, the catalog cache); the stdio
# server opens the store at the first tool call and answers that call with the refusal.
WRITERS = [c for c in COMMANDS if c[-1] not in ("show", "roles") and c[0] != "vmware-pilot-mcp"]
WRITERS = [c for c in WRITERS if c[1:] not in (("mcp",), ("mcp", "--dispatch"))]


@pytest.mark.slow
@pytest.mark.parametrize("command", WRITERS, ids=[" ".join(c[:3]) for c in WRITERS])
def test_a_home_that_cannot_be_written_is_one_refusal(command: tuple[str, ...], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    # Root writes through any mode, so the home lies under a file: no one can create it.
    refusal, hint = _one_refusal(_run(command, tmp_path, VMWARE_PILOT_HOME=str(blocker / "home")), command)
    assert str(blocker) in refusal and "Not a directory" in refusal
    assert "VMWARE_PILOT_HOME" in hint


def test_token_create_in_a_home_it_cannot_write(tmp_path: Path, run_pilot: Runner) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    command = ("vmware-pilot", "token", "create", "probe")
    done = _run(command, tmp_path, run_pilot, VMWARE_PILOT_HOME=str(blocker / "home"))
    refusal, hint = _one_refusal(done, command)
    assert "tokens.json cannot be written" in refusal and "VMWARE_PILOT_HOME" in hint


def test_a_garbage_database_url_is_one_refusal(tmp_path: Path, run_pilot: Runner) -> None:
    command = ("vmware-pilot", "workflows")
    refusal, _hint = _one_refusal(
        _run(command, tmp_path, run_pilot, VMWARE_PILOT_DATABASE_URL="garbage"), command
    )
    assert "VMWARE_PILOT_DATABASE_URL is not a database URL" in refusal


@pytest.mark.parametrize(
    "url",
    [
        "",
        "sqlite:///:memory:",
        "sqlite:////var/lib/pilot/pilot.db",
        "postgresql+psycopg://pilot@db.example.com:5432/pilot?sslmode=require",
        "postgresql://pilot:secret@[::1]/pilot",
    ],
)
def test_usable_database_urls_are_accepted(url: str) -> None:
    assert Settings(database_url=url).database_url == url


@pytest.mark.parametrize(
    "url", ["garbage", "mysql://u@h/d", "postgresql://u:pw@h:abc/d", "postgres://u@h/d", "sqlite:/x"]
)
def test_unusable_database_urls_are_refused_without_the_value(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", url)
    with pytest.raises(StartupRefused) as caught:
        load_settings()
    assert "VMWARE_PILOT_DATABASE_URL is not a database URL" in caught.value.message
    assert url not in caught.value.message


def test_the_log_level_is_checked_and_normalised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMWARE_PILOT_LOG_LEVEL", " debug ")
    assert load_settings().log_level == "DEBUG"
    monkeypatch.setenv("VMWARE_PILOT_LOG_LEVEL", "LOUD")
    with pytest.raises(StartupRefused, match="VMWARE_PILOT_LOG_LEVEL='LOUD' is not one of"):
        load_settings()


def test_skill_commands_that_are_not_json_name_the_variable_and_the_position(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VMWARE_PILOT_SKILL_COMMANDS", '{"vm": "vmware-vm-mcp",}')
    with pytest.raises(ValueError) as caught:
        Settings()
    problem = settings_problem(caught.value)
    assert problem.startswith("VMWARE_PILOT_SKILL_COMMANDS is not valid JSON (")
    assert "line 1 column" in problem and '{"vm": "vmware-vm-mcp --flag"}' in problem


def test_unknown_names_get_the_nearest_known_one() -> None:
    environ = {
        "VMWARE_PILOT_DATBASE_URL": "x",
        "VMWARE_PILOT_DISPATCH_TIMOUT": "x",
        "VMWARE_PILOT_XYZZY": "x",
        "VMWARE_PILOT_home": "x",  # a setting: the environment is read without regard to case
        "VMWARE_PILOT_TEST_PG_BIN": "x",  # the test harness's own
        "PATH": "/bin",
    }
    assert unknown_settings(environ) == [
        ("VMWARE_PILOT_DATBASE_URL", "VMWARE_PILOT_DATABASE_URL"),
        ("VMWARE_PILOT_DISPATCH_TIMOUT", "VMWARE_PILOT_DISPATCH_TIMEOUT"),
        ("VMWARE_PILOT_XYZZY", ""),
    ]


UNKNOWN = [
    pytest.param(("vmware-pilot", "workflows"), id="workflows"),
    pytest.param(("vmware-pilot", "token", "list"), id="token"),
    pytest.param(("vmware-pilot", "catalog", "show", "--json"), id="catalog"),
]


@pytest.mark.parametrize("command", UNKNOWN)
def test_an_unknown_name_is_warned_about_and_the_command_goes_on(
    command: tuple[str, ...], tmp_path: Path, run_pilot: Runner
) -> None:
    done = _run(command, tmp_path, run_pilot, VMWARE_PILOT_DATBASE_URL="postgresql://x@h/d")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "warning: VMWARE_PILOT_DATBASE_URL is not a vmware-pilot setting and is ignored; "
        "did you mean VMWARE_PILOT_DATABASE_URL?"
    )
    if "--json" in command:
        json.loads(done.stdout)  # stdout stays the result alone


@pytest.mark.slow  # a server process
def test_the_stdio_server_warns_about_an_unknown_name_on_stderr(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(BIN / "vmware-pilot"), "mcp"],
        capture_output=True,
        text=True,
        input="",  # the client goes away at once
        timeout=120,
        check=False,
        env={**os.environ, "VMWARE_PILOT_XYZZY": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # the protocol channel carries no warning
    assert (
        "vmware-pilot mcp: warning: VMWARE_PILOT_XYZZY is not a vmware-pilot setting and is ignored "
        "(docs/settings.md lists them)" in done.stderr
    )
