"""What the stdio benchmarks (compare.py, server.py) share: a checked tool call, a sink for the
servers' stderr, and start-ups taken in turns."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from vmware_pilot.transports.client import PilotClient, connect_stdio


async def ok(client: PilotClient, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The tool's result; the benchmark stops on a refusal or failure."""
    reply = await client.call(tool, args)
    if reply.is_error:
        raise SystemExit(f"{tool} failed: {str(reply.payload)[:300]}")
    return reply.payload


def devnull() -> TextIO:
    return open(os.devnull, "w")


async def startups_in_turns(
    servers: Sequence[tuple[str, list[str], Mapping[str, str]]], starts: int
) -> list[list[float]]:
    """Seconds from process start to a completed ``initialize`` for each (command, args, env),
    one start of each per round, so a machine that speeds up or slows down weighs on all alike."""
    times: list[list[float]] = [[] for _ in servers]
    for _ in range(starts):
        for (command, args, env), own in zip(servers, times, strict=True):
            started = time.perf_counter()
            async with connect_stdio(command, args, env=env, errlog=devnull()):
                own.append(time.perf_counter() - started)
    return times
