"""Benchmark the network transport: throughput and latency with 1, 10 and 50 concurrent clients.

    .venv/bin/python bench/network.py [--transport https|http] [--calls 40] [--clients 1,10,50]

Starts a real `vmware-pilot mcp --transport https` process (self-signed certificate made with
openssl, throw-away pilot home, one token per client), opens one MCP session per client, then has
every client make --calls calls at once: three reads (get_workflow_status, list_workflows,
review_workflow) for each write (create_workflow_from_template). Sessions are opened before the
clock starts. Prints calls per second, p50/p95 latency in milliseconds and the server's CPU time
per call for each level. The clients run on the same machine and compete for its CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from vmware_pilot.transports.client import PilotClient, connect_http
from vmware_pilot.transports.tokens import TokenStore

INCIDENT = {"alert_entity": "web-01", "alert_name": "High CPU"}
PILOT = Path(sys.executable).with_name("vmware-pilot")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _start(home: Path, transport: str) -> tuple[subprocess.Popen[bytes], int, ssl.SSLContext | bool, Path]:
    args = ["--transport", transport, "--port", "0"]
    verify: ssl.SSLContext | bool = False
    if transport == "https":
        cert, key = home / "cert.pem", home / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(key),
             "-out", str(cert), "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
            check=True, capture_output=True,
        )  # fmt: skip
        args += ["--cert", str(cert), "--key", str(key), "--public-name", "localhost,127.0.0.1"]
        verify = ssl.create_default_context(cafile=str(cert))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VMWARE_PILOT_")}
    env.update(
        {
            "HOME": str(home),
            "VMWARE_PILOT_HOME": str(home / ".vmware"),
            "VMWARE_PILOT_LOG_LEVEL": "WARNING",
            "VMWARE_PILOT_RUNAWAY_MAX": "0",  # identical writes on purpose: no runaway breaker
        }
    )
    log = home / "server.log"
    with log.open("wb") as err:
        process = subprocess.Popen([str(PILOT), "mcp", *args], env=env, stderr=err, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while (found := re.search(r"listening on \S+:(\d+);", log.read_text())) is None:
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"server did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return process, int(found.group(1)), verify, log


async def _client_work(client: PilotClient, own: str, calls: int) -> list[float]:
    latencies: list[float] = []
    for n in range(calls):
        tool, args = [
            ("create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}),
            ("get_workflow_status", {"workflow_id": own}),
            ("list_workflows", {"limit": 20}),
            ("review_workflow", {"workflow_id": own}),
        ][n % 4]
        start = time.perf_counter()
        reply = await client.call(tool, args)
        latencies.append((time.perf_counter() - start) * 1000)
        if reply.is_error:
            raise SystemExit(f"{tool} failed: {reply.payload}")
    return latencies


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time the server process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _level(
    url: str, verify: ssl.SSLContext | bool, secrets: list[str], clients: int, calls: int, pid: int
) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(connect_http(url, s, verify=verify)) for s in secrets[:clients]
        ]
        owns = []
        for session in sessions:  # each client's own workflow, made before the clock starts
            created = await session.call(
                "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
            )
            owns.append(str(created.payload["workflow_id"]))
        cpu, start = _cpu_seconds(pid), time.perf_counter()
        per_client = await asyncio.gather(
            *(_client_work(s, o, calls) for s, o in zip(sessions, owns, strict=True))
        )
        wall, cpu = time.perf_counter() - start, _cpu_seconds(pid) - cpu
    latencies = [v for values in per_client for v in values]
    return {"clients": clients, "calls": len(latencies), "wall": wall, "cpu": cpu, "latencies": latencies}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--transport", choices=("https", "http"), default="https")
    parser.add_argument("--calls", type=int, default=40, help="calls per client per level")
    parser.add_argument("--clients", default="1,10,50", help="comma-separated client counts")
    opts = parser.parse_args()
    levels = [int(n) for n in opts.clients.split(",")]
    with tempfile.TemporaryDirectory(prefix="vmware-pilot-bench-http-") as tmp:
        home = Path(tmp)
        (home / ".vmware").mkdir(mode=0o700)
        store = TokenStore(home / ".vmware" / "tokens.json")
        secrets = [store.create(f"bench{i}", "admin") for i in range(max(levels))]
        process, port, verify, log = _start(home, opts.transport)
        url = f"{opts.transport}://127.0.0.1:{port}/mcp"
        try:
            results = [asyncio.run(_level(url, verify, secrets, n, opts.calls, process.pid)) for n in levels]
        finally:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        errors = [line for line in log.read_text().splitlines() if " ERROR vmware_pilot" in line]
    print(
        f"vmware-pilot MCP over {opts.transport} (one server process), {opts.calls} calls per client, 3 reads : 1 write"
    )
    print(f"{'clients':>8}{'calls':>8}{'calls/s':>10}{'p50 ms':>10}{'p95 ms':>10}{'server CPU ms/call':>20}")
    for r in results:
        lat = r["latencies"]
        print(
            f"{r['clients']:>8}{r['calls']:>8}{r['calls'] / r['wall']:>10.0f}{statistics.median(lat):>10.2f}"
            f"{_p(lat, 0.95):>10.2f}{r['cpu'] * 1000 / r['calls']:>20.2f}"
        )
    first, last = results[0], results[-1]
    print(
        f"throughput {last['clients']} vs {first['clients']} client(s): "
        f"{(last['calls'] / last['wall']) / (first['calls'] / first['wall']):.2f}x; "
        f"p50 latency ratio {statistics.median(last['latencies']) / statistics.median(first['latencies']):.2f}x"
    )
    print(f"server errors logged: {len(errors)}")


if __name__ == "__main__":
    main()
