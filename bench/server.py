"""Benchmark the MCP server over real stdio: tool latency with many workflows stored, and start-up.

    .venv/bin/python bench/server.py [--workflows 1000] [--samples 200] [--starts 5]

Starts `vmware-pilot mcp` as a subprocess (throw-away pilot home), stores --workflows workflows
through the tools, then times get_workflow_status, create_workflow and run_workflow calls and the
time from process start to a completed `initialize`. Prints p50/p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

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


async def _latency(home: Path, workflows: int, samples: int) -> dict[str, list[float]]:
    command, args = server_command()
    env = {"VMWARE_PILOT_HOME": str(home), "VMWARE_PILOT_LOG_LEVEL": "WARNING"}
    async with connect_stdio(command, args, env=env) as client:
        ids = []
        t0 = time.perf_counter()
        for _ in range(workflows):
            created = await _ok(
                client,
                "create_workflow_from_template",
                {"workflow_type": "incident_response", "params": INCIDENT},
            )
            ids.append(str(created["workflow_id"]))
        print(f"stored {workflows} workflows through the tools in {time.perf_counter() - t0:.1f} s")
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vmware-pilot-bench-") as tmp:
        home = Path(tmp) / "pilot"
        latency = asyncio.run(_latency(home, opts.workflows, opts.samples))
        startups = asyncio.run(_startups(home, opts.starts))
    print(f"vmware-pilot MCP over stdio, {opts.workflows} workflows stored, {opts.samples} calls per tool")
    print(f"{'tool':<22}{'p50 ms':>10}{'p95 ms':>10}")
    for tool, values in latency.items():
        print(f"{tool:<22}{statistics.median(values):>10.2f}{_p(values, 0.95):>10.2f}")
    base = statistics.median(latency["get_workflow_status"])
    for tool in ("create_workflow", "run_workflow"):
        print(f"ratio {tool} / get_workflow_status (p50): {statistics.median(latency[tool]) / base:.2f}")
    print(
        f"start-up to initialize: median {statistics.median(startups):.0f} ms over {opts.starts} starts "
        f"(min {min(startups):.0f}, max {max(startups):.0f})"
    )


if __name__ == "__main__":
    main()
