"""What a new user meets first, through the installed entry point: `--version`, one help style,
"did you mean" for a mistyped command, refusals in the command line's words, the console's URL at
start and `GET /` leading to it, and the project files a user looks for."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

from tests.support.cli import Runner
from tests.support.server_proc import clean_env, start_server
from vmware_pilot import __version__
from vmware_pilot.cli.index import COMMANDS

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
GROUPS = {"audit": "verify", "catalog": "show", "token": "list", "templates": "export"}


def _pilot(run: Runner, *args: str) -> subprocess.CompletedProcess[str]:
    return run("vmware-pilot", *args, env={"COLUMNS": "100"})


def test_version_flag_and_command_print_the_version(run_pilot: Runner) -> None:
    for args in (["--version"], ["version"]):
        done = _pilot(run_pilot, *args)
        assert done.returncode == 0 and done.stdout == f"vmware-pilot {__version__}\n", done
    assert "--version" in _pilot(run_pilot, "--help").stdout


@pytest.mark.parametrize(
    "args",
    [[name, "--help"] for name in COMMANDS]
    + [[group, sub, "--help"] for group, sub in GROUPS.items()]
    + [["--help"]],
    ids=lambda args: " ".join(args[:-1]) or "top",
)
def test_every_help_page_has_the_top_levels_style(args: list[str], run_pilot: Runner) -> None:
    done = _pilot(run_pilot, *args)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("Usage: vmware-pilot"), text
    assert "\nOptions:\n" in text  # click's plain sections, like the top-level help
    assert not re.search(r"[╭╮╰╯│─]", text), text  # no rich panels
    assert "<bool>" not in text  # a flag takes no value
    for line in text.splitlines():  # a flag's row names no type
        flag = re.match(r"\s+(--json|--yes|--dispatch|--force)\b(.*)", line)
        if flag:
            assert not flag.group(2).lstrip().startswith("<"), line


def test_a_subcommands_help_shows_flags_without_a_type(run_pilot: Runner) -> None:
    text = _pilot(run_pilot, "status", "--help").stdout
    assert re.search(r"^\s+--json\s+Print the result as JSON", text, re.MULTILINE), text
    assert "╭" not in text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["wrkflows"], "No such command 'wrkflows'. Did you mean 'workflows'?"),
        (["aprove", "wf-1"], "No such command 'aprove'. Did you mean 'approve'?"),
        (["token", "lst"], "No such command 'lst'. Did you mean 'list'?"),
        (["catalog", "refesh"], "No such command 'refesh'. Did you mean 'refresh'?"),
    ],
)
def test_a_mistyped_command_gets_the_nearest_ones(args: list[str], said: str, run_pilot: Runner) -> None:
    done = _pilot(run_pilot, *args)
    assert done.returncode == 2 and said in done.stderr, done.stderr


def test_a_command_nothing_resembles_gets_no_guess(run_pilot: Runner) -> None:
    done = _pilot(run_pilot, "xyzzy")
    assert done.returncode == 2
    assert "No such command 'xyzzy'." in done.stderr and "Did you mean" not in done.stderr


MCP_WORDS = re.compile(r"\b[a-z_]+\(\)|create_workflow_from_template|list_workflows|pilot://")


@pytest.mark.parametrize(
    ("args", "code", "hint"),
    [
        (["status", "wf-nope"], 2, "`vmware-pilot workflows` lists"),
        (["run", "no_such_template"], 1, "`vmware-pilot templates` lists"),
        (["run", "incident_response"], 2, "(-p NAME=VALUE)"),
        (["run", "incident_response", "-p", "alert_entity=a", "-p", "alert_name=b", "-p", "x=1"], 2, "-p"),
    ],
)
def test_refusals_at_the_terminal_are_in_the_command_lines_words(
    args: list[str], code: int, hint: str, run_pilot: Runner
) -> None:
    done = _pilot(run_pilot, *args)
    assert done.returncode == code, done.stderr
    assert hint in done.stderr
    assert not MCP_WORDS.search(done.stderr), done.stderr


@pytest.mark.slow  # a server process
def test_the_start_line_names_the_console_and_get_slash_leads_there(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    made = subprocess.run(
        [str(BIN / "vmware-pilot"), "token", "create", "probe"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=clean_env(home),
    )
    assert made.returncode == 0, made.stderr
    with start_server(home, ["--transport", "http"]) as server:
        line = next(x for x in server.stderr().splitlines() if "vmware-pilot MCP server:" in x)
        assert f"Web console: http://127.0.0.1:{server.port}/console/" in line, line
        with httpx.Client(base_url=server.base, timeout=30) as client:
            root = client.get("/", follow_redirects=False)
            assert root.status_code == 302 and root.headers["location"] == "/console/"
            page = client.get("/", follow_redirects=True)
            assert page.status_code == 200 and page.url.path.startswith("/console/")
            assert client.post("/").status_code == 405


def test_project_files_a_user_looks_for() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    licence = (REPO / "LICENSE").read_text()
    assert project["license"] in ("MIT", {"text": "MIT"}) and licence.startswith("MIT License")
    assert "Copyright (c) 2026 vmware-pilot contributors" in licence
    changelog = (REPO / "CHANGELOG.md").read_text()
    versions = [line[3:] for line in changelog.splitlines() if line.startswith("## ")]
    assert versions[0] == "Unreleased" and "3.0.0 (2026-12-02)" in versions  # tests/test_release.py: the rest
    assert "### Foundation (2026-11-30)" in changelog  # from the first commit on
    for name, words in (("CONTRIBUTING.md", "scripts/test.sh"), ("SECURITY.md", "Scope")):
        assert words in (REPO / name).read_text(), name
