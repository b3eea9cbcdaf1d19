"""A command run on a pseudo-terminal, as a person types at it (the tty and hostile-terminal tests)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

CLI = Path(sys.executable).with_name("vmware-pilot")


class Terminal:
    """A subprocess whose stdin, stdout and stderr are one pseudo-terminal."""

    def __init__(self, *args: str, user: str) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, "LOGNAME": user, "COLUMNS": "120", "TERM": "dumb"}
        self.proc = subprocess.Popen(
            [str(CLI), *args], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )
        os.close(slave)
        self.seen = ""

    def read_until(self, text: str, timeout: float = 60.0) -> str:
        """Collect output until ``text`` appears (the test fails if it never does)."""
        while text not in self.seen:
            ready, _, _ = select.select([self.master], [], [], timeout)
            assert ready, f"no {text!r} in:\n{self.seen}"
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            assert chunk, f"the command ended without {text!r}:\n{self.seen}"
            self.seen += chunk.decode(errors="replace")
        return self.seen

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def finish(self, timeout: float = 60.0) -> int:
        while True:
            ready, _, _ = select.select([self.master], [], [], timeout)
            if not ready:
                break
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.seen += chunk.decode(errors="replace")
        code = self.proc.wait(timeout)
        os.close(self.master)
        return code
