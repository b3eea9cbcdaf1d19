"""Several Pilots on one PostgreSQL: calls/s and p50/p95 with 1, 2 and 3 replicas, next to 1 on SQLite.

    .venv/bin/python bench/replicas.py [--clients 12] [--calls 40] [--replicas 1,2,3]

Starts a private PostgreSQL 15 (tests/support/pg_server.py: needs /usr/lib/postgresql/15/bin, see
scripts/pg-setup.sh) and, per configuration, that many `vmware-pilot mcp --transport http`
processes on loopback sharing one pilot home (its tokens) and one database (a fresh one per
configuration). The clients are spread over the replicas round-robin, each with its own session
opened before the clock starts, and make --calls calls at once: three reads (get_workflow_status,
list_workflows, review_workflow) for each write (create_workflow_from_template). Everything runs
on this machine: clients, replicas and the database share its CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.pg_server import PgServer
from vmware_pilot.config import Settings
from vmware_pilot.store.sql import open_store
from vmware_pilot.transports.client import PilotClient, connect_http
from vmware_pilot.transports.tokens import TokenStore, hash_secret

INCIDENT = {"alert_entity": "web-01", "alert_name": "High CPU"}
PILOT = Path(sys.executable).with_name("vmware-pilot")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _start(home: Path, database_url: str, n: int) -> tuple[subprocess.Popen[bytes], int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VMWARE_PILOT_")}
    env.update(
        {
            "HOME": str(home),
            "VMWARE_PILOT_HOME": str(home / ".vmware"),
            "VMWARE_PILOT_LOG_LEVEL": "WARNING",
            "VMWARE_PILOT_RUNAWAY_MAX": "0",  # identical writes on purpose: no runaway breaker
            "VMWARE_PILOT_DATABASE_URL": database_url,
        }
    )
    log = home / f"replica-{n}.log"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [str(PILOT), "mcp", "--transport", "http", "--port", "0"],
            env=env,
            stderr=err,
            stdout=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + 60
    while (found := re.search(r"listening on \S+:(\d+);", log.read_text())) is None:
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"replica did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return process, int(found.group(1))


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


async def _measure(urls: list[str], secrets: list[str], calls: int) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(connect_http(urls[i % len(urls)], secret, verify=False))
            for i, secret in enumerate(secrets)
        ]
        owns = []
        for session in sessions:
            created = await session.call(
                "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
            )
            owns.append(str(created.payload["workflow_id"]))
        start = time.perf_counter()
        per_client = await asyncio.gather(
            *(_client_work(s, o, calls) for s, o in zip(sessions, owns, strict=True))
        )
        wall = time.perf_counter() - start
    latencies = [v for values in per_client for v in values]
    return {"wall": wall, "latencies": latencies}


def _configuration(home: Path, url: str, replicas: int, secrets: list[str], calls: int) -> dict[str, Any]:
    started = [_start(home, url, n) for n in range(replicas)]
    try:
        return asyncio.run(_measure([f"http://127.0.0.1:{port}/mcp" for _, port in started], secrets, calls))
    finally:
        for process, _ in started:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--calls", type=int, default=40, help="calls per client")
    parser.add_argument("--replicas", default="1,2,3", help="replica counts on PostgreSQL")
    opts = parser.parse_args()
    server = PgServer()
    server.start()
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="vmware-pilot-bench-replicas-") as tmp:
            home = Path(tmp)
            (home / ".vmware").mkdir(mode=0o700)
            tokens = TokenStore(home / ".vmware" / "tokens.json")
            secrets = [tokens.create(f"bench{i}", "admin") for i in range(opts.clients)]
            rows.append(("SQLite", 1, _configuration(home, "", 1, secrets, opts.calls)))
            for n in (int(x) for x in opts.replicas.split(",")):
                url = server.url(server.new_database())
                # with a database URL the replicas read their tokens from the database
                with open_store(Settings(home=home / ".vmware", database_url=url)) as store:
                    for i, secret in enumerate(secrets):
                        store.tokens.add_token(
                            f"bench{i}", "admin", hash_secret(secret), "2026-01-01T00:00:00+00:00"
                        )
                rows.append(("PostgreSQL", n, _configuration(home, url, n, secrets, opts.calls)))
    finally:
        server.stop()
    print(f"{opts.clients} clients x {opts.calls} calls (3 reads : 1 write), HTTP on loopback, one machine")
    print(f"{'database':>12}{'replicas':>10}{'calls/s':>10}{'p50 ms':>10}{'p95 ms':>10}")
    for name, n, r in rows:
        lat = r["latencies"]
        print(
            f"{name:>12}{n:>10}{len(lat) / r['wall']:>10.0f}{statistics.median(lat):>10.2f}{_p(lat, 0.95):>10.2f}"
        )


if __name__ == "__main__":
    main()
