"""SQL statements per run and per approve: a 4-step workflow (2 reads, a gate, a write).

    .venv/bin/python bench/round_trips.py [--database-url URL]

Counts every statement the store sends (an SQLAlchemy ``after_cursor_execute`` listener),
leaving out BEGIN, while ``run_workflow`` goes to the gate and ``approve`` finishes the write.
Steps are answered by an in-process dispatcher that succeeds at once, so only Pilot's own
database work is counted. Default: a throw-away SQLite file; ``--database-url`` names an empty
PostgreSQL database instead.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
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


async def measure(url: str) -> dict[str, Counter[str]]:
    with tempfile.TemporaryDirectory() as home:
        app = build_app(Settings(home=Path(home), database_url=url), dispatcher=Succeeds())
        actor = Actor("bench")
        wid = app.service.create_workflow(actor, "ops", "bench", [READ, READ, GATE, WRITE])["workflow_id"]
        counted: Counter[str] = Counter()

        def on_execute(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
            if not statement.startswith("BEGIN"):
                counted[" ".join(statement.split()[:3])] += 1

        event.listen(app.store.engine, "after_cursor_execute", on_execute)
        await app.service.run_workflow(actor, wid)
        run = counted.copy()
        counted.clear()
        await app.service.approve(actor, wid, approver="alice")
        approve = counted.copy()
        app.close()
    return {"run to the gate": run, "approve": approve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="", help="an empty database (default: SQLite file)")
    args = parser.parse_args()
    for name, counts in asyncio.run(measure(args.database_url)).items():
        print(f"{name}: {sum(counts.values())} statements")
        for statement, n in counts.most_common():
            print(f"  {n:3d}  {statement}")


if __name__ == "__main__":
    main()
