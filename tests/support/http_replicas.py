"""Two real `vmware-pilot mcp --transport http` replicas on one database, each with a pilot home of
its own (two hosts), and an HTTP transport that sends one client's requests to them in turn.

``replicas`` creates a token once with the CLI against the database (accepted by both) and yields
the two processes and the token's secret. ``RoundRobin`` is an ``httpx2`` transport that sends
each request to the next replica in turn (real processes, or ASGI apps in this process) and
records which one served it (with the request's ``Mcp-Method`` and ``Mcp-Name`` headers, which
the 2026-07-28 client sends).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2

from tests.support.server_proc import PILOT, PilotProcess, clean_env, start_server

__all__ = ["RoundRobin", "Served", "cli", "replicas"]


def cli(folder: Path, url: str, *args: str) -> str:
    """`vmware-pilot ARGS` as an operator on host ``folder`` would run it; its stdout."""
    env = clean_env(folder, {"VMWARE_PILOT_DATABASE_URL": url})
    done = subprocess.run(
        [str(PILOT), *args], env=env, cwd=folder, capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@contextmanager
def replicas(
    database_url: str, folder: Path, env: Mapping[str, str] | None = None
) -> Iterator[tuple[list[PilotProcess], str]]:
    """Replicas A and B on ``database_url`` (settings ``env`` on both) and an admin token's secret."""
    hosts = [folder / "host-a", folder / "host-b", folder / "operator"]
    for host in hosts:
        host.mkdir()
    secret = cli(hosts[2], database_url, "token", "create", "alice")
    settings = {"VMWARE_PILOT_DATABASE_URL": database_url, **(env or {})}
    with ExitStack() as stack:
        started = [
            stack.enter_context(start_server(h, ["--transport", "http"], env=settings)) for h in hosts[:2]
        ]
        yield started, secret


@dataclass(frozen=True)
class Served:
    replica: int  # 0: A, 1: B
    method: str  # the Mcp-Method header ("" when absent)
    name: str  # the Mcp-Name header (a tool's name on tools/call)
    status: int


class RoundRobin(httpx2.AsyncBaseTransport):
    """Each request to the next of ``transports`` in turn. With ``ports`` (real processes), the
    request's address and Host header are rewritten to that replica's port on 127.0.0.1."""

    def __init__(self, transports: Sequence[httpx2.AsyncBaseTransport], ports: Sequence[int] = ()) -> None:
        self._transports = list(transports)
        self._ports = list(ports)
        self._next = 0
        self.served: list[Served] = []

    @classmethod
    def over(cls, servers: Sequence[PilotProcess]) -> RoundRobin:
        return cls([httpx2.AsyncHTTPTransport() for _ in servers], [s.port for s in servers])

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        index, self._next = self._next, (self._next + 1) % len(self._transports)
        if self._ports:
            port = self._ports[index]
            request.url = request.url.copy_with(host="127.0.0.1", port=port)
            request.headers["Host"] = f"127.0.0.1:{port}"
        response = await self._transports[index].handle_async_request(request)
        method, name = request.headers.get("Mcp-Method", ""), request.headers.get("Mcp-Name", "")
        self.served.append(Served(index, method, name, response.status_code))
        return response

    async def aclose(self) -> None:
        for transport in self._transports:
            await transport.aclose()
