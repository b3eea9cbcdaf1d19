"""What a subscriber hears: ``Updates`` collects ``notifications/resources/updated`` (2025-11-25's
resources/subscribe) as a client's message handler."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
from mcp_types import ResourceUpdatedNotification


class Updates:
    """Collects resources/updated notifications; ``wait(uri)`` waits for the next one for ``uri``."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self._arrived.set()

    async def wait(self, uri: str, after: int = 0, within: float = 30) -> None:
        """Wait for a notice for ``uri`` among those after the first ``after``; ``within`` seconds
        is a guard against hanging, never a timing claim."""
        with anyio.fail_after(within):
            while uri not in self.uris[after:]:
                self._arrived.clear()
                await self._arrived.wait()
