"""Benchmark the MCP server over real stdio: tool latency, memory and lists with many workflows stored.

    .venv/bin/python bench/server.py [--workflows 10000] [--samples 200] [--starts 5] [--large 100000]
                                     [--vs OTHER/bin/vmware-pilot]

Starts `vmware-pilot mcp` as a subprocess (throw-away pilot home) and:
1. stores 100 workflows through the tools, lists them, and reads the server's RSS; then stores up
   to --workflows, lists again and reads the RSS again (target: at most 1.2x the RSS at 100);
2. times get_workflow_status, create_workflow and run_workflow calls (p50/p95 in ms) through the
   MCP Python SDK's client, which validates every result against the tool's outputSchema in the
   client's own process, and the same three from a raw JSON-RPC client (a request line written,
   the answer line read, nothing validated): the server's own time;
3. times process start to a completed `initialize` (--starts);
4. with --large N (0 skips): a new home with N workflows written straight into its database
   (as bench/store.py does), a new server, and `list_workflows()` without arguments: p50, the
   answer's size and the server's RSS before and after (targets: < 20 ms, < 64 KiB, < 20 MiB),
   and the same list from the raw client.

With --vs, another installation's `vmware-pilot` script (an earlier commit installed in a venv of
its own, say) is measured in the same run: both servers are up at once and the timed calls and
start-ups alternate between them, so a machine that slows down or speeds up during the run
weighs on both alike. Its large home is filled by its own Python, with its own schema.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_types import TextContent

from common import devnull, ok, startups_in_turns
from vmware_pilot.transports.client import PilotClient, connect_stdio, server_command

INCIDENT = {"alert_entity": "web-01", "alert_name": "High CPU", "target": "lab"}
CUSTOM_STEPS = [
    {"action": "list", "skill": "monitor", "tool": "list_virtual_machines", "params": {}},
    {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}},
    {"action": "power_on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "web-01"}},
]
# Fills a home's database straight through bench/store.py, run by the subject's own Python.
POPULATE = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from store import populate
from vmware_pilot.config import Settings
from vmware_pilot.store.sql import open_store
store = open_store(Settings(home=Path(sys.argv[2])))
populate(store, 0, int(sys.argv[3]))
store.close()
"""


@dataclass
class Subject:
    name: str
    command: str
    args: list[str]
    scratch: Path
    times: dict[str, list[float]] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    large: dict[str, float] = field(default_factory=dict)

    @property
    def python(self) -> str:
        return str(Path(self.command).with_name("python"))

    def env(self, home: Path) -> dict[str, str]:
        # Benchmarks repeat identical writes on purpose: no runaway breaker (server/runaway.py).
        return {
            "VMWARE_PILOT_HOME": str(home),
            "VMWARE_PILOT_LOG_LEVEL": "WARNING",
            "VMWARE_PILOT_RUNAWAY_MAX": "0",
        }


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _alternating(
    subjects: list[Subject], label: str, samples: int, calls: list[Callable[[int], Awaitable[object]]]
) -> None:
    """``calls[k](i)`` for sample i on subject k, the subjects taking turns; times in ms."""
    for subject in subjects:
        subject.times[label] = []
    for i in range(samples):
        for subject, call in zip(subjects, calls, strict=True):
            start = time.perf_counter()
            await call(i)
            subject.times[label].append((time.perf_counter() - start) * 1000)


def server_rss_mib(command: str) -> float:
    """Resident memory of this process's `… mcp` child started from ``command`` (from /proc)."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and command in cmdline and " mcp" in cmdline:
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    raise SystemExit(f"the server process of {command} was not found under /proc")


class RawClient:
    """JSON-RPC lines to a `vmware-pilot mcp` subprocess: no SDK session and no client-side
    validation, so a call's time is the server's (and the pipe's)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = itertools.count(1)

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, subject: Subject, home: Path) -> AsyncIterator[RawClient]:
        process = await asyncio.create_subprocess_exec(
            subject.command,
            *subject.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, **subject.env(home)},
            limit=1 << 24,
        )
        client = cls(process)
        try:
            init = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            }
            await client.request("initialize", init)
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            yield client
        finally:
            assert process.stdin is not None
            process.stdin.close()
            await process.wait()

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


async def _from_template(client: PilotClient) -> str:
    created = await ok(
        client, "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
    )
    return str(created["workflow_id"])


async def _store(subject: Subject, client: PilotClient, ids: list[str], upto: int) -> None:
    t0 = time.perf_counter()
    before = len(ids)
    while len(ids) < upto:
        ids.append(await _from_template(client))
    took = time.perf_counter() - t0
    print(f"{subject.name}: stored {upto - before} workflows through the tools in {took:.1f} s", flush=True)


