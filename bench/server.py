"""Benchmark the MCP server over real stdio: tool latency, memory and lists with many workflows stored.

    .venv/bin/python bench/server.py [--workflows 10000] [--samples 200] [--starts 5] [--large 100000]

Starts `vmware-pilot mcp` as a subprocess (throw-away pilot home) and:
1. stores 100 workflows through the tools, lists them, and reads the server's RSS; then stores up
   to --workflows, lists again and reads the RSS again (target: at most 1.2x the RSS at 100);
2. times get_workflow_status, create_workflow and run_workflow calls (p50/p95 in ms) through the
   MCP Python SDK's client, which validates every result against the tool's outputSchema in the
   client's own process, and get_workflow_status and create_workflow again from a raw JSON-RPC
   client (a request line written, the answer line read, nothing validated): the server's own time;
3. times process start to a completed `initialize` (--starts);
4. with --large N (0 skips): a new home with N workflows written straight into its database
   (as bench/store.py does), a new server, and `list_workflows()` without arguments: p50, the
   answer's size and the server's RSS before and after (targets: < 20 ms, < 64 KiB, < 20 MiB),
   and the same list from the raw client.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp.types import TextContent

from store import populate
from vmware_pilot.config import Settings
from vmware_pilot.store.sql import open_store
from vmware_pilot.transports.client import PilotClient, connect_stdio, server_command

INCIDENT = {"alert_entity": "web-01", "alert_name": "High CPU", "target": "lab"}
CUSTOM_STEPS = [
    {"action": "list", "skill": "monitor", "tool": "list_virtual_machines", "params": {}},
    {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}},
    {"action": "power_on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "web-01"}},
]


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _ok(client: PilotClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    reply = await client.call(tool, args)
    if reply.is_error:
        raise SystemExit(f"{tool} failed: {reply.payload}")
    return reply.payload


async def _timed(samples: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    out = []
    for i in range(samples):
        start = time.perf_counter()
        await call(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def server_rss_mib() -> float:
    """Resident memory of this process's `vmware-pilot mcp` child (read from /proc)."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and "vmware-pilot" in cmdline and " mcp" in cmdline:
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    raise SystemExit("the server process was not found under /proc")


