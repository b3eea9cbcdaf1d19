"""The approval card for MCP Apps hosts (``approval.py``): a waiting gate drawn in the chat."""

from __future__ import annotations

from vmware_pilot.card.approval import (
    CARD_MIME_TYPE,
    CARD_TOOLS,
    CARD_URI,
    ApprovalCard,
    approval_card,
    card_html,
    card_meta,
)

__all__ = [
    "CARD_MIME_TYPE",
    "CARD_TOOLS",
    "CARD_URI",
    "ApprovalCard",
    "approval_card",
    "card_html",
    "card_meta",
]
