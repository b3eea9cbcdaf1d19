"""Structural checks of chat message bodies, written from the chats' documented rules.

Slack Block Kit (https://api.slack.com/reference/block-kit/blocks and /composition-objects): a
message has a top-level ``text`` (the notification fallback) and at most 50 ``blocks``; each
block a known ``type`` with its own fields; a ``header``'s text is ``plain_text`` of at most 150
characters; a ``section``'s ``text`` at most 3000; a ``context`` at most 10 elements; an
``actions`` block at most 25 elements; a button's text ``plain_text`` of at most 75 characters
and its ``url`` at most 3000; a text object is ``{"type": "plain_text"|"mrkdwn", "text"}``
(``emoji`` only on plain_text, ``verbatim`` only on mrkdwn), never empty. Microsoft Teams (an
incoming webhook's message with an Adaptive Card, https://adaptivecards.io/explorer/): ``type:
message`` with ``attachments`` of ``contentType application/vnd.microsoft.card.adaptive`` whose
``content`` is ``{type: AdaptiveCard, version, body, actions?, msteams?}``; a ``RichTextBlock``
(version 1.2 on) holds ``TextRun`` inlines, each with text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SLACK_BLOCK_FIELDS = {
    "header": {"type", "text", "block_id"},
    "section": {"type", "text", "fields", "accessory", "block_id"},
    "context": {"type", "elements", "block_id"},
    "actions": {"type", "elements", "block_id"},
    "divider": {"type", "block_id"},
}


def _text_object(
    obj: Any, where: str, limit: int, kinds: tuple[str, ...] = ("plain_text", "mrkdwn")
) -> list[str]:
    if not isinstance(obj, Mapping):
        return [f"{where}: not a text object"]
    problems = []
    if obj.get("type") not in kinds:
        problems.append(f"{where}: type {obj.get('type')!r} not in {kinds}")
    allowed = {"type", "text", "emoji"} if obj.get("type") == "plain_text" else {"type", "text", "verbatim"}
    if set(obj) - allowed:
        problems.append(f"{where}: unexpected keys {sorted(set(obj) - allowed)}")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        problems.append(f"{where}: empty text")
    elif len(text) > limit:
        problems.append(f"{where}: {len(text)} characters > {limit}")
    return problems


def slack_problems(message: Mapping[str, Any]) -> list[str]:
    """Every way ``message`` breaks Block Kit's structural rules (empty: valid)."""
    problems: list[str] = []
    if not isinstance(message.get("text"), str) or not message["text"]:
        problems.append("no fallback text")
    blocks = message.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        return [*problems, "no blocks"]
    if len(blocks) > 50:
        problems.append(f"{len(blocks)} blocks > 50")
    for i, block in enumerate(blocks):
        where = f"blocks[{i}]"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind not in SLACK_BLOCK_FIELDS:
            problems.append(f"{where}: unknown block type {kind!r}")
            continue
        if set(block) - SLACK_BLOCK_FIELDS[kind]:
            problems.append(f"{where}: unexpected keys {sorted(set(block) - SLACK_BLOCK_FIELDS[kind])}")
        if kind == "header":
            problems += _text_object(block.get("text"), where, 150, ("plain_text",))
        elif kind == "section":
            if "text" not in block and "fields" not in block:
                problems.append(f"{where}: a section needs text or fields")
            if "text" in block:
                problems += _text_object(block["text"], where, 3000)
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 10:
                problems.append(f"{where}: context needs 1 to 10 elements")
            for j, element in enumerate(elements or []):
                problems += _text_object(element, f"{where}.elements[{j}]", 3000)
        elif kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= 25:
                problems.append(f"{where}: actions needs 1 to 25 elements")
            for j, element in enumerate(elements or []):
                at = f"{where}.elements[{j}]"
                if element.get("type") != "button":
                    problems.append(f"{at}: not a button")
                    continue
                problems += _text_object(element.get("text"), at, 75, ("plain_text",))
                url = element.get("url")
                if not isinstance(url, str) or not url.startswith(("https://", "http://")) or len(url) > 3000:
                    problems.append(f"{at}: bad url {url!r}")
    return problems


def teams_problems(message: Mapping[str, Any]) -> list[str]:
    """Every way ``message`` is not a Teams message carrying one Adaptive Card (empty: valid)."""
    problems: list[str] = []
    if message.get("type") != "message":
        problems.append("type is not 'message'")
    attachments = message.get("attachments")
    if not isinstance(attachments, list) or len(attachments) != 1:
        return [*problems, "needs exactly one attachment"]
    (attachment,) = attachments
    if attachment.get("contentType") != "application/vnd.microsoft.card.adaptive":
        problems.append(f"contentType {attachment.get('contentType')!r}")
    card = attachment.get("content")
    if not isinstance(card, Mapping):
        return [*problems, "no card"]
    if card.get("type") != "AdaptiveCard":
        problems.append("content.type is not AdaptiveCard")
    if not isinstance(card.get("version"), str) or not card["version"].startswith("1."):
        problems.append(f"version {card.get('version')!r}")
    body = card.get("body")
    if not isinstance(body, list) or not body:
        problems.append("empty body")
    for i, element in enumerate(body or []):
        kind = element.get("type")
        if kind not in ("TextBlock", "RichTextBlock", "FactSet", "Container", "ColumnSet"):
            problems.append(f"body[{i}]: type {kind!r}")
        if kind == "TextBlock" and not (isinstance(element.get("text"), str) and element["text"]):
            problems.append(f"body[{i}]: empty TextBlock")
        if kind == "RichTextBlock":
            inlines = element.get("inlines")
            if not isinstance(inlines, list) or not inlines:
                problems.append(f"body[{i}]: RichTextBlock without inlines")
            for run in inlines or []:
                if run.get("type") != "TextRun" or not isinstance(run.get("text"), str) or not run["text"]:
                    problems.append(f"body[{i}]: inline is not a TextRun with text")
            if tuple(map(int, str(card.get("version", "1.0")).split(".")[:2])) < (1, 2):
                problems.append(f"body[{i}]: RichTextBlock needs version 1.2 or later")
    for i, action in enumerate(card.get("actions") or []):
        if action.get("type") != "Action.OpenUrl" or not str(action.get("url", "")).startswith("http"):
            problems.append(f"actions[{i}]: only Action.OpenUrl with a URL")
    msteams = card.get("msteams")
    if msteams is not None and not isinstance(msteams, Mapping):
        problems.append("msteams is not an object")
    return problems
