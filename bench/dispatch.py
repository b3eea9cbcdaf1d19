"""Dispatch benchmark on the lab: pooled vs per-call sessions, a parallel group vs a sequence.

Run: .venv/bin/python bench/dispatch.py [--runs N]   (needs `bash scripts/lab/setup.sh` first)

1. Wall time of a 10-step read workflow (vmware-monitor on govmomi's simulator) with pooled
   sessions (warm: the pool is started once) versus a fresh server per call.
   Target: pooled at least 5x faster.
2. A four-read parallel group (get_vm_info of four VMs) versus the same four reads in sequence,
   each vCenter property read made to take each of ``--latency-ms`` (default 100 and 0; a
   vCenter across a network answers in tens to hundreds of ms):
   cold - the first run on a new dispatcher (no skill server started yet), median over
   ``--cold`` new dispatchers; target: the group takes at most 1.0x the sequence;
   warm - later runs once the pool has opened the sessions the run asked for; target: at most
   0.4x the sequence.
Prints the median of each and the ratios.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from tests.support.lab_harness import TARGET, Lab, running_lab
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.stdio import DispatchOptions, StdioDispatcher
from vmware_pilot.domain.actor import Actor
from vmware_pilot.engine.requests import CreateRequest, RunRequest

ACTOR = Actor("bench")
READS = ["list_virtual_machines", "list_esxi_hosts", "get_alarms", "get_vm_info"]
VMS = ["DC0_H0_VM0", "DC0_H0_VM1", "DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1"]


def read(tool: str, group: str = "", vm: str = "DC0_H0_VM0") -> dict[str, Any]:
    params: dict[str, Any] = {"target": TARGET}
    if tool == "get_vm_info":
        params["vm_name"] = vm
    return {"action": tool, "skill": "monitor", "tool": tool, "params": params, "group_id": group}


async def timed_run(app: Any, steps: list[dict[str, Any]]) -> float:
    wid = app.service.create_workflow(CreateRequest(ACTOR, "bench", "bench", steps)).workflow_id
    started = time.perf_counter()
    out = await app.service.run_workflow(RunRequest(ACTOR, wid))
    elapsed = time.perf_counter() - started
    if not out.is_completed:
        raise SystemExit(f"bench workflow did not complete: {out.error or out.outcome}")
    return elapsed


def _dispatcher(lab: Lab, per_call: bool) -> StdioDispatcher:
    options = DispatchOptions(
        call_timeout=120, start_timeout=60, per_call=per_call, overrides={"monitor": lab.command("monitor")}
    )
    # A companion's runaway guard counts identical calls per server process (25 per 120 s by
    # default); a pooled server sees every run of the bench, so lift the limit for it.
    return StdioDispatcher(options, env={**lab.env, "VMWARE_RUNAWAY_MAX": "1000000"})


async def measure(lab: Lab, home: Path, per_call: bool, steps: list[dict[str, Any]], runs: int) -> float:
    dispatcher = _dispatcher(lab, per_call)
    app = build_app(Settings(home=home), dispatcher=dispatcher)
    try:
        if not per_call:
            await timed_run(app, steps)  # warm the pool: servers started, logged in
        return statistics.median([await timed_run(app, steps) for _ in range(runs)])
    finally:
        await app.aclose()


async def _settled(dispatcher: StdioDispatcher, want: int) -> None:
    """Wait (bounded) until the pool holds the sessions the run asked for."""
    for _ in range(600):
        if dispatcher.open_sessions().get("monitor", 0) >= want:
            return
        await asyncio.sleep(0.1)


async def cold_and_warm(
    lab: Lab, home: Path, steps: list[dict[str, Any]], cold: int, runs: int
) -> tuple[float, float]:
    """Median first run on a new dispatcher (over ``cold`` of them), and median warm run."""
    firsts: list[float] = []
    warm: list[float] = []
    width = sum(1 for s in steps if s.get("group_id")) or 1
    for n in range(cold):
        dispatcher = _dispatcher(lab, False)
        app = build_app(Settings(home=home / str(n)), dispatcher=dispatcher)
        try:
            firsts.append(await timed_run(app, steps))
            if n == 0:
                await _settled(dispatcher, width)
                warm = [await timed_run(app, steps) for _ in range(runs)]
        finally:
            await app.aclose()
    return statistics.median(firsts), statistics.median(warm)


@contextlib.contextmanager
def companion_log(path: Path) -> Iterator[None]:
    """Send this process's stderr, which the companion servers inherit, to ``path`` meanwhile
    (they log every request); on failure show its tail."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("w") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    except BaseException:
        os.dup2(saved, 2)
        sys.stderr.write("--- companion and Pilot log (tail) ---\n" + path.read_text()[-3000:] + "\n")
        raise
    finally:
        os.dup2(saved, 2)
        os.close(saved)


async def main(runs: int, cold: int, latencies: list[int]) -> None:
    groups: dict[int, tuple[tuple[float, float], tuple[float, float]]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        companion_log(Path(tmp) / "companions.log"),
        running_lab(Path(tmp) / "lab") as lab,
    ):
        ten = [read(READS[i % len(READS)]) for i in range(10)]
        pooled = await measure(lab, Path(tmp) / "p", False, ten, runs)
        per_call = await measure(lab, Path(tmp) / "c", True, ten, max(1, runs // 2))
        # Four reads of the same kind (one VM each), so the group's time is not one long read's.
        group_steps = [read("get_vm_info", "g", vm) for vm in VMS]
        sequence_steps = [read("get_vm_info", vm=vm) for vm in VMS]
        for latency in latencies:
            # Make each property read take that long (0 clears the delay).
            for method in ("RetrievePropertiesEx", "RetrieveProperties"):
                lab.set_delay(method, latency)
            here = Path(tmp) / f"l{latency}"
            group = await cold_and_warm(lab, here / "g", group_steps, cold, runs)
            sequence = await cold_and_warm(lab, here / "s", sequence_steps, cold, runs)
            groups[latency] = (group, sequence)
    print(f"10-step read workflow, median of {runs} runs")
    print(f"  pooled sessions   {pooled * 1000:9.1f} ms")
    print(f"  per-call servers  {per_call * 1000:9.1f} ms")
    print(f"  per-call / pooled {per_call / pooled:9.1f}x   (target >= 5x)")
    for latency, ((g_cold, g_warm), (s_cold, s_warm)) in groups.items():
        print(f"four get_vm_info reads, vCenter property reads taking {latency} ms")
        print(f"  {'':<10}{'group ms':>12}{'sequence ms':>14}{'group/seq':>12}")
        print(
            f"  {'cold':<10}{g_cold * 1000:>12.1f}{s_cold * 1000:>14.1f}{g_cold / s_cold:>11.2f}x   (target <= 1.0x)"
        )
        print(
            f"  {'warm':<10}{g_warm * 1000:>12.1f}{s_warm * 1000:>14.1f}{g_warm / s_warm:>11.2f}x   (target <= 0.4x)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="warm runs (median)")
    parser.add_argument("--cold", type=int, default=3, help="new dispatchers for the cold runs (median)")
    parser.add_argument(
        "--latency-ms",
        type=int,
        nargs="+",
        default=[100, 0],
        help="simulated vCenter latency per property read (0: none); each is measured",
    )
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.cold, args.latency_ms))
