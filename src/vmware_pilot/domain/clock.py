"""Aware UTC timestamps and workflow ids."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

__all__ = ["from_iso", "iso", "new_workflow_id", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(dt: datetime | None) -> str:
    """ISO-8601 with microseconds and ``+00:00``; ``""`` for no timestamp."""
    return dt.isoformat(timespec="microseconds") if dt is not None else ""


def from_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    dt = datetime.fromisoformat(text)
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def new_workflow_id(now: datetime | None = None) -> str:
    """``wf-YYYYMMDD-HHMMSS-xxxxxx`` in UTC, the suffix six random hex digits."""
    now = now or utcnow()
    return f"wf-{now.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
