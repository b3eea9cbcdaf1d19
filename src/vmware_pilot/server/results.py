"""Result framing: one JSON text block plus the same object as structured content.

See docs/contract.md#framing-and-the-iserror-rule.

``isError`` is true when the payload has a truthy top-level ``error`` or ``outcome == "failed"``;
previews and every other payload are normal results.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel
from pydantic_core import to_json

__all__ = ["dump_json", "is_error_payload", "payload_of", "to_result"]


def payload_of(result: Mapping[str, Any] | BaseModel) -> Mapping[str, Any]:
    """The JSON object of a result: a typed result (``vmware_pilot.results``) written out once by
    its own serializer (its set keys, in the contract's order), a mapping as it is."""
    if isinstance(result, BaseModel):
        dumped: dict[str, Any] = result.model_dump()
        return dumped
    return result


def dump_json(payload: Mapping[str, Any] | BaseModel) -> str:
    """The wire text: 2-space indent, non-ASCII kept as UTF-8, odd values stringified."""
    return _indented(_plain(payload_of(payload)))


def _plain(payload: Mapping[str, Any]) -> Any:
    """``payload`` as plain JSON values (odd values stringified), through the C encoder and decoder."""
    return json.loads(json.dumps(payload, ensure_ascii=False, default=str))


def _indented(plain: Any) -> str:
    # The standard library indents only in pure Python, which costs more than the rest of a
    # status call; pydantic-core writes the same text in Rust (floats in their shortest form).
    return to_json(plain, indent=2).decode()


def is_error_payload(payload: Mapping[str, Any]) -> bool:
    """The contract's isError rule: a truthy ``error`` or a failed ``outcome``."""
    return bool(payload.get("error")) or payload.get("outcome") == "failed"


def to_result(payload: Mapping[str, Any]) -> CallToolResult:
    """Frame a result dict; the text is written from the structured object, so both are identical."""
    structured: dict[str, Any] = _plain(payload)
    return CallToolResult(
        content=[TextContent(type="text", text=_indented(structured))],
        structured_content=structured,
        is_error=is_error_payload(structured),
    )
