"""SQL statements and transactions per run and per approve: a 4-step workflow (2 reads, a gate,
a write), and their median times.

    .venv/bin/python bench/round_trips.py [--database-url URL | --postgresql] [--repeat N]

Counts every statement the store sends (an SQLAlchemy ``after_cursor_execute`` listener),
leaving out BEGIN, and every transaction begun (a statement sent in autocommit is none), while ``run_workflow`` goes to the gate and
``approve`` finishes the write. Steps are answered by an in-process dispatcher that succeeds at
once, so only Pilot's own database work is counted and timed. ``--repeat N`` runs N workflows
and prints the median time of each phase. Default: a throw-away SQLite file; ``--database-url``
names an empty PostgreSQL database instead, ``--postgresql`` starts a private one
(tests/support/pg_server.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import event

from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import BeforeSend, OutcomeKind, StepOutcome
from vmware_pilot.domain.actor import Actor
from vmware_pilot.domain.model import Step
from vmware_pilot.engine.requests import CreateRequest, RunRequest

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}
READ = {"action": "alarms", "skill": "monitor", "tool": "get_alarms", "params": {}}
WRITE = {
    "action": "off",
    "skill": "aiops",
    "tool": "power_off_vm",
    "params": {"vm_name": "a", "confirm": True},
}


class Succeeds:
    """A dispatcher whose every call succeeds at once."""

    async def preflight(self, steps: Sequence[Step]) -> list[str]:
        return []

    async def call(
        self, skill: str, tool: str, params: dict[str, Any], before_send: BeforeSend | None = None
    ) -> StepOutcome:
        if before_send is not None:  # as a real dispatcher does once its session is ready
            await before_send()
        return StepOutcome(OutcomeKind.SUCCEEDED, {"ok": True})

    async def aclose(self) -> None:
        return None


Counts = dict[str, Counter[str]]


async def measure(url: str, repeat: int = 1) -> tuple[Counts, dict[str, list[float]]]:
    """The statements and transactions of the first workflow's run and approve, and the time of
    each phase of every workflow (seconds)."""
    with tempfile.TemporaryDirectory() as home:
        app = build_app(Settings(home=Path(home), database_url=url), dispatcher=Succeeds())
        actor = Actor("bench")
        counted: Counter[str] = Counter()

        def on_execute(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
            if not statement.startswith("BEGIN"):
                counted[" ".join(statement.split()[:3])] += 1

        def on_begin(conn: Any) -> None:  # a statement sent in autocommit is not counted
            if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
                counted["(transactions)"] += 1

        times: dict[str, list[float]] = {"run to the gate": [], "approve": []}
        counts: Counts = {}
        for n in range(repeat):
            wid = app.service.create_workflow(
                CreateRequest(actor, "ops", "bench", [READ, READ, GATE, WRITE])
            ).workflow_id
            if n == 0:
                event.listen(app.store.database.engine, "after_cursor_execute", on_execute)
                event.listen(app.store.database.engine, "begin", on_begin)
            started = time.perf_counter()
            await app.service.run_workflow(RunRequest(actor, wid))
            times["run to the gate"].append(time.perf_counter() - started)
            if n == 0:
                counts["run to the gate"] = counted.copy()
                counted.clear()
            started = time.perf_counter()
            await app.service.approve(actor, wid, approver="alice")
            times["approve"].append(time.perf_counter() - started)
            if n == 0:
                counts["approve"] = counted.copy()
                event.remove(app.store.database.engine, "after_cursor_execute", on_execute)
                event.remove(app.store.database.engine, "begin", on_begin)
        app.close()
    return counts, times


def _report(url: str, repeat: int) -> None:
    counts, times = asyncio.run(measure(url, repeat))
    for name, found in counts.items():
        transactions = found.pop("(transactions)", 0)
        print(f"{name}: {sum(found.values())} statements in {transactions} transactions")
        for statement, n in found.most_common():
            print(f"  {n:3d}  {statement}")
    if repeat > 1:
        for name, values in times.items():
            print(f"{name}: median {statistics.median(values) * 1000:.2f} ms over {len(values)} workflows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="", help="an empty database (default: SQLite file)")
    parser.add_argument("--postgresql", action="store_true", help="start a private PostgreSQL 15 for it")
    parser.add_argument("--repeat", type=int, default=1, help="workflows to time (medians printed)")
    args = parser.parse_args()
    if not args.postgresql:
        _report(args.database_url, args.repeat)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.pg_server import PgServer

    server = PgServer()
    server.start()
    try:
        _report(server.url(server.new_database()), args.repeat)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
