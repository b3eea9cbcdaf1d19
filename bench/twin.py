"""Twin benchmark: a capture (`govc object.save`) and a rehearsal of a two-step plan on a twin,
for the lab's inventory and for a simulator of 1,000 VMs.

Run: .venv/bin/python bench/twin.py [--runs N] [--vms 1000]   (needs `bash scripts/lab/setup.sh`)

For each inventory: the median seconds of ``--runs`` captures, and of ``--runs`` rehearsals of
power_off_vm (graceful; aiops refuses it: the VMs run no VMware Tools) then power_on_vm of one VM,
through the real vmware-aiops (a rehearsal: start the simulator on the capture, put the gate's power
state on the VM, save the twin, run the steps, save it again, diff). Prints the medians.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.lab_harness import running_lab
from vmware_pilot.domain.model import Step
from vmware_pilot.twin.binaries import LAB_BIN
from vmware_pilot.twin.captures import Account, Capture, capture
from vmware_pilot.twin.rehearse import Rehearser, TwinSettings


@contextmanager
def generated(vms: int, workdir: Path) -> Iterator[Account]:
    """vcsim-twin with a generated inventory: one standalone host and one cluster, each with vms/2 VMs."""
    per_pool = max(1, vms // 2)
    log = (workdir / "vcsim-big.log").open("wb")
    proc = subprocess.Popen(
        [str(LAB_BIN / "vcsim-twin"), "-l", "127.0.0.1:0", "-vm", str(per_pool)],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"GOVC_URL=https://user:pass@([\d.]+):(\d+)/sdk", proc.stdout.readline())
        if found is None:
            raise SystemExit("vcsim-twin did not start")
        yield Account(found.group(1), int(found.group(2)), "user", "pass", verify_ssl=False)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def steps(vm: str) -> list[Step]:
    return [
        Step(
            1,
            "off",
            "aiops",
            "power_off_vm",
            {"vm_name": vm, "force": False, "confirm": True, "target": "bench"},
        ),
        Step(2, "on", "aiops", "power_on_vm", {"vm_name": vm, "target": "bench"}),
    ]


def _read_on(vm: str) -> dict[str, object]:
    """The gate's read of ``vm`` powered on, as an inspection records it (put on the twin)."""
    return {"targets": [{"kind": "vm", "name": vm, "read": "ok", "power_state": "poweredOn"}]}


def measure(name: str, account: Account, home: Path, runs: int, vm: str) -> None:
    made: list[Capture] = []
    capture_s: list[float] = []
    for _ in range(runs):
        for old in made:
            subprocess.run(["rm", "-rf", old.path], check=True)
        made.clear()
        time.sleep(1.1)  # capture ids are per second
        began = time.perf_counter()
        made.append(capture("bench", home, account))
        capture_s.append(time.perf_counter() - began)
    twin = Rehearser(TwinSettings(mode="required", home=home, timeout=600))
    plan = steps(vm)
    rehearse_s: list[float] = []
    last: dict[str, object] = {}
    for _ in range(runs):
        began = time.perf_counter()
        record = asyncio.run(twin.rehearse(plan, plan, _read_on(vm), lambda s, _: dict(s.params)))
        rehearse_s.append(time.perf_counter() - began)
        last = record or {}
    if last.get("status") != "rehearsed":
        raise SystemExit(f"{name}: the rehearsal did not run: {last.get('reason')}")
    outcomes = [(s["step"], s["outcome"]) for s in last["steps"]]  # type: ignore[attr-defined]
    print(
        f"{name}: {made[0].objects} objects; capture median {statistics.median(capture_s):.2f} s; "
        f"rehearsal median {statistics.median(rehearse_s):.2f} s (runs {runs}; outcomes {outcomes})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--vms", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-twin-") as tmp:
        work = Path(tmp)
        with running_lab(work / "lab") as lab:
            # The rehearsal finds the companions as Pilot does: on PATH.
            os.environ["PATH"] = lab.env["PATH"]
            sim = lab.simulator
            account = Account(sim.host, sim.port, sim.username, sim.password, verify_ssl=False)
            measure("lab", account, work / "home-lab", args.runs, "DC0_H0_VM0")
            with generated(args.vms, work) as big:
                measure(f"{args.vms} VMs", big, work / "home-big", args.runs, "DC0_H0_VM0")


if __name__ == "__main__":
    main()
