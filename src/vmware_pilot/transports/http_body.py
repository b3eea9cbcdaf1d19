"""POST bodies the SDK's HTTP transport can always parse: text bytes are made UTF-8.

The SDK reads a POST body with ``json.loads(bytes)``, which guesses UTF-16/32 from NUL bytes at
the start and raises ``UnicodeDecodeError`` (not a JSON error) on bytes that are not valid in the
guessed encoding; the SDK then logs a traceback and answers 500. ``Utf8Body`` hands the SDK the
same body with invalid UTF-8 bytes replaced by U+FFFD (as its stdio transport does) and, when it
starts with a NUL byte, with two spaces before it, so a bad body is always a JSON parse error
(400) or a message whose text carries U+FFFD. Only the first ``MAX_REQUEST_BYTES`` and one more
chunk are ever held: a longer body is passed on untouched for the SDK's size limit to refuse
(413). Authentication still runs first: the body is read only when the app asks for it.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vmware_pilot.limits import MAX_REQUEST_BYTES

__all__ = ["Utf8Body", "as_utf8_json"]


def as_utf8_json(body: bytes) -> bytes:
    """``body`` as bytes that ``json.loads`` reads as UTF-8 without a decoding error."""
    try:
        body.decode("utf-8")
        fixed = body
    except UnicodeDecodeError:
        fixed = body.decode("utf-8", errors="replace").encode("utf-8")
    if b"\x00" in fixed[:2]:
        # JSON allows leading whitespace; it stops json.loads guessing UTF-16 or UTF-32.
        fixed = b"  " + fixed
    return fixed


class Utf8Body:
    """ASGI middleware: POST bodies reach ``app`` as UTF-8 (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        first = True

        async def whole_body() -> Message:
            nonlocal first
            if not first:
                return await receive()
            first = False
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return message  # the client went away
                chunk = message.get("body", b"")
                chunks.append(chunk)
                size += len(chunk)
                more = bool(message.get("more_body", False))
                if not more or size > MAX_REQUEST_BYTES:
                    break
            body = b"".join(chunks)
            return {
                "type": "http.request",
                "body": body if more else as_utf8_json(body),
                "more_body": more,
            }

        await self.app(scope, whole_body, send)
