"""A webhook event as a chat message: Slack Block Kit or a Microsoft Teams Adaptive Card.

With ``VMWARE_PILOT_NOTIFY_FORMAT`` ``slack`` or ``teams`` the body POSTed is the message an
incoming webhook of that chat takes as it is, so no relay is needed. The message says what
happened, to which workflow, who asked and why, and for a waiting gate the decision summary
(engine.decision) first; a failure's error and what it already changed; who rejected and why.
Its one button opens the workflow in the web console (sign-in required): a chat message never
approves anything by itself.

Everything taken from the workflow is escaped for the chat's markup (Slack: ``&``, ``<``, ``>``,
so a description cannot mention ``@channel`` or forge a link; Teams: plain ``TextRun``s, never
markdown) and bounded to the chat's limits (Slack: at most 50 blocks, 3000 characters a section,
150 a header; Teams: one card).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from vmware_pilot.engine.decision import decision_lines
from vmware_pilot.results import Decision

__all__ = ["headline", "lines_of", "render"]

# Slack's documented limits (https://api.slack.com/reference/block-kit/blocks).
SLACK_MAX_BLOCKS: Final = 50
SLACK_SECTION_MAX: Final = 3000
SLACK_HEADER_MAX: Final = 150
SLACK_BUTTON_MAX: Final = 75
SLACK_CONTEXT_MAX: Final = 10
_LINES_MAX: Final = 30
_ALERTS_MAX: Final = 5
_SEVERITY_MARK: Final = {"danger": "🔴", "warning": "🟠", "info": "🔵"}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _line(value: object) -> str:
    return " ".join(str(value or "").split())


def headline(event: Mapping[str, Any]) -> str:
    """What happened, in a few words, with the workflow's type and id."""
    name = str(event.get("event", ""))
    step = event.get("step")
    missing = event.get("approvals_missing")
    what = {
        "awaiting_approval": "Approval needed",
        "approval_partial": f"Approved by {_line(event.get('approver'))}: {missing} more approval(s) needed",
        "gate_expired": "Approval request expired without a decision",
        "plan_changed": "The gate's prediction changed: earlier approvals no longer count",
        "completed": "Completed",
        "failed": f"Failed at step {step}" if step is not None else "Failed",
        "rolled_back": "Rolled back",
        "rollback_incomplete": "Rollback incomplete",
        "cancelled": f"Rejected by {_line(event.get('rejected_by'))}"
        if event.get("rejected")
        else "Cancelled",
    }.get(name, name.replace("_", " ").capitalize())
    return f"{what}: {_line(event.get('workflow_type'))} ({_line(event.get('workflow_id'))})"


def _step_ref(ref: Mapping[str, Any]) -> str:
    return f"step {ref.get('index')} {ref.get('skill')}.{ref.get('tool')}"


def lines_of(event: Mapping[str, Any]) -> list[str]:
    """The message's body as plain lines: who asked and why, then what the event is about."""
    asked = _line(event.get("requested_by")) or "unknown"
    if event.get("requested_via"):
        asked += f" via {_line(event['requested_via'])}"
    lines = [f"Asked by {asked}"]
    if event.get("description"):
        lines.append(f"Why: {_line(event['description'])}")
    name = event.get("event")
    raw = event.get("decision")
    if name == "awaiting_approval" and isinstance(raw, Mapping):
        lines += decision_lines(Decision.model_validate(raw))[1:]  # "Asked by" is said above
    elif name in ("approval_partial", "gate_expired", "plan_changed"):
        names = event.get("approved_by") or []
        if names:
            lines.append(f"Approved so far by {', '.join(map(_line, names))}")
        if event.get("approvals_missing"):
            lines.append(f"{event['approvals_missing']} more approval(s) needed")
        if event.get("comment"):
            lines.append(f"Comment: {_line(event['comment'])}")
        if name == "gate_expired":
            lines.append(
                f"Expired at {_line(event.get('expires_at'))}; it can only be rejected or cancelled."
            )
        if name == "plan_changed" and event.get("detail"):
            lines.append(_line(event["detail"]))
    elif name == "failed":
        if event.get("error"):
            lines.append(f"Error: {_line(event['error'])}")
        changed = event.get("changed") or []
        lines.append(
            "Already changed: " + "; ".join(_step_ref(c) for c in changed)
            if changed
            else "Already changed: nothing Pilot knows of"
        )
        unknown = event.get("effect_unknown") or []
        if unknown:
            lines.append("Effect unknown: " + "; ".join(_step_ref(c) for c in unknown))
    elif name == "cancelled":
        who = _line(event.get("rejected_by") or event.get("actor"))
        lines.append(
            f"{'Rejected' if event.get('rejected') else 'Cancelled'} by {who}: {_line(event.get('reason'))}"
        )
    elif name in ("rolled_back", "rollback_incomplete"):
        for undo in event.get("undone") or []:
            lines.append(f"step {undo.get('step')} {undo.get('tool')}: {undo.get('status')}")
    return [_line(line) for line in lines[:_LINES_MAX] if _line(line)]


