"""What every answer must be, whatever the arguments were (shared by the MCP and HTTP fuzz tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from vmware_pilot.errors import QUOTE_CHARS
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.server.bounds import MAX_REFUSAL_BYTES, long_strings
from vmware_pilot.server.results import is_error_payload

__all__ = ["MAX_RESULT_BYTES", "check_answer"]

# A successful result echoes at most the plan it was given and its history.
MAX_RESULT_BYTES = 8 * MAX_REQUEST_BYTES


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def check_answer(
    tool: str, arguments: Mapping[str, Any], text: str, structured: Any, is_error: bool
) -> dict[str, Any]:
    """Assert the answer is a proper result or a proper refusal; returns its payload."""
    where = f"{tool}({sorted(map(str, arguments))})"
    assert "Traceback" not in text and 'File "' not in text, where
    payload = json.loads(text)
    assert isinstance(payload, dict), where
    assert payload == structured, where
    assert is_error is is_error_payload(payload), where
    size = len(text.encode("utf-8", "surrogatepass"))
    if not payload.get("error") or "outcome" in payload:  # a result (a failed run is one too)
        assert size <= MAX_RESULT_BYTES, (where, size)
        return payload
    assert isinstance(payload["error"], str), where
    # A refusal we meant, not an unexpected exception reported generically.
    assert "correlation id" not in payload["error"], (where, payload)
    assert size <= MAX_REFUSAL_BYTES, (where, size)
    quoted = list(_strings(payload))
    for sent in long_strings(arguments):
        head = sent[: QUOTE_CHARS + 1]
        assert not any(head in s for s in quoted), (where, "quotes more than 200 characters of an input")
    return payload
