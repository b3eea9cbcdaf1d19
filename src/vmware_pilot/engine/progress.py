"""Progress reporting for long runs: forwarded as MCP progress notifications when asked for."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from vmware_pilot.domain.model import Workflow

__all__ = ["ProgressFn", "describe", "report"]

_log = logging.getLogger(__name__)

# progress(done, total, message)
ProgressFn = Callable[[float, float | None, str], Awaitable[None]]


async def report(progress: ProgressFn | None, done: float, total: float | None, message: str) -> None:
    """Send one progress update; a client that went away never stops the run."""
    if progress is None:
        return
    try:
        await progress(done, total, message)
    except Exception:  # the run goes on when the client disconnects
        _log.debug("progress notification not delivered: %s", message, exc_info=True)


def describe(wf: Workflow, batch: list[int], finished: bool = False) -> str:
    """What a progress update says of a step or a parallel group: running, or how it ended."""
    names = ", ".join(f"{wf.steps[i].skill}.{wf.steps[i].tool}" for i in batch)
    label = f"steps {batch[0]}-{batch[-1]}" if len(batch) > 1 else f"step {batch[0]}"
    if finished:
        statuses = ", ".join(wf.steps[i].status.value for i in batch)
        return f"{label}: {names} → {statuses}"
    return f"{label}: running {names}"
