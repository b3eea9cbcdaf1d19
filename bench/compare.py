"""This project side by side with vmware-pilot 2.4.0 and a bare MCP server (the SDK's MCPServer), over real stdio.

    .venv/bin/python bench/compare.py [--large 10000] [--samples 100] [--starts 7] [--baseline-venv DIR]

Three servers, each started as an MCP client starts it (a subprocess over stdio, its own throw-away
HOME): this checkout's `vmware-pilot mcp`; vmware-pilot 2.4.0 from PyPI, installed into a
throw-away venv only to be measured (or the one --baseline-venv names, kept for the next run);
and "the floor", a bare MCPServer (the SDK's own, FastMCP in 1.x) with one trivial tool, which is what any server on this SDK
pays. Prints medians (ms) side by side and the ratios: start-up to a completed `initialize`
(median of --starts), get_workflow_status, create_workflow, the floor's trivial call, and
list_workflows with 100 and --large workflows stored (median time and answer size).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from mcp_types import TextContent

from common import devnull, ok, startups_in_turns
from vmware_pilot.transports.client import PilotClient, connect_stdio

BASELINE = "vmware-pilot==2.4.0"
INCIDENT = {"alert_entity": "web-01", "alert_name": "High CPU", "target": "lab"}
STEPS = [
    {"action": "list", "skill": "monitor", "tool": "list_virtual_machines", "params": {}},
    {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}},
    {"action": "power_on", "skill": "aiops", "tool": "power_on_vm", "params": {"vm_name": "web-01"}},
]
FLOOR = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("floor")


@server.tool()
def ping(text: str = "") -> str:
    \"\"\"Answer at once.\"\"\"
    return text


server.run()
"""
# Both Pilots refuse the 26th identical call within two minutes by default (a runaway guard).
QUIET = {
    "VMWARE_RUNAWAY_MAX": "100000000",
    "OPS_RUNAWAY_MAX": "100000000",
    "VMWARE_PILOT_RUNAWAY_MAX": "0",
    "VMWARE_PILOT_LOG_LEVEL": "WARNING",
}


@dataclass
class Subject:
    name: str
    command: str
    args: list[str]
    figures: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def _timed(samples: int, call: Callable[[int], Awaitable[object]]) -> list[float]:
    out = []
    for i in range(samples):
        start = time.perf_counter()
        await call(i)
        out.append(time.perf_counter() - start)
    return out


async def _text_size(client: PilotClient, tool: str) -> int:
    result = await client.session.call_tool(tool, {})
    return sum(len(b.text.encode()) for b in result.content if isinstance(b, TextContent))


def _env(home: Path) -> dict[str, str]:
    # 2.4.0 keeps its database under HOME; this project under VMWARE_PILOT_HOME (default ~/.vmware).
    return {"HOME": str(home), "OPS_HOME": str(home / ".vmware"), **QUIET}


async def _startups(subjects: list[Subject], homes: dict[str, Path], starts: int) -> None:
    servers = [(s.command, s.args, _env(homes[s.name])) for s in subjects]
    for subject, times in zip(subjects, await startups_in_turns(servers, starts), strict=True):
        subject.figures["start-up to initialize"] = _ms(times)


async def _floor_calls(subject: Subject, home: Path, samples: int) -> None:
    async with connect_stdio(subject.command, subject.args, env=_env(home), errlog=devnull()) as client:
        await client.session.call_tool("ping", {"text": "warm"})
        times = await _timed(samples, lambda i: client.session.call_tool("ping", {"text": str(i)}))
    subject.figures["trivial call (floor)"] = _ms(times)


