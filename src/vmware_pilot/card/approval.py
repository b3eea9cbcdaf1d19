"""The approval card: a gate's decision summary drawn inside the chat by MCP Apps hosts.

MCP Apps (the ``io.modelcontextprotocol/ui`` extension) lets a tool name a ``ui://`` HTML
resource that a host renders next to the tool's result in a sandboxed frame, handing it the
result over ``postMessage``. The approval card is that resource for the tools whose result can
show a waiting gate (``CARD_TOOLS``): from ``get_workflow_status``'s ``decision`` it shows the
verdict and its one-line summary, the predicted changes, who asked and why, the approvals still
needed and the time left; from a run's or an approval's ``pending_gate`` it asks the host for the
workflow's status (a read) to show the same. It never approves or rejects: it links to the gate
page of the console under ``VMWARE_PILOT_PUBLIC_URL`` (the link a webhook carries), or, without
one, names the CLI commands. What the tools answer is the same for every client; a client that
does not render UI resources ignores the tools' ``_meta.ui``.

The page is one document with no external fetch: its script and style are inline, allowed by
their SHA-256 in the page's own Content-Security-Policy (nothing else may run, load, connect or
submit). Every text of a result is set as text, never as markup.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib.resources import files
from typing import Any, Final

import mcp_types as types
from jinja2 import Environment
from mcp.server.apps import APP_MIME_TYPE, Apps

__all__ = [
    "CARD_MIME_TYPE",
    "CARD_TOOLS",
    "CARD_URI",
    "ApprovalCard",
    "approval_card",
    "card_html",
    "card_meta",
]

CARD_URI: Final = "ui://vmware-pilot/approval-card"
CARD_MIME_TYPE: Final = APP_MIME_TYPE
# The tools whose result can show a waiting gate: the status's ``decision``, and the
# ``pending_gate`` of a run or an approval that stops at a gate (a quorum not met yet, a next gate).
CARD_TOOLS: Final = ("run_workflow", "approve", "get_workflow_status")

_NAME: Final = "approval-card"
_TITLE: Final = "Approval gate"
_DESCRIPTION: Final = (
    "A waiting gate's decision summary (verdict, changes, who asked and why, time left) with where "
    "to decide: the console's gate page, or the CLI. It has no control that approves."
)


def _text(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def _hash(source: str) -> str:
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"
    )


@cache
def card_html(console_url: str = "") -> str:
    """The card's HTML; its link to decide goes to ``console_url``'s gate page (empty: the CLI)."""
    script, style = _text("approval_card.js"), _text("approval_card.css")
    for name, source in (("script", script), ("style", style)):
        if "</" in source:  # would end the inline element early
            raise ValueError(f"the approval card's {name} must not contain '</'")
    csp = (
        f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; "
        "img-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
    )
    env = Environment(autoescape=True, keep_trailing_newline=True)
    template = env.from_string(_text("approval_card.html"))
    # The script and style are the package's own files, inserted as they are (``| safe``, their
    # hashes above); the console's address is escaped like any text.
    return template.render(csp=csp, style=style, script=script, console_url=console_url.rstrip("/"))


def card_meta(tool: str) -> dict[str, Any] | None:
    """The ``_meta`` a tool definition carries for MCP Apps hosts: the card, for ``CARD_TOOLS``."""
    return {"ui": {"resourceUri": CARD_URI}} if tool in CARD_TOOLS else None


class ApprovalCard(Apps):
    """The SDK's MCP Apps extension with the card as its one resource. A server whose own
    ``resources/list`` and ``resources/read`` handlers replace the SDK's (Pilot's ``pilot://``
    resources) lists ``listing()`` beside its own and answers ``read(uri)`` when it is not None."""

    def listing(self) -> list[types.Resource]:
        """The card as ``resources/list`` lists it."""
        return [
            types.Resource(
                uri=r.uri,
                name=r.name or r.uri,
                title=r.title,
                description=r.description,
                mime_type=r.mime_type,
                _meta=r.meta,
            )
            for r in (binding.resource for binding in self.resources())
        ]

    async def read(self, uri: str) -> types.ReadResourceResult | None:
        """What ``resources/read`` answers for ``uri``: the card, or None for another URI."""
        for binding in self.resources():
            r = binding.resource
            if r.uri == uri:
                body = await r.read()
                text = body if isinstance(body, str) else body.decode("utf-8")
                contents = types.TextResourceContents(uri=uri, text=text, mime_type=r.mime_type, _meta=r.meta)
                return types.ReadResourceResult(contents=[contents])
        return None


def approval_card(console_url: str = "") -> ApprovalCard:
    """The MCP Apps extension serving the card (``MCPServer(extensions=[...])``): it advertises
    ``io.modelcontextprotocol/ui`` and lists the ``ui://`` resource; ``console_url`` is the
    console's public base URL (``Settings.public_url``; empty: the card names the CLI instead)."""
    card = ApprovalCard()
    card.add_html_resource(
        CARD_URI,
        card_html(console_url),
        name=_NAME,
        title=_TITLE,
        description=_DESCRIPTION,
        prefers_border=True,
    )
    return card
