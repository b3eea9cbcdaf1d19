"""The server's log on stderr: text or JSON lines, and the MCP SDK's known noise made quiet.

``VMWARE_PILOT_LOG_FORMAT=json`` writes one JSON object per line: ``time`` (UTC, ISO 8601),
``level``, ``logger``, ``message``, ``workflow_id``, ``request_id`` (the MCP request's id in its
session) and ``caller`` (who made the request: ``token:NAME``, an OAuth subject or the OS user),
``source`` (module and line), and ``exception`` when there is one. The context fields come from
``telemetry``'s context variables (empty when the line was not written for a request).

Known noise from the SDK becomes one DEBUG line (shown only at VMWARE_PILOT_LOG_LEVEL=DEBUG):
the traceback logged at ERROR when a client disconnects from its standalone SSE stream or an SSE
response, and the INFO line when a client cancels a request (a form it closed).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from vmware_pilot import telemetry

__all__ = ["JsonFormatter", "SdkNoise", "configure_logging"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# (logger, message start) of records that are noise: a normal disconnect or a cancelled request.
_NOISE = (
    ("mcp.server.streamable_http", "Error in standalone SSE writer"),
    ("mcp.server.streamable_http", "Error in SSE writer"),
    ("mcp.server.streamable_http", "SSE response error"),
    ("mcp.server.lowlevel.server", "Request %s cancelled"),
)
# Exceptions that mean the client went away (anyio's closed/broken streams, a reset connection).
_DISCONNECTS = ("ClosedResourceError", "BrokenResourceError", "EndOfStream", "ConnectionResetError")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "workflow_id": telemetry.workflow_id.get(),
            "request_id": telemetry.request_id.get(),
            "caller": telemetry.caller.get(),
            "source": f"{record.module}:{record.lineno}",
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def _leaf(exc: BaseException | None) -> BaseException | None:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class SdkNoise(logging.Filter):
    """Turns the SDK's noise into one DEBUG line without a traceback (dropped unless the logger
    is enabled for DEBUG); other records pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not any(record.name == name and str(record.msg).startswith(start) for name, start in _NOISE):
            return True
        leaf = _leaf(record.exc_info[1]) if record.exc_info else None
        if leaf is not None and type(leaf).__name__ not in _DISCONNECTS:
            return True  # a real failure inside the SDK: keep it whole
        if leaf is not None:
            record.msg = f"{record.getMessage()}: {type(leaf).__name__} (the client disconnected)"
            record.args = None
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def configure_logging(level: str, fmt: str = "text") -> None:
    """Root logging to stderr at ``level`` in ``fmt`` (text or json); refuses an unknown level name."""
    numeric = logging.getLevelName(level.strip().upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log level {level!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=numeric, handlers=[handler], force=True)
    for name in {name for name, _ in _NOISE}:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SdkNoise) for f in logger.filters):
            logger.addFilter(SdkNoise())
