"""Progress reporting for long runs: forwarded as MCP progress notifications when asked for."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

__all__ = ["ProgressFn", "report"]

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