class RawClient:
    """JSON-RPC lines to a `vmware-pilot mcp` subprocess: no SDK session and no client-side
    validation, so a call's time is the server's (and the pipe's)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = itertools.count(1)

    @classmethod
    async def start(cls, env: dict[str, str]) -> RawClient:
        command, args = server_command()
        process = await asyncio.create_subprocess_exec(
            command,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, **env},
            limit=1 << 24,
        )
        client = cls(process)
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        await client.request("initialize", init)
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return client

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: dict[str, Any]) -> bytes:
        """The answer line (not parsed: reading it is the client's work, not the server's)."""
        request_id = next(self.ids)
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise SystemExit("the server closed its stdout")
            if b'"method"' not in line[:200]:  # skip server notifications
                return line

    async def call(self, tool: str, arguments: dict[str, Any]) -> bytes:
        line = await self.request("tools/call", {"name": tool, "arguments": arguments})
        if b'"isError":true' in line.replace(b" ", b""):
            raise SystemExit(f"{tool} failed: {line[:300]!r}")
        return line

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await self.process.wait()


async def _raw_calls(env: dict[str, str], ids: list[str], samples: int) -> dict[str, list[float]]:
    raw = await RawClient.start(env)
    try:
        rng = random.Random(7)
        await raw.call("get_workflow_status", {"workflow_id": ids[0]})
        return {
            "get_workflow_status": await _timed(
                samples, lambda i: raw.call("get_workflow_status", {"workflow_id": rng.choice(ids)})
            ),
            "create_workflow": await _timed(
                samples,
                lambda i: raw.call(
                    "create_workflow", {"name": f"raw-{i}", "description": "bench", "steps": CUSTOM_STEPS}
                ),
            ),
        }
    finally:
        await raw.close()


async def _store(client: PilotClient, ids: list[str], upto: int) -> None:
    t0 = time.perf_counter()
    before = len(ids)
    while len(ids) < upto:
        created = await _ok(
            client,
            "create_workflow_from_template",
            {"workflow_type": "incident_response", "params": INCIDENT},
        )
        ids.append(str(created["workflow_id"]))
    print(
        f"stored {upto - before} workflows through the tools in {time.perf_counter() - t0:.1f} s", flush=True
    )


async def _latency(
    home: Path, workflows: int, samples: int, memory: dict[str, float]
) -> dict[str, list[float]]:
    command, args = server_command()
    env = {"VMWARE_PILOT_HOME": str(home), "VMWARE_PILOT_LOG_LEVEL": "WARNING"}
    async with connect_stdio(command, args, env=env) as client:
        ids: list[str] = []
        for size in (100, workflows):
            await _store(client, ids, size)
            await _ok(client, "list_workflows", {})
            memory[f"{size:,}"] = server_rss_mib()
        # Fresh workflows to run (created untimed), so every timed run does the same work.
        to_run = [
            str(
                (
                    await _ok(
                        client,
                        "create_workflow_from_template",
                        {"workflow_type": "incident_response", "params": INCIDENT},
                    )
                )["workflow_id"]
            )
            for _ in range(samples)
        ]
        rng = random.Random(7)
        results = {
            "get_workflow_status": await _timed(
                samples, lambda i: _ok(client, "get_workflow_status", {"workflow_id": rng.choice(ids)})
            ),
            "create_workflow": await _timed(
                samples,
                lambda i: _ok(
                    client,
                    "create_workflow",
                    {"name": f"bench-{i}", "description": "bench", "steps": CUSTOM_STEPS},
                ),
            ),
            "run_workflow": await _timed(
                samples, lambda i: _ok(client, "run_workflow", {"workflow_id": to_run[i]})
            ),
        }
        listed = await _ok(client, "list_workflows", {"limit": 1})
        print(f"active workflows in the store: {listed.get('active_total')}")
    for tool, values in (await _raw_calls(env, ids, samples)).items():
        results[f"{tool} (raw)"] = values
    return results


async def _startups(home: Path, starts: int) -> list[float]:
    command, args = server_command()
    env = {"VMWARE_PILOT_HOME": str(home), "VMWARE_PILOT_LOG_LEVEL": "WARNING"}
    out = []
    for _ in range(starts):
        start = time.perf_counter()
        async with connect_stdio(command, args, env=env):
            out.append((time.perf_counter() - start) * 1000)
    return out


async def _large_list(home: Path, size: int) -> dict[str, float]:
    t0 = time.perf_counter()
    store = open_store(Settings(home=home))
    populate(store, 0, size)
    store.close()
    print(f"wrote {size:,} workflows into a new store in {time.perf_counter() - t0:.1f} s", flush=True)
    command, args = server_command()
    env = {"VMWARE_PILOT_HOME": str(home), "VMWARE_PILOT_LOG_LEVEL": "WARNING"}
    async with connect_stdio(command, args, env=env) as client:
        await _ok(client, "get_skill_catalog", {})  # the first call builds the app
        before = server_rss_mib()
        times = []
        for _ in range(30):
            start = time.perf_counter()
            result = await client.session.call_tool("list_workflows", {})
            times.append((time.perf_counter() - start) * 1000)
        size_bytes = sum(len(b.text.encode()) for b in result.content if isinstance(b, TextContent))
        after = server_rss_mib()
        total = (result.structuredContent or {}).get("active_total")
    raw = await RawClient.start(env)
    try:
        await raw.call("list_workflows", {})
        raw_times = await _timed(30, lambda i: raw.call("list_workflows", {}))
    finally:
        await raw.close()
    return {
        "raw_p50": statistics.median(raw_times),
        "p50": statistics.median(times),
        "kib": size_bytes / 1024,
        "rss_before": before,
        "rss_after": after,
        "active_total": float(total or 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workflows", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--large", type=int, default=100_000, help="workflows for the large list (0 skips)")
    opts = parser.parse_args()
    memory: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="vmware-pilot-bench-") as tmp:
        home = Path(tmp) / "pilot"
        latency = asyncio.run(_latency(home, opts.workflows, opts.samples, memory))
        startups = asyncio.run(_startups(home, opts.starts))
        large = asyncio.run(_large_list(Path(tmp) / "large", opts.large)) if opts.large else None
    print(f"vmware-pilot MCP over stdio, {opts.workflows} workflows stored, {opts.samples} calls per tool")
    print("(raw: a JSON-RPC client that validates nothing; the others through the MCP Python SDK's")
    print(" client, which validates each result against the tool's outputSchema)")
    print(f"{'tool':<28}{'p50 ms':>10}{'p95 ms':>10}")
    for tool, values in latency.items():
        print(f"{tool:<28}{statistics.median(values):>10.2f}{_p(values, 0.95):>10.2f}")
    base = statistics.median(latency["get_workflow_status"])
    for tool in ("create_workflow", "run_workflow"):
        print(f"ratio {tool} / get_workflow_status (p50): {statistics.median(latency[tool]) / base:.2f}")
    print(
        f"start-up to initialize: median {statistics.median(startups):.0f} ms over {opts.starts} starts "
        f"(min {min(startups):.0f}, max {max(startups):.0f})"
    )
    small, big = memory["100"], memory[f"{opts.workflows:,}"]
    print(
        f"server RSS after creating and listing: {small:.1f} MiB at 100, {big:.1f} MiB at "
        f"{opts.workflows:,} ({big / small:.2f}x; target <= 1.2x)"
    )
    if large is not None:
        print(
            f"list_workflows() with {opts.large:,} stored ({large['active_total']:,.0f} active): "
            f"p50 {large['p50']:.2f} ms (target < 20; raw {large['raw_p50']:.2f} ms), "
            f"answer {large['kib']:.1f} KiB (target < 64), "
            f"server RSS {large['rss_before']:.1f} -> {large['rss_after']:.1f} MiB "
            f"(+{large['rss_after'] - large['rss_before']:.1f}; target < 20)"
        )


if __name__ == "__main__":
    main()