async def _latency(subjects: list[Subject], workflows: int, samples: int) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                connect_stdio(s.command, s.args, env=s.env(s.scratch / "pilot"), errlog=devnull())
            )
            for s in subjects
        ]
        ids: list[list[str]] = [[] for _ in subjects]
        for size in (100, workflows):
            for subject, client, own in zip(subjects, clients, ids, strict=True):
                await _store(subject, client, own, size)
                await ok(client, "list_workflows", {})
                subject.memory[f"{size:,}"] = server_rss_mib(subject.command)
        # Fresh workflows to run (created untimed), so every timed run does the same work.
        to_run = [[await _from_template(c) for _ in range(samples)] for c in clients]
        rng = random.Random(7)
        await _alternating(
            subjects,
            "get_workflow_status",
            samples,
            [
                lambda i, c=c, own=own: ok(c, "get_workflow_status", {"workflow_id": rng.choice(own)})
                for c, own in zip(clients, ids, strict=True)
            ],
        )
        await _alternating(
            subjects,
            "create_workflow",
            samples,
            [
                lambda i, c=c: ok(
                    c,
                    "create_workflow",
                    {"name": f"bench-{i}", "description": "bench", "steps": CUSTOM_STEPS},
                )
                for c in clients
            ],
        )
        await _alternating(
            subjects,
            "run_workflow",
            samples,
            [
                lambda i, c=c, runs=runs: ok(c, "run_workflow", {"workflow_id": runs[i]})
                for c, runs in zip(clients, to_run, strict=True)
            ],
        )
        for subject, client in zip(subjects, clients, strict=True):
            listed = await ok(client, "list_workflows", {"limit": 1})
            print(f"{subject.name}: active workflows in the store: {listed.get('active_total')}")
    await _raw_calls(subjects, ids, samples)


async def _raw_calls(subjects: list[Subject], ids: list[list[str]], samples: int) -> None:
    async with contextlib.AsyncExitStack() as stack:
        raws = [await stack.enter_async_context(RawClient.running(s, s.scratch / "pilot")) for s in subjects]
        to_run: list[list[str]] = []
        for raw in raws:  # created untimed, as for the SDK client's runs
            made = [
                await raw.call(
                    "create_workflow_from_template",
                    {"workflow_type": "incident_response", "params": INCIDENT},
                )
                for _ in range(samples)
            ]
            to_run.append([json.loads(line)["result"]["structuredContent"]["workflow_id"] for line in made])
        rng = random.Random(7)
        await _alternating(
            subjects,
            "get_workflow_status (raw)",
            samples,
            [
                lambda i, r=r, own=own: r.call("get_workflow_status", {"workflow_id": rng.choice(own)})
                for r, own in zip(raws, ids, strict=True)
            ],
        )
        await _alternating(
            subjects,
            "create_workflow (raw)",
            samples,
            [
                lambda i, r=r: r.call(
                    "create_workflow", {"name": f"raw-{i}", "description": "bench", "steps": CUSTOM_STEPS}
                )
                for r in raws
            ],
        )
        await _alternating(
            subjects,
            "run_workflow (raw)",
            samples,
            [
                lambda i, r=r, runs=runs: r.call("run_workflow", {"workflow_id": runs[i]})
                for r, runs in zip(raws, to_run, strict=True)
            ],
        )


async def _startups(subjects: list[Subject], starts: int) -> None:
    servers = [(s.command, s.args, s.env(s.scratch / "pilot")) for s in subjects]
    for subject, times in zip(subjects, await startups_in_turns(servers, starts), strict=True):
        subject.times["start-up"] = [t * 1000 for t in times]


def _populate(subjects: list[Subject], size: int) -> None:
    here = str(Path(__file__).resolve().parent)
    for subject in subjects:
        t0 = time.perf_counter()
        subprocess.run(
            [subject.python, "-c", POPULATE, here, str(subject.scratch / "large"), str(size)], check=True
        )
        took = time.perf_counter() - t0
        print(f"{subject.name}: wrote {size:,} workflows into a new store in {took:.1f} s", flush=True)


