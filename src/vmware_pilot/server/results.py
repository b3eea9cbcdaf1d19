"""Result framing: one JSON text block plus the same object as structured content.

See docs/contract.md#framing-and-the-iserror-rule.

``isError`` is true when the payload has a truthy top-level ``error`` or ``outcome == "failed"``;
previews and every other payload are normal results.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent

__all__ = ["dump_json", "is_error_payload", "to_result"]


def dump_json(payload: Mapping[str, Any]) -> str:
    """The wire text: 2-space indent, non-ASCII kept as UTF-8, odd values stringified."""
    return json.dumps(payload, indent=2, ensure_ascii=False, default=str)


def is_error_payload(payload: Mapping[str, Any]) -> bool:
    """The contract's isError rule: a truthy ``error`` or a failed ``outcome``."""
    return bool(payload.get("error")) or payload.get("outcome") == "failed"


def to_result(payload: Mapping[str, Any]) -> CallToolResult:
    """Frame a result dict; the structured object is parsed back from the text so both are identical."""
    text = dump_json(payload)
    structured: dict[str, Any] = json.loads(text)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structuredContent=structured,
        isError=is_error_payload(structured),
    )
