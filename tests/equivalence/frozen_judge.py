"""Judging another skill's answer: every guess about other servers' result conventions lives here.

``payload_of`` turns an MCP ``CallToolResult`` into the value the tool meant;
``judge`` decides success, failure, preview-only or unknown effect
(docs/contract.md#judging-a-skills-answer).
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import CallToolResult, TextContent

from vmware_pilot.catalog.renames import skill_key
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome

__all__ = ["GUEST_TOOLS", "judge", "one_line", "payload_of"]

_MESSAGE_MAX = 500
GUEST_TOOLS = frozenset({"run_vm_guest_command", "run_vm_guest_command_with_output"})
_PREVIEW = (
    "the tool only previewed the change (it was not called with confirm=True), so nothing was "
    "applied; its preview is kept in this step's result"
)


def one_line(error: Any) -> str:
    """A skill's error as one bounded line (the full text stays in the step's result)."""
    text = " ".join(str(error).split())
    return text if len(text) <= _MESSAGE_MAX else text[: _MESSAGE_MAX - 1] + "…"


def _texts(result: CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, TextContent) and c.text.strip()]


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _has_error(value: Any) -> bool:
    return isinstance(value, dict) and value.get("error") not in (None, "", [], {})


def payload_of(result: CallToolResult) -> Any:
    """The tool's value: structured content (unwrapped) or the parsed text blocks."""
    texts = _texts(result)
    structured: Any = result.structuredContent
    if isinstance(structured, dict) and set(structured) == {"result"}:
        structured = structured["result"]
    if result.isError:
        if _has_error(structured):
            return structured
        if len(texts) == 1:
            parsed = _parse(texts[0])
            if _has_error(parsed):
                return parsed
            if isinstance(parsed, list) and len(parsed) == 1 and _has_error(parsed[0]):
                return parsed[0]
        return {"error": " ".join(texts) or "the tool reported isError with no message"}
    if result.structuredContent is not None:
        return structured
    values = [_parse(t) for t in texts]
    return values[0] if len(values) == 1 else values


def _top_levels(payload: Any, result: CallToolResult) -> list[dict[str, Any]]:
    """The payload, the structured content (and its ``result``) and a lone JSON text object."""
    found: list[Any] = [payload, result.structuredContent]
    if isinstance(result.structuredContent, dict):
        found.append(result.structuredContent.get("result"))
    texts = _texts(result)
    if len(texts) == 1:
        found.append(_parse(texts[0]))
    return [t for t in found if isinstance(t, dict)]


def judge(skill: str, tool: str, result: CallToolResult) -> StepOutcome:
    """Success, failure, preview-only or unknown effect of one tool call."""
    payload = payload_of(result)
    guest = skill_key(skill) == "aiops" and tool in GUEST_TOOLS
    tops = _top_levels(payload, result)
    if guest and any(t.get("timed_out") is True or t.get("exit_code") == -1 for t in tops):
        return StepOutcome(
            OutcomeKind.EFFECT_UNKNOWN,
            payload,
            "the guest command timed out: whether it finished inside the VM is unknown",
        )
    if any(t.get("action") == "preview" for t in tops):
        return StepOutcome(OutcomeKind.PREVIEW_ONLY, payload, _PREVIEW)
    if result.isError:
        error = payload.get("error") if isinstance(payload, dict) else payload
        return StepOutcome(OutcomeKind.FAILED, payload, one_line(error))
    if _has_error(payload):
        return StepOutcome(OutcomeKind.FAILED, payload, one_line(payload["error"]))
    if isinstance(payload, list) and len(payload) == 1 and _has_error(payload[0]):
        return StepOutcome(OutcomeKind.FAILED, payload[0], one_line(payload[0]["error"]))
    if guest:
        for top in tops:
            code = top.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                stderr = str(top.get("stderr") or "")[:300]
                return StepOutcome(
                    OutcomeKind.FAILED,
                    payload,
                    f"the guest command exited with exit_code {code}. stderr: {stderr}",
                )
    return StepOutcome(OutcomeKind.SUCCEEDED, payload)
