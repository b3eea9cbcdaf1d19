"""What a client hears while its run_workflow or approve call runs: progress and log notifications.

Progress notifications go out when the request carried a ``progressToken`` (2025-11-25) or
asked for progress (2026-07-28). Log notifications
(``notifications/message``, logger ``vmware_pilot.run``, level ``info``) go out when the client
set a level with ``logging/setLevel`` that lets ``info`` through (2025-11-25), or when the request's
``_meta`` asked for a level that does (2026-07-28); otherwise none. Once the request has ended, answered or cancelled by the client, ``close()`` silences
both: the run may go on detached, but nothing more is said about a request the client gave up.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from vmware_pilot.server.wire import Connection, current_connection

__all__ = ["LEVELS", "RunReport", "register_logging"]

_log = logging.getLogger("vmware_pilot.server")

LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
)  # fmt: skip


def _lets_through(threshold: types.LoggingLevel | None, level: types.LoggingLevel) -> bool:
    return threshold is not None and LEVELS.index(level) >= LEVELS.index(threshold)


class RunReport:
    """The progress callback for one request (``engine.progress.ProgressFn``)."""

    def __init__(self, ctx: Any, connection: Connection, workflow_id: str) -> None:
        request = ctx.request_context
        meta = request.meta
        self._ctx = ctx
        self._workflow_id = workflow_id
        self._open = True
        # 2025-11-25: the level the connection set with logging/setLevel; 2026-07-28: the level
        # this request asked for in its _meta (there is no logging/setLevel any more).
        self._level: types.LoggingLevel | None = connection.log_level
        if request.protocol_version in MODERN_PROTOCOL_VERSIONS:
            asked = (meta or {}).get(LOG_LEVEL_META_KEY)
            self._level = asked if asked in LEVELS else None
            # A 2026-07-28 client in this process asks for progress without a token (the SDK calls
            # its callback directly); reporting is a no-op for a request that did not ask.
            self._progress = True
        else:
            self._progress = (meta or {}).get("progress_token") is not None

    @property
    def wanted(self) -> bool:
        """Whether the client asked for anything (a progress token, or a log level)."""
        return self._progress or self._level is not None

    def close(self) -> None:
        self._open = False

    async def __call__(self, done: float, total: float | None, message: str) -> None:
        try:
            if self._open and self._progress:
                await self._ctx.report_progress(done, total, message)
            if self._open and _lets_through(self._level, "info"):
                data = {"workflow_id": self._workflow_id, "message": message, "done": done, "total": total}
                # On this request's stream, in either era (the SDK's send_log_message says the same,
                # with a deprecation warning for the logging capability Pilot still serves).
                params = types.LoggingMessageNotificationParams(
                    level="info", data=data, logger="vmware_pilot.run"
                )
                await self._ctx.request_context.session.send_notification(
                    types.LoggingMessageNotification(params=params), related_request_id=self._ctx.request_id
                )
        except Exception:  # a client that went away must not stop the run
            _log.debug("run notification not delivered", exc_info=True)


def register_logging(lowlevel: Server[Any]) -> None:
    """Install logging/setLevel (2025-11-25): the level is kept per connection and read by each
    ``RunReport``."""

    async def set_level(
        ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        current_connection().log_level = params.level
        return types.EmptyResult()

    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
