"""The `vmware-pilot` command line loads each command's module only when that command is needed."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vmware_pilot import __version__
from vmware_pilot.cli.commands import app, load_command
from vmware_pilot.cli.index import COMMANDS, top_level_help

SCRIPT = Path(sys.executable).with_name("vmware-pilot")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_listed_summary_is_the_commands_own_help(name: str) -> None:
    command = load_command(name)
    first = inspect.cleandoc(command.help or "").split("\n\n")[0].replace("\n", " ")
    assert COMMANDS[name].summary == first
    assert command.name == name


def test_top_level_help_lists_every_command_without_importing_them() -> None:
    probe = (
        "import sys, io, contextlib\n"
        "sys.argv = ['vmware-pilot', '--help']\n"
        "from vmware_pilot.cli.main import main\n"
        "out = io.StringIO()\n"
        "try:\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "loaded = [m for m in sys.modules if m.startswith('vmware_pilot.cli.') or m == 'rich']\n"
        "print(repr(sorted(loaded)))\n"
        "print(out.getvalue())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded, _, shown = done.stdout.partition("\n")
    assert loaded == repr(["vmware_pilot.cli.index", "vmware_pilot.cli.main"])
    rows = shown.split("Commands:")[1].split("\n\n")[0].splitlines()
    listed = [row.split()[0] for row in rows if row.startswith("  ") and not row.startswith("   ")]
    assert listed == list(COMMANDS)


TYPER_HELP = "from vmware_pilot.cli.commands import app; app(['--help'], prog_name='vmware-pilot')"


@pytest.mark.parametrize("columns", ["200", "80", "61", "40"])
def test_the_static_top_level_help_is_what_the_typer_app_draws(columns: str) -> None:
    """`--help` is drawn without typer from ``cli.index``; the typer app (built from the same
    table, with each summary checked against its command above) draws the very same text at any
    terminal width. (Both run as programs: click's test runner forces its own width.)"""
    env = {**os.environ, "COLUMNS": columns}
    typer_drawn = subprocess.run(
        [sys.executable, "-c", TYPER_HELP], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    static = subprocess.run(
        [str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60, check=True, env=env
    )
    assert static.stdout == typer_drawn.stdout
    assert "Commands:" in static.stdout
    assert list(app.registered_commands) == [] and app.registered_groups == []  # all in COMMANDS


PROBE = """
import json, sys
sys.argv = ["vmware-pilot", *json.loads(sys.argv[1])]
try:
    from vmware_pilot.cli.main import main
    main()
finally:
    loaded = sorted({m.split(".")[0] for m in sys.modules} & {"typer", "click", "rich"})
    sys.stderr.write("LOADED " + json.dumps(loaded) + "\\n")
"""


@pytest.mark.parametrize(("args", "code"), [(["--help"], 0), (["-h"], 0), ([], 2)])
def test_top_level_help_imports_no_typer_click_or_rich(
    args: list[str], code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("COLUMNS", "80")  # here and in the program: the same width
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    shown, _, loaded = (done.stdout + done.stderr).rpartition("LOADED ")
    assert done.returncode == code
    assert json.loads(loaded) == []
    # asked for: on stdout; no command given: on stderr, as click does it
    assert (done.stdout if code == 0 else shown) == top_level_help()
    assert "Commands:" in shown and "vmware-pilot COMMAND --help" in shown


def test_top_level_help_through_the_console_script() -> None:
    env = {**os.environ, "COLUMNS": "80"}
    asked = subprocess.run(
        [str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60, check=True, env=env
    )
    short = subprocess.run(
        [str(SCRIPT), "-h"], capture_output=True, text=True, timeout=60, check=True, env=env
    )
    bare = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False, env=env)
    assert asked.stdout == short.stdout == bare.stderr
    assert bare.returncode == 2 and bare.stdout == ""
    for name, where in COMMANDS.items():
        assert f"  {name} " in asked.stdout and where.summary.split()[0] in asked.stdout


@pytest.mark.slow  # starts a process of its own (README, Tests)
def test_a_commands_own_help_is_still_drawn_by_typer() -> None:
    """`vmware-pilot approve --help` goes to the typer app, and the probe above sees typer loaded."""
    import json

    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(["approve", "--help"])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "vmware-pilot approve [OPTIONS]" in done.stdout and "--yes" in done.stdout
    assert "typer" in json.loads(done.stderr.rpartition("LOADED ")[2])


def test_version_and_a_command_still_run_through_the_console_script() -> None:
    script = SCRIPT
    version = subprocess.run([str(script), "version"], capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout == f"vmware-pilot {__version__}\n"
    unknown = subprocess.run(
        [str(script), "nonsense"], capture_output=True, text=True, timeout=60, check=False
    )
    assert unknown.returncode == 2 and "No such command 'nonsense'" in unknown.stderr