async def _large_list(subjects: list[Subject]) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                connect_stdio(s.command, s.args, env=s.env(s.scratch / "large"), errlog=devnull())
            )
            for s in subjects
        ]
        for subject, client in zip(subjects, clients, strict=True):
            await ok(client, "get_skill_catalog", {})  # the first call builds the app
            subject.large["rss_before"] = server_rss_mib(subject.command)
        await _alternating(
            subjects, "list", 30, [lambda i, c=c: c.session.call_tool("list_workflows", {}) for c in clients]
        )
        for subject, client in zip(subjects, clients, strict=True):
            result = await client.session.call_tool("list_workflows", {})
            subject.large["kib"] = (
                sum(len(b.text.encode()) for b in result.content if isinstance(b, TextContent)) / 1024
            )
            subject.large["rss_after"] = server_rss_mib(subject.command)
            subject.large["active_total"] = float((result.structured_content or {}).get("active_total") or 0)
    async with contextlib.AsyncExitStack() as stack:
        raws = [await stack.enter_async_context(RawClient.running(s, s.scratch / "large")) for s in subjects]
        await _alternating(
            subjects, "list (raw)", 30, [lambda i, r=r: r.call("list_workflows", {}) for r in raws]
        )


def _report_one(subject: Subject, opts: argparse.Namespace) -> None:
    latency = {k: v for k, v in subject.times.items() if k not in ("start-up", "list", "list (raw)")}
    print(f"{'tool':<28}{'p50 ms':>10}{'p95 ms':>10}")
    for tool, values in latency.items():
        print(f"{tool:<28}{statistics.median(values):>10.2f}{_p(values, 0.95):>10.2f}")
    base = statistics.median(latency["get_workflow_status"])
    for tool in ("create_workflow", "run_workflow"):
        print(f"ratio {tool} / get_workflow_status (p50): {statistics.median(latency[tool]) / base:.2f}")
    startups = subject.times["start-up"]
    print(
        f"start-up to initialize: median {statistics.median(startups):.0f} ms over {opts.starts} starts "
        f"(min {min(startups):.0f}, max {max(startups):.0f})"
    )
    small, big = subject.memory["100"], subject.memory[f"{opts.workflows:,}"]
    print(
        f"server RSS after creating and listing: {small:.1f} MiB at 100, {big:.1f} MiB at "
        f"{opts.workflows:,} ({big / small:.2f}x; target <= 1.2x)"
    )
    if opts.large:
        large = subject.large
        print(
            f"list_workflows() with {opts.large:,} stored ({large['active_total']:,.0f} active): "
            f"p50 {statistics.median(subject.times['list']):.2f} ms (target < 20; raw "
            f"{statistics.median(subject.times['list (raw)']):.2f} ms), "
            f"answer {large['kib']:.1f} KiB (target < 64), "
            f"server RSS {large['rss_before']:.1f} -> {large['rss_after']:.1f} MiB "
            f"(+{large['rss_after'] - large['rss_before']:.1f}; target < 20)"
        )


def _report_two(ours: Subject, other: Subject, opts: argparse.Namespace) -> None:
    print(f"{'p50 ms':<32}{'this checkout':>15}{'--vs':>12}{'this/vs':>10}")
    names = {
        "start-up": "start-up to initialize",
        "list": f"list_workflows(), {opts.large:,} stored",
        "list (raw)": f"list_workflows(), {opts.large:,} (raw)",
    }
    for label in ours.times:
        mine, theirs = statistics.median(ours.times[label]), statistics.median(other.times[label])
        name = names.get(label, label)
        print(f"{name:<32}{mine:>15.2f}{theirs:>12.2f}{mine / theirs:>9.2f}x")
    for size in ours.memory:
        print(
            f"{'RSS MiB at ' + size + ' workflows':<32}{ours.memory[size]:>15.1f}{other.memory[size]:>12.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workflows", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--large", type=int, default=100_000, help="workflows for the large list (0 skips)")
    parser.add_argument("--vs", help="another installation's `vmware-pilot` script, measured alongside")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vmware-pilot-bench-") as tmp:
        command, args = server_command()
        subjects = [Subject("this checkout", command, args, Path(tmp) / "this")]
        if opts.vs:
            subjects.append(Subject("--vs", str(Path(opts.vs).absolute()), ["mcp"], Path(tmp) / "vs"))
        asyncio.run(_latency(subjects, opts.workflows, opts.samples))
        asyncio.run(_startups(subjects, opts.starts))
        if opts.large:
            _populate(subjects, opts.large)
            asyncio.run(_large_list(subjects))
    print(f"vmware-pilot MCP over stdio, {opts.workflows} workflows stored, {opts.samples} calls per tool")
    print("(raw: a JSON-RPC client that validates nothing; the others through the MCP Python SDK's")
    print(" client, which validates each result against the tool's outputSchema)")
    for subject in subjects:
        if len(subjects) > 1:
            print(f"\n{subject.name}: {subject.command}")
        _report_one(subject, opts)
    if len(subjects) > 1:
        print()
        _report_two(subjects[0], subjects[1], opts)


if __name__ == "__main__":
    main()
