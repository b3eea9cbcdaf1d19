"""Dispatch benchmark on the lab: pooled vs per-call sessions, a parallel group vs a sequence.

Run: .venv/bin/python bench/dispatch.py [--runs N]   (needs `bash scripts/lab/setup.sh` first)

1. Wall time of a 10-step read workflow (vmware-monitor on govmomi's simulator) with pooled
   sessions (warm: the pool is started once) versus a fresh server per call.
   Target: pooled at least 5x faster.
2. A four-read parallel group (get_vm_info of four VMs) versus the same four reads in sequence
   (pooled, warm), with each vCenter property read made to take ``--latency-ms`` (default 100),
   as a vCenter across a network does. Target: the group takes at most 0.4x the sequence.
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

from tests.lab.harness import TARGET, Lab, running_lab
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.stdio import DispatchOptions, StdioDispatcher
from vmware_pilot.domain.actor import Actor

ACTOR = Actor("bench")
READS = ["list_virtual_machines", "list_esxi_hosts", "get_alarms", "get_vm_info"]
VMS = ["DC0_H0_VM0", "DC0_H0_VM1", "DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1"]


def read(tool: str, group: str = "", vm: str = "DC0_H0_VM0") -> dict[str, Any]:
    params: dict[str, Any] = {"target": TARGET}
    if tool == "get_vm_info":
        params["vm_name"] = vm
    return {"action": tool, "skill": "monitor", "tool": tool, "params": params, "group_id": group}


async def timed_run(app: Any, steps: list[dict[str, Any]]) -> float:
    wid = app.service.create_workflow(ACTOR, "bench", "bench", steps)["workflow_id"]
    started = time.perf_counter()
    out = await app.service.run_workflow(ACTOR, wid)
    elapsed = time.perf_counter() - started
    if out.get("outcome") != "completed":
        raise SystemExit(f"bench workflow did not complete: {out.get('error') or out.get('outcome')}")
    return elapsed


async def measure(lab: Lab, home: Path, per_call: bool, steps: list[dict[str, Any]], runs: int) -> float:
    options = DispatchOptions(
        call_timeout=120, start_timeout=60, per_call=per_call, overrides={"monitor": lab.command("monitor")}
    )
    # A companion's runaway guard counts identical calls per server process (25 per 120 s by
    # default); a pooled server sees every run of the bench, so lift the limit for it.
    dispatcher = StdioDispatcher(options, env={**lab.env, "VMWARE_RUNAWAY_MAX": "1000000"})
    app = build_app(Settings(home=home), dispatcher=dispatcher)
    try:
        if not per_call:
            await timed_run(app, steps)  # warm the pool: servers started, logged in
        return statistics.median([await timed_run(app, steps) for _ in range(runs)])
    finally:
        await app.aclose()


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


async def main(runs: int, latency_ms: int) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        companion_log(Path(tmp) / "companions.log"),
        running_lab(Path(tmp) / "lab") as lab,
    ):
        ten = [read(READS[i % len(READS)]) for i in range(10)]
        pooled = await measure(lab, Path(tmp) / "p", False, ten, runs)
        per_call = await measure(lab, Path(tmp) / "c", True, ten, max(1, runs // 2))
        if latency_ms:
            # A vCenter across a network answers in tens to hundreds of ms, not the simulator's
            # in-process microseconds: make each property read take that long.
            for method in ("RetrieveProperties", "RetrievePropertiesEx"):
                lab.set_delay(method, latency_ms)
        # Four reads of the same kind (one VM each), so the group's time is not one long read's.
        group = await measure(lab, Path(tmp) / "g", False, [read("get_vm_info", "g", vm) for vm in VMS], runs)
        sequence = await measure(
            lab, Path(tmp) / "s", False, [read("get_vm_info", vm=vm) for vm in VMS], runs
        )
    print(f"10-step read workflow, median of {runs} runs")
    print(f"  pooled sessions   {pooled * 1000:9.1f} ms")
    print(f"  per-call servers  {per_call * 1000:9.1f} ms")
    print(f"  per-call / pooled {per_call / pooled:9.1f}x   (target >= 5x)")
    print(f"four get_vm_info reads, pooled, vCenter property reads taking {latency_ms} ms")
    print(f"  parallel group    {group * 1000:9.1f} ms")
    print(f"  in sequence       {sequence * 1000:9.1f} ms")
    print(f"  group / sequence  {group / sequence:9.2f}x   (target <= 0.4x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--latency-ms", type=int, default=100, help="simulated vCenter latency per property read (0: none)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.latency_ms))
