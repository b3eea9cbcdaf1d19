"""Judging another skill's answer: every guess about other servers' result conventions lives here.

``payload_of`` turns an MCP ``CallToolResult`` into the value the tool meant;
``judge`` decides success, failure, preview-only or unknown effect
(docs/contract.md#judging-a-skills-answer): ``JUDGE_RULES`` in order, the first that answers
decides, and an answer no rule takes is a success.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from mcp_types import CallToolResult, TextContent

from vmware_pilot.catalog.renames import skill_key
from vmware_pilot.dispatch.protocol import OutcomeKind, StepOutcome
from vmware_pilot.safety.rules import Rule, first, rule

__all__ = ["GUEST_TOOLS", "JUDGE_RULES", "Answer", "answer_of", "judge", "one_line", "payload_of"]

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
    structured: Any = result.structured_content
    if isinstance(structured, dict) and set(structured) == {"result"}:
        structured = structured["result"]
    if result.is_error:
        if _has_error(structured):
            return structured
        if len(texts) == 1:
            parsed = _parse(texts[0])
            if _has_error(parsed):
                return parsed
            if isinstance(parsed, list) and len(parsed) == 1 and _has_error(parsed[0]):
                return parsed[0]
        return {"error": " ".join(texts) or "the tool reported isError with no message"}
    if result.structured_content is not None:
        return structured
    values = [_parse(t) for t in texts]
    return values[0] if len(values) == 1 else values


def _top_levels(payload: Any, result: CallToolResult) -> list[dict[str, Any]]:
    """The payload, the structured content (and its ``result``) and a lone JSON text object."""
    found: list[Any] = [payload, result.structured_content]
    if isinstance(result.structured_content, dict):
        found.append(result.structured_content.get("result"))
    texts = _texts(result)
    if len(texts) == 1:
        found.append(_parse(texts[0]))
    return [t for t in found if isinstance(t, dict)]


@dataclass(frozen=True, slots=True)
class Answer:
    """One tool call's answer as the judging rules see it."""

    result: CallToolResult
    payload: Any
    guest: bool  # aiops' guest-command tools, whose exit code and timeout mean something
    tops: list[dict[str, Any]]


@rule("guest_timed_out")
def _guest_timed_out(a: Answer) -> StepOutcome | None:
    """A guest command that timed out (``timed_out: true`` or ``exit_code: -1``): effect unknown."""
    if a.guest and any(t.get("timed_out") is True or t.get("exit_code") == -1 for t in a.tops):
        return StepOutcome(
            OutcomeKind.EFFECT_UNKNOWN,
            a.payload,
            "the guest command timed out: whether it finished inside the VM is unknown",
        )
    return None


@rule("preview_only")
def _preview_only(a: Answer) -> StepOutcome | None:
    """An answer with ``action: "preview"`` at a top level: the tool only previewed the change."""
    if any(t.get("action") == "preview" for t in a.tops):
        return StepOutcome(OutcomeKind.PREVIEW_ONLY, a.payload, _PREVIEW)
    return None


@rule("is_error")
def _is_error(a: Answer) -> StepOutcome | None:
    """The MCP result says ``isError``: failed, with the skill's error text as the message."""
    if a.result.is_error:
        error = a.payload.get("error") if isinstance(a.payload, dict) else a.payload
        return StepOutcome(OutcomeKind.FAILED, a.payload, one_line(error))
    return None


@rule("error_key")
def _error_key(a: Answer) -> StepOutcome | None:
    """A payload object with a non-empty ``error``: failed."""
    if _has_error(a.payload):
        return StepOutcome(OutcomeKind.FAILED, a.payload, one_line(a.payload["error"]))
    return None


@rule("lone_error_item")
def _lone_error_item(a: Answer) -> StepOutcome | None:
    """A payload that is a one-item list whose item has a non-empty ``error``: failed."""
    if isinstance(a.payload, list) and len(a.payload) == 1 and _has_error(a.payload[0]):
        return StepOutcome(OutcomeKind.FAILED, a.payload[0], one_line(a.payload[0]["error"]))
    return None


@rule("guest_exit_code")
def _guest_exit_code(a: Answer) -> StepOutcome | None:
    """A guest command whose integer ``exit_code`` is not 0: failed, with its stderr."""
    if not a.guest:
        return None
    for top in a.tops:
        code = top.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            stderr = str(top.get("stderr") or "")[:300]
            return StepOutcome(
                OutcomeKind.FAILED,
                a.payload,
                f"the guest command exited with exit_code {code}. stderr: {stderr}",
            )
    return None


# In order; the first rule that answers decides. No answer: the call succeeded.
JUDGE_RULES: Final[tuple[Rule[Answer, StepOutcome | None], ...]] = (
    _guest_timed_out,
    _preview_only,
    _is_error,
    _error_key,
    _lone_error_item,
    _guest_exit_code,
)


def answer_of(skill: str, tool: str, result: CallToolResult) -> Answer:
    """What the judging rules look at in ``result``."""
    payload = payload_of(result)
    return Answer(
        result=result,
        payload=payload,
        guest=skill_key(skill) == "aiops" and tool in GUEST_TOOLS,
        tops=_top_levels(payload, result),
    )


def judge(skill: str, tool: str, result: CallToolResult) -> StepOutcome:
    """Success, failure, preview-only or unknown effect of one tool call (``JUDGE_RULES``)."""
    answer = answer_of(skill, tool, result)
    return first(JUDGE_RULES, answer) or StepOutcome(OutcomeKind.SUCCEEDED, answer.payload)
