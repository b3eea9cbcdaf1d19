"""One exit-code mapping for every command: 0 done, 1 refused, 2 usage (README, "Operators").

Run through the installed entry points, as a person, a script or an MCP client starts them: the
same start-up failure (invalid settings, a store that cannot be opened) exits 2 from the operator
commands and from the server alike, each with one refusal and its hint on stderr.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.store_helpers import set_schema_version
from vmware_pilot.cli.refusals import EXIT_REFUSED, EXIT_USAGE, exit_code
from vmware_pilot.config import Settings
from vmware_pilot.errors import (
    ApprovalGateRefused,
    ArgumentError,
    DatabaseUnavailable,
    InvalidInput,
    PilotError,
    StartupRefused,
    StateRefused,
    WorkflowNotFound,
)
from vmware_pilot.store.migrations import LATEST
from vmware_pilot.store.sql import open_store

BIN = Path(sys.executable).parent


def _run(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    # HOME and VMWARE_PILOT_HOME come from the test's isolated environment.
    return subprocess.run(
        [str(BIN / program), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def test_exit_codes_follow_the_class_of_the_refusal() -> None:
    assert exit_code(InvalidInput("bad")) == EXIT_USAGE == 2
    assert exit_code(ArgumentError("bad", field="x")) == EXIT_USAGE
    assert exit_code(WorkflowNotFound("wf-1")) == EXIT_USAGE
    assert exit_code(StartupRefused("cannot open")) == EXIT_USAGE
    assert exit_code(StateRefused("not now")) == EXIT_REFUSED == 1
    assert exit_code(ApprovalGateRefused("no gate")) == EXIT_REFUSED
    assert exit_code(DatabaseUnavailable("down")) == EXIT_REFUSED  # during an operation: retry
    assert exit_code(PilotError("anything else")) == EXIT_REFUSED


COMMANDS = [
    pytest.param(("vmware-pilot", "status", "wf-1"), False, id="status"),
    pytest.param(("vmware-pilot", "workflows"), False, id="workflows"),
    pytest.param(("vmware-pilot", "audit", "verify"), False, id="audit"),
    pytest.param(("vmware-pilot", "mcp", "--transport", "http", "--port", "0"), True, id="mcp-http"),
]


@pytest.mark.slow  # two entry-point processes per command
@pytest.mark.parametrize(("command", "server"), COMMANDS)
def test_a_store_that_cannot_be_opened_exits_2_from_every_command(
    settings: Settings, command: tuple[str, ...], server: bool
) -> None:
    assert _run("vmware-pilot", "token", "create", "probe").returncode == 0  # so the server gets that far
    open_store(settings).close()
    set_schema_version(settings, str(LATEST + 1))
    done = _run(*command)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip() and " INFO " not in line]
    assert len(lines) == 2, done.stderr  # the refusal and its hint
    first, hint = ("vmware-pilot mcp: ", "  ") if server else ("error: ", "hint: ")
    assert lines[0].startswith(first) and "understands up to version" in lines[0], done.stderr
    assert lines[1].startswith(hint + "Upgrade vmware-pilot"), done.stderr


SETTINGS_COMMANDS = [
    pytest.param(("vmware-pilot", "status", "wf-1"), id="status"),
    pytest.param(("vmware-pilot", "audit", "verify"), id="audit"),
    pytest.param(("vmware-pilot", "catalog", "show"), id="catalog"),
    pytest.param(("vmware-pilot", "token", "list"), id="token"),
    pytest.param(("vmware-pilot", "mcp"), id="mcp-stdio"),
    pytest.param(("vmware-pilot-mcp",), id="vmware-pilot-mcp"),
    pytest.param(("vmware-pilot", "mcp", "--transport", "http", "--port", "0"), id="mcp-http"),
]


@pytest.mark.parametrize("command", SETTINGS_COMMANDS)
@pytest.mark.slow
def test_invalid_settings_exit_2_from_every_command(
    monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    monkeypatch.setenv("VMWARE_PILOT_DISPATCH_TIMEOUT", "-1")
    done = _run(*command)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert "invalid settings" in done.stderr and "VMWARE_PILOT_DISPATCH_TIMEOUT" in done.stderr
    assert "fix the VMWARE_PILOT_* environment variables" in done.stderr


@pytest.mark.slow
def test_done_refused_and_usage_through_the_entry_point(settings: Settings) -> None:
    done = _run("vmware-pilot", "workflows")
    assert done.returncode == 0, done.stderr
    unknown = _run("vmware-pilot", "approve", "wf-nope", "--yes")
    assert unknown.returncode == 2 and "not found" in unknown.stderr
    created = _run(
        "vmware-pilot", "run", "incident_response", "-p", "alert_entity=web-01", "-p", "alert_name=CPU"
    )
    assert created.returncode == 0, created.stderr
    with open_store(settings) as store:
        (row,) = store.workflows.list_all()
    refused = _run("vmware-pilot", "approve", str(row["id"]), "--yes")  # steps before the gate unacknowledged
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith("error: ") and "hint: " in refused.stderr