def _alerts(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    gate = event.get("gate")
    alerts = gate.get("alerts") if isinstance(gate, Mapping) else None
    return [a for a in alerts or [] if isinstance(a, Mapping)][:_ALERTS_MAX]


def _mrkdwn(text: str) -> str:
    """Text for a Slack ``mrkdwn`` object: its control characters escaped (no mention, no link)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack(event: Mapping[str, Any]) -> dict[str, Any]:
    title = headline(event)
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _cut(title, SLACK_HEADER_MAX), "emoji": True},
        }
    ]
    body = "\n".join(_mrkdwn(line) for line in lines_of(event))
    blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _cut(body, SLACK_SECTION_MAX)}})
    for alert in _alerts(event):
        mark = _SEVERITY_MARK.get(str(alert.get("severity")), "")
        text = f"{mark} *{_mrkdwn(_line(alert.get('object')))}*: {_mrkdwn(_line(alert.get('text')))}"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(text, 2000)}]})
    link = str(event.get("link") or "")
    if link:
        button = {"type": "plain_text", "text": _cut("Open in the Pilot console", SLACK_BUTTON_MAX)}
        blocks.append(
            {"type": "actions", "elements": [{"type": "button", "text": button, "url": _cut(link, 3000)}]}
        )
    stamp = f"{_line(event.get('event'))} · {_line(event.get('workflow_id'))} · {_line(event.get('ts'))}"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _mrkdwn(stamp)}]})
    return {"text": _cut(title, SLACK_SECTION_MAX), "blocks": blocks[:SLACK_MAX_BLOCKS]}


def _run(text: str, **style: Any) -> dict[str, Any]:
    """One paragraph of plain text in a card: a ``RichTextBlock`` of one ``TextRun``, which Teams
    never reads as markdown (a description cannot forge a link or a heading)."""
    return {"type": "RichTextBlock", "inlines": [{"type": "TextRun", "text": text, **style}]}


def _teams(event: Mapping[str, Any]) -> dict[str, Any]:
    title = headline(event)
    body: list[dict[str, Any]] = [_run(title, weight="Bolder", size="Medium")]
    body += [_run(line) for line in lines_of(event)]
    for alert in _alerts(event):
        color = {"danger": "Attention", "warning": "Warning"}.get(str(alert.get("severity")), "Default")
        body.append(_run(f"{_line(alert.get('object'))}: {_line(alert.get('text'))}", color=color))
    stamp = f"{_line(event.get('event'))} · {_line(event.get('workflow_id'))} · {_line(event.get('ts'))}"
    body.append(_run(stamp, isSubtle=True, size="Small"))
    card: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
        "msteams": {"width": "Full"},
    }
    link = str(event.get("link") or "")
    if link:
        card["actions"] = [{"type": "Action.OpenUrl", "title": "Open in the Pilot console", "url": link}]
    attachment = {
        "contentType": "application/vnd.microsoft.card.adaptive",
        "contentUrl": None,
        "content": card,
    }
    return {"type": "message", "summary": title, "attachments": [attachment]}


def render(event: Mapping[str, Any], fmt: Literal["slack", "teams"]) -> dict[str, Any]:
    """``event`` as the body of a Slack (Block Kit) or Teams (Adaptive Card) incoming webhook."""
    return _slack(event) if fmt == "slack" else _teams(event)
