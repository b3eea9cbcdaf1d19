"""Text from data made safe for a terminal: non-printable characters written as their escapes.

Kept free of typer and rich so the stdio server's refusals can use it without loading either;
``cli.terminal`` builds every other print path on it.
"""

from __future__ import annotations

__all__ = ["visible"]


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: object, keep: str = "") -> str:
    """``text`` with every non-printable character (but those in ``keep``) written as its escape."""
    value = str(text)
    if value.isprintable():
        return value
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in value)