async def _create(client: PilotClient, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        created = await ok(
            client,
            "create_workflow_from_template",
            {"workflow_type": "incident_response", "params": INCIDENT},
        )
        ids.append(str(created["workflow_id"]))
    return ids


async def _list(subject: Subject, client: PilotClient, label: str) -> None:
    listing = await _timed(9, lambda i: client.session.call_tool("list_workflows", {}))
    subject.figures[f"list_workflows, {label} stored"] = _ms(listing)
    subject.sizes[f"list_workflows, {label} stored"] = await _text_size(client, "list_workflows")


async def _pilot(subject: Subject, home: Path, samples: int, large: int) -> None:
    async with connect_stdio(subject.command, subject.args, env=_env(home), errlog=devnull()) as client:
        ids = await _create(client, 100)
        await _list(subject, client, "100")
        rng = random.Random(7)
        await ok(client, "get_workflow_status", {"workflow_id": ids[0]})
        status = await _timed(
            samples, lambda i: ok(client, "get_workflow_status", {"workflow_id": rng.choice(ids)})
        )
        create = await _timed(
            samples,
            lambda i: ok(
                client, "create_workflow", {"name": f"bench-{i}", "description": "bench", "steps": STEPS}
            ),
        )
        subject.figures["get_workflow_status"] = _ms(status)
        subject.figures["create_workflow"] = _ms(create)
        started = time.perf_counter()
        await _create(client, max(0, large - 100 - samples))
        print(f"  {subject.name}: stored {large:,} in {time.perf_counter() - started:.0f} s", flush=True)
        await _list(subject, client, f"{large:,}")


def _baseline_venv(given: str | None, scratch: Path) -> Path:
    venv = Path(given) if given else scratch / "venv-2.4.0"
    if not (venv / "bin" / "vmware-pilot-mcp").exists():
        print(f"installing {BASELINE} into {venv} (only to measure it) …", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", BASELINE], check=True
        )
    return venv


def _row(label: str, values: list[str]) -> str:
    return f"{label:<34}" + "".join(f"{v:>16}" for v in values)


def _report(ours: Subject, old: Subject, floor: Subject) -> None:
    names = ["this project", "2.4.0", "bare FastMCP"]
    print()
    print(_row("median ms", names) + f"{'this/2.4.0':>12}{'this/floor':>12}")
    floor_call = floor.figures["trivial call (floor)"]
    labels = [*ours.figures, "trivial call (floor)"]
    for label in labels:
        values = [s.figures.get(label) for s in (ours, old, floor)]
        if label in ("get_workflow_status", "create_workflow"):
            values[2] = None
        cells = ["—" if v is None else f"{v:.2f}" for v in values]
        ratios = ""
        mine = values[0]
        if mine is not None and values[1]:
            ratios += f"{mine / values[1]:>11.2f}x"
        else:
            ratios += f"{'':>12}"
        base = values[2] if label.startswith("start-up") else floor_call
        if mine is not None and label != "trivial call (floor)" and not label.startswith("list"):
            ratios += f"{mine / base:>11.2f}x"
        print(_row(label, cells) + ratios)
    for label in ours.sizes:
        cells = [f"{s.sizes[label] / 1024:.1f} KiB" if label in s.sizes else "—" for s in (ours, old, floor)]
        print(_row(f"{label} (answer)", cells))


async def _run(opts: argparse.Namespace, scratch: Path) -> None:
    venv = _baseline_venv(opts.baseline_venv, scratch)
    floor_script = scratch / "floor.py"
    floor_script.write_text(FLOOR)
    ours = Subject("this project", opts.pilot, ["mcp"])
    old = Subject("2.4.0", str(venv / "bin" / "vmware-pilot-mcp"), [])
    floor = Subject("bare FastMCP", sys.executable, [str(floor_script)])
    subjects = [ours, old, floor]
    homes = {s.name: scratch / s.name.replace(" ", "-") for s in subjects}
    for home in homes.values():
        (home / ".vmware").mkdir(parents=True)
    print("measuring start-ups, in turns …", flush=True)
    await _startups(subjects, homes, opts.starts)
    for subject in subjects:
        print(f"measuring {subject.name} …", flush=True)
        if subject is floor:
            await _floor_calls(subject, homes[subject.name], opts.samples)
        else:
            await _pilot(subject, homes[subject.name], opts.samples, opts.large)
    print(
        f"\n{opts.samples} calls per tool; list_workflows without arguments, median of 9; "
        f"start-up median of {opts.starts}"
    )
    _report(ours, old, floor)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--large", type=int, default=10_000, help="workflows stored for the second list")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--starts", type=int, default=7)
    parser.add_argument(
        "--pilot",
        default=str(Path(sys.executable).with_name("vmware-pilot")),
        help="this project's `vmware-pilot` script (default: the one beside this Python)",
    )
    parser.add_argument("--baseline-venv", help="venv holding 2.4.0 (created there if missing, and kept)")
    opts = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="vmware-pilot-compare-"))
    try:
        asyncio.run(_run(opts, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
