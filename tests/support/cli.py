"""The command line, run two ways with the same result type: in this process (``main()`` with its
argv and environment, output captured: the fast tier) or as the installed entry point (a process of
its own: slow tier). ``run_pilot``, the fixture in tests/conftest.py, runs a test both ways."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
Ran = subprocess.CompletedProcess[str]
Runner = Callable[..., Ran]


def entry_point(program: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Ran:
    """``program`` (vmware-pilot or vmware-pilot-mcp) as a process; HOME and VMWARE_PILOT_HOME
    come from the test's isolated environment."""
    return subprocess.run(
        [str(BIN / program), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def in_process(program: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Ran:
    """The same command through the entry point's function in this process: its exit code (an exit
    with a message prints it and exits 1, as Python does), stdout and stderr."""
    from vmware_pilot.cli.main import main, mcp_main

    entry = {"vmware-pilot": main, "vmware-pilot-mcp": mcp_main}[program]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    root = logging.getLogger()  # a command that configures logging must not undo pytest's capture
    handlers, level = root.handlers[:], root.level
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        if cwd is not None:
            patch.chdir(cwd)
        patch.setattr(sys, "argv", [program, *args])
        # click names the program from __main__: under `python -m pytest` that is "python -m
        # pytest", which an installed entry point never is.
        patch.setattr(sys.modules["__main__"], "__package__", None, raising=False)
        patch.setattr(sys, "stdin", io.StringIO(""))
        with redirect_stdout(out), redirect_stderr(err):
            try:
                entry()
            except SystemExit as exc:
                if isinstance(exc.code, int) or exc.code is None:
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
            finally:
                root.handlers[:] = handlers
                root.setLevel(level)
    return subprocess.CompletedProcess([program, *args], code, out.getvalue(), err.getvalue())
