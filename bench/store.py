"""Store latency at 100, 10,000 and 100,000 stored workflows: save, load, list_active(limit=50).

    .venv/bin/python bench/store.py [--samples N]

Builds a throw-away SQLite store (never the real pilot home), bulk-inserts a realistic population
(two-step workflows with two audit events each, about 5/8 of them active), and at each size prints
the median latency of each operation and, at the end, the ratio of the 100,000 figure to the 100
figure. Target: load and list_active within 2x between 100 and 100,000.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from vmware_pilot.config import Settings
from vmware_pilot.domain.clock import iso
from vmware_pilot.domain.enums import TERMINAL_STATES, WorkflowState
from vmware_pilot.domain.model import Workflow
from vmware_pilot.store import codec
from vmware_pilot.store.audit import GENESIS, event_hash
from vmware_pilot.store.sql import SqlStore, open_store
from vmware_pilot.store.tables import audit_events, workflow_counts, workflows
from vmware_pilot.templates.steps import gate_step, make_step

SIZES = (100, 10_000, 100_000)
_STATES = list(WorkflowState)
_START = datetime(2026, 1, 1, tzinfo=UTC)


def _template() -> dict[str, Any]:
    steps = [
        make_step(0, "check", "monitor", "get_vm_info", {"vm_name": "web-01", "target": "vc-lab"}),
        gate_step(1, "Power off web-01?"),
        make_step(
            2,
            "power off",
            "aiops",
            "power_off_vm",
            {"vm_name": "web-01", "target": "vc-lab"},
            rollback_tool="power_on_vm",
            rollback_params={"vm_name": "web-01"},
        ),
    ]
    wf = Workflow.new("maintenance_window", WorkflowState.PENDING, steps, {"target": "vc-lab"}, "alice")
    doc: dict[str, Any] = json.loads(codec.encode(wf))
    return doc


def populate(store: SqlStore, start: int, stop: int) -> None:
    """Insert workflows number start..stop-1 directly (one transaction, batched executemany), and
    move the maintained active count as the store itself would."""
    doc = _template()
    active = 0
    batch_wf: list[dict[str, Any]] = []
    batch_ev: list[dict[str, Any]] = []
    with store.database.engine.begin() as conn:
        for n in range(start, stop):
            wid = f"wf-bench-{n:08d}"
            state = _STATES[n % len(_STATES)]
            created = iso(_START + timedelta(seconds=n))
            head = GENESIS
            for action in ("created", "run_started"):
                digest = event_hash(head, wid, created, "alice", action, "")
                batch_ev.append(
                    {
                        "workflow_id": wid,
                        "ts": created,
                        "actor": "alice",
                        "action": action,
                        "detail": "",
                        "prev_hash": head,
                        "hash": digest,
                    }
                )
                head = digest
            doc.update(id=wid, state=state.value, created_at=created, updated_at=created)
            active += state not in TERMINAL_STATES
            batch_wf.append(
                {
                    "id": wid,
                    "type": doc["workflow_type"],
                    "state": state.value,
                    "is_active": state not in TERMINAL_STATES,
                    "version": 1,
                    "created_at": created,
                    "updated_at": created,
                    "created_by": "alice",
                    "document": json.dumps(doc, separators=(",", ":")),
                    "audit_head": head,
                    "audit_count": 2,
                }
            )
            if len(batch_wf) >= 5000:
                conn.execute(workflows.insert(), batch_wf)
                conn.execute(audit_events.insert(), batch_ev)
                batch_wf, batch_ev = [], []
        if batch_wf:
            conn.execute(workflows.insert(), batch_wf)
            conn.execute(audit_events.insert(), batch_ev)
        conn.execute(
            workflow_counts.update()
            .where(workflow_counts.c.name == "active")
            .values(value=workflow_counts.c.value + active)
        )


def median_ms(samples: int, prepare: Callable[[], Callable[[], object]]) -> float:
    """Median wall time of ``samples`` operations; ``prepare`` (untimed) returns the next one."""
    times = []
    for i in range(samples + 5):
        op = prepare()
        t0 = time.perf_counter()
        op()
        if i >= 5:  # the first few warm the caches
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def measure(store: SqlStore, size: int, samples: int, rng: random.Random) -> dict[str, float]:
    def some_id() -> str:
        return f"wf-bench-{rng.randrange(size):08d}"

    def next_save() -> Callable[[], object]:
        wf = store.workflows.load(some_id())
        wf.params["touched"] = wf.version
        wf.log("bench", "save")
        return partial(store.workflows.save, wf)

    return {
        "save": median_ms(samples, next_save),
        "load": median_ms(samples, lambda: partial(store.workflows.load, some_id())),
        "list_active(50)": median_ms(samples, lambda: partial(store.workflows.list_active, limit=50)),
        "count_active": median_ms(samples, lambda: store.workflows.count_active),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300, help="operations timed per figure")
    args = parser.parse_args()
    rng = random.Random(7)
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="pilot-bench-") as tmp:
        store = open_store(Settings(home=Path(tmp) / "home"))
        have = 0
        for size in SIZES:
            t0 = time.perf_counter()
            populate(store, have, size)
            have = size
            print(f"populated {size:>7,} workflows in {time.perf_counter() - t0:5.1f} s", flush=True)
            results[size] = measure(store, size, args.samples, rng)
        store.close()

    ops = list(results[SIZES[0]])
    print(f"\nmedian latency in ms ({args.samples} samples each)")
    print(f"{'workflows':>10}" + "".join(f"{op:>17}" for op in ops))
    for size, row in results.items():
        print(f"{size:>10,}" + "".join(f"{row[op]:>17.3f}" for op in ops))
    ratios = {op: results[SIZES[-1]][op] / results[SIZES[0]][op] for op in ops}
    print(f"{'100k/100':>10}" + "".join(f"{ratios[op]:>16.2f}x" for op in ops))
    for op in ("load", "list_active(50)"):
        verdict = "within" if ratios[op] <= 2 else "NOT within"
        print(f"target: {op} {verdict} 2x between 100 and 100,000 ({ratios[op]:.2f}x)")


if __name__ == "__main__":
    main()
