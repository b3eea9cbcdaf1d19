"""The runaway breaker: the same write call, over and over, is refused; reads never are.

An agent stuck in a loop repeats one call with the same arguments. A call to a tool whose effect
is not ``read`` (``vmware_pilot.tooltable``) is counted under its caller, its tool and a digest
of its arguments; once ``limit`` such calls were accepted within ``window`` seconds, the next one
is refused (``RunawayRefused``, with when it may go again) until the oldest leaves the window.
Refused calls are not counted. Reads (``get_workflow_status`` polled in a loop, say) are never
counted, so polling is never punished.

Only digests are kept (never the arguments, which may carry secrets), in memory, per process.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final

from vmware_pilot.errors import RunawayRefused
from vmware_pilot.tooltable import spec_of

__all__ = ["RunawayBreaker"]

_MAX_KEYS: Final = 10_000
"""Most distinct (caller, tool, arguments) kept; past it, the ones idle longest are forgotten."""


def _digest(arguments: Mapping[str, Any]) -> str:
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class RunawayBreaker:
    """Counts identical write calls per caller; ``limit`` 0 counts nothing."""

    def __init__(self, limit: int, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        self._seen: dict[tuple[str, str, str], deque[float]] = {}

    def check(self, caller: str, tool: str, arguments: Mapping[str, Any]) -> None:
        """Count this call, or raise ``RunawayRefused`` when it is one too many."""
        spec = spec_of(tool)
        if self._limit <= 0 or spec is None or spec.effect == "read":
            return
        now = self._clock()
        key = (caller, tool, _digest(arguments))
        times = self._seen.pop(key, None) or deque()
        while times and times[0] <= now - self._window:
            times.popleft()
        self._seen[key] = times  # re-inserted: the dict stays ordered by last use
        if len(times) >= self._limit:
            wait = max(1, math.ceil(times[0] + self._window - now))
            raise RunawayRefused(
                f"{tool} was called {len(times)} times with these same arguments in the last "
                f"{self._window:g} seconds; this call is refused as a runaway loop",
                hint=f"Do not repeat the call: check the result you already have (get_workflow_status, "
                f"with wait_seconds to wait for a change), change the arguments, or retry in {wait} s.",
                tool=tool,
                limit=self._limit,
                window_seconds=self._window,
                retry_after_seconds=wait,
            )
        times.append(now)
        if len(self._seen) > _MAX_KEYS:
            del self._seen[next(iter(self._seen))]
