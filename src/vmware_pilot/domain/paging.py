"""Page sizes for lists of workflows, shared by the MCP tool and the operator CLI."""

from __future__ import annotations

__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "next_offset"]

# A list without a limit answers this many (the most recent); a limit may ask for up to MAX_PAGE.
DEFAULT_PAGE = 50
MAX_PAGE = 500


def next_offset(offset: int, size: int, returned: int, total: int) -> int | None:
    """Offset of the page after one of ``returned`` rows (``size`` asked) at ``offset``; None after the last."""
    following = offset + returned
    return following if returned == size and following < total else None
