"""What the CLI prints: text from data with its control characters shown, never obeyed.

Names, messages, parameters and errors come from agents and other skills. Printed raw, an escape
sequence among them could move the cursor, erase a line or recolour the screen, and so make an
approval prompt show another step than the one it releases. ``visible`` writes every character
Python does not call printable (controls such as ESC, CR and newline, format characters such as
bidi overrides, separators other than the space) as its escape: ``\\x1b``, ``\\r``, ``\\u202e``.

Every print path of the CLI goes through here: ``say`` for plain lines, ``console()`` for Rich
output (tables and panels escape their cells with ``visible``; a render hook escapes whatever
still reaches the screen raw), ``json_text`` for ``--json`` output, and ``ask`` for questions.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook, RenderResult
from rich.segment import Segment

from vmware_pilot.cli.escapes import visible

__all__ = ["ask", "console", "json_text", "say", "visible"]


def say(*fields: object, err: bool = False) -> None:
    """Print one line for the person (stderr with ``err``): the fields, each escaped, tab-separated."""
    typer.echo("\t".join(visible(f) for f in fields), err=err)


def ask(question: object, err: bool = False) -> bool:
    """A yes/no question at the terminal, default no."""
    return typer.confirm(visible(question), default=False, err=err)


def _json_escape(char: str) -> str:
    # JSON escapes C0 controls itself; the rest goes as \uXXXX (a surrogate pair above the BMP).
    units = char.encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2))


def json_text(data: Any, indent: int | None = 2) -> str:
    """``data`` as JSON whose text holds no raw control or format character (the same values)."""
    text = json.dumps(data, indent=indent, ensure_ascii=False, default=str)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n " else _json_escape(c) for c in text)


class _Shown:
    """A renderable whose segments reach the screen with their control characters escaped."""

    def __init__(self, inner: ConsoleRenderable) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            text = segment.text
            if segment.control or text.isprintable():
                yield segment
            else:  # Rich's own line breaks stay; anything else was data that missed ``visible``
                yield Segment(visible(text, keep="\n"), segment.style)


class _ShowControls(RenderHook):
    """A Rich render hook: every renderable printed is wrapped in ``_Shown``."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Shown(r) for r in renderables]


def console(stderr: bool = False, **options: Any) -> Console:
    """A Rich console for the person whose output never carries a raw control character from data."""
    out = Console(stderr=stderr, highlight=False, soft_wrap=False, **options)
    out.push_render_hook(_ShowControls())
    return out
