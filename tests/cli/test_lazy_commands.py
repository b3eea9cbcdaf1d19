"""The `vmware-pilot` command line loads each command's module only when that command is needed."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from vmware_pilot import __version__
from vmware_pilot.cli.commands import COMMANDS, load_command


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
    assert loaded == repr(["vmware_pilot.cli.commands", "vmware_pilot.cli.main"])
    rows = shown.split("Commands:")[1].splitlines()
    listed = [row.split()[0] for row in rows if row.startswith("  ") and not row.startswith("   ")]
    assert listed == list(COMMANDS)


def test_version_and_a_command_still_run_through_the_console_script() -> None:
    script = Path(sys.executable).with_name("vmware-pilot")
    version = subprocess.run([str(script), "version"], capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout == f"vmware-pilot {__version__}\n"
    unknown = subprocess.run(
        [str(script), "nonsense"], capture_output=True, text=True, timeout=60, check=False
    )
    assert unknown.returncode == 2 and "No such command 'nonsense'" in unknown.stderr
