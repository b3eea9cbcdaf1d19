"""A real `vmware-pilot mcp --transport https|http` process for tests and benchmarks.

The process gets its own HOME and pilot home, writes stderr to a file, is ready once its banner
names the port, and is stopped by pid (SIGTERM, then SIGKILL if it does not stop).
"""

from __future__ import annotations

import os
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["INIT", "PILOT", "PilotProcess", "clean_env", "make_cert", "start_server"]

PILOT = Path(sys.executable).with_name("vmware-pilot")
# A raw MCP initialize request, for tests that speak HTTP without a client session.
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
_BANNER = re.compile(r"listening on \S+:(\d+);")


def make_cert(folder: Path, names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> tuple[Path, Path]:
    """A self-signed certificate for ``names`` (DNS names and IP addresses), made with openssl."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    san = ",".join(f"IP:{n}" if n[0].isdigit() or ":" in n else f"DNS:{n}" for n in names)
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={names[0]}",
            "-addext", f"subjectAltName={san}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def clean_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment without VMWARE_PILOT_* settings, with HOME and the pilot home set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VMWARE_PILOT_")}
    env.update({"HOME": str(home), "VMWARE_PILOT_HOME": str(home / ".vmware"), **(extra or {})})
    return env


@dataclass
class PilotProcess:
    process: subprocess.Popen[bytes]
    port: int
    scheme: str
    log: Path
    ca: Path | None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/mcp"

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def verify(self) -> ssl.SSLContext | bool:
        return ssl.create_default_context(cafile=str(self.ca)) if self.ca else False

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        return self.process.returncode


@contextmanager
def start_server(
    home: Path,
    args: list[str],
    *,
    ca: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    port: int = 0,
    command: Sequence[str] = (str(PILOT),),
) -> Iterator[PilotProcess]:
    """Run ``vmware-pilot mcp ARGS --port PORT`` (default 0: any free port) until the block ends;
    yields once it listens. ``command``: another `vmware-pilot` (a previous release's)."""
    log = home / f"server-{time.monotonic_ns()}.log"
    scheme = "https" if "https" in args else "http"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [*command, "mcp", *args, "--port", str(port)],
            env=clean_env(home, env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=home,
        )
    server = PilotProcess(process, 0, scheme, log, ca)
    try:
        deadline = time.monotonic() + timeout
        while True:
            found = _BANNER.search(server.stderr())
            if found:
                server.port = int(found.group(1))
                break
            if process.poll() is not None:
                raise RuntimeError(f"server exited with {process.returncode}:\n{server.stderr()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not start within {timeout} s:\n{server.stderr()}")
            time.sleep(0.05)
        yield server
    finally:
        server.stop()
