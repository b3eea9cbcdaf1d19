"""Request bodies bounded before anything parses them: ``/mcp``'s (``BodyCheck``) and the
console's forms (``FormLimit``). POST bodies to ``/mcp`` that the SDK could not parse are refused
here, as the client's error.

The SDK reads a POST body with ``json.loads(bytes)``: bytes that are not valid UTF-8 (or start
with a NUL byte, which makes it guess UTF-16/32) raise ``UnicodeDecodeError`` and JSON nested
deeper than the interpreter's recursion limit raises ``RecursionError``; neither is a JSON error
to the SDK, which logs a traceback and answers 500. ``BodyCheck`` sits in front of the endpoint,
after authentication has run (an unauthenticated request passes untouched and gets 401 without
its body being read), reads at most ``MAX_REQUEST_BYTES`` (413 past it, before reading when
``Content-Length`` says so) and answers such a body with 400 and a JSON-RPC parse error. The SDK's
parser refuses a lone UTF-16 surrogate escape (``\ud800``) that Python's reads: such a body is
answered 400 with ``-32600`` and the request's id, as on stdio. Everything else is handed on
unchanged.

``FormLimit`` does the same for the console's forms, before anything else runs (the sign-in form
is posted before authentication): a POST body is read into memory up to ``MAX_REQUEST_BYTES``
(413 past it, before reading when ``Content-Length`` says so, chunked bodies as soon as they pass
it) and handed on whole, so no form parser ever sees more; a body that is not a plain
``application/x-www-form-urlencoded`` form (multipart, whose parts the form parser would spool to
temporary files) is refused with 415. The console's pages post nothing else.
"""

from __future__ import annotations

import json
import re
from typing import Final

from pydantic_core import from_json
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vmware_pilot.errors import PilotError
from vmware_pilot.limits import MAX_REQUEST_BYTES

__all__ = ["BodyCheck", "FormLimit", "body_problem", "check_bodies", "read_limited"]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
# Below this many opening brackets no JSON can nest deep enough to exhaust the recursion limit,
# so the extra parse is skipped for ordinary requests.
_DEEP_SUSPECT: Final = 500


def body_problem(body: bytes) -> str | None:
    """Why the SDK could not parse ``body`` as JSON without crashing, or None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not UTF-8"
    if "\x00" in text[:2]:
        return "the body starts with a NUL byte"
    if body.count(b"[") + body.count(b"{") > _DEEP_SUSPECT:
        try:
            json.loads(text)
        except RecursionError:
            return "the JSON is nested too deeply"
        except ValueError:
            pass  # the SDK answers ordinary JSON errors itself
    return None


def lone_surrogate(body: bytes) -> tuple[bool, str | int | None]:
    """Whether ``body`` is JSON the SDK's parser refuses for a lone surrogate escape, and the
    request's id (None when it has no usable one)."""
    if not _SURROGATE_ESCAPE.search(body):
        return False, None
    try:
        from_json(body)
    except ValueError:
        pass
    else:
        return False, None
    try:
        loaded = json.loads(body)
    except (ValueError, RecursionError):
        return False, None  # not JSON at all: the SDK's own parse error
    found = loaded.get("id") if isinstance(loaded, dict) else None
    return True, found if isinstance(found, str | int) and not isinstance(found, bool) else None


async def _answer(
    send: Send, status: int, message: str, code: int = PARSE_ERROR, request_id: str | int | None = None
) -> None:
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    body = json.dumps(error).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def read_limited(scope: Scope, receive: Receive) -> bytes | None:
    """The request's whole body, or None once it is (or says it will be) over ``MAX_REQUEST_BYTES``
    or the client went away; never more than the limit plus one message is held."""
    declared = dict(scope["headers"]).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went away
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_REQUEST_BYTES:
            return None
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands on ``body`` whole, then whatever the connection sends next."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


_TOO_LARGE = f"Request too large: at most {MAX_REQUEST_BYTES} bytes per message"


class BodyCheck:
    """ASGI wrapper of the ``/mcp`` endpoint (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not getattr(user, "is_authenticated", False)
        ):
            await self.app(scope, receive, send)
            return
        body = await read_limited(scope, receive)
        if body is None:
            await _answer(send, 413, _TOO_LARGE)
            return
        problem = body_problem(body)
        if problem is not None:
            await _answer(send, 400, f"Parse error: {problem}")
            return
        surrogate, request_id = lone_surrogate(body)
        if surrogate:
            message = "Invalid Request: the JSON holds an escape that is not a Unicode character (a lone surrogate such as \\ud800)"
            await _answer(send, 400, message, INVALID_REQUEST, request_id)
            return
        await self.app(scope, _replaying(body, receive), send)


_FORM = b"application/x-www-form-urlencoded"


async def _plain(send: Send, status: int, message: str) -> None:
    body = message.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class FormLimit:
    """ASGI wrapper of the console (see the module docstring): every POST body bounded before
    any route reads it, and only plain URL-encoded forms accepted."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await read_limited(scope, receive)
        if body is None:
            await _plain(
                send, 413, _TOO_LARGE + ". Console forms are small: reload the page and send it again."
            )
            return
        kind = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip().lower()
        if body and kind != _FORM:
            await _plain(
                send, 415, "The console takes forms as application/x-www-form-urlencoded only (no multipart)."
            )
            return
        await self.app(scope, _replaying(body, receive), send)


def check_bodies(app: Starlette, path: str) -> None:
    """Put a ``BodyCheck`` in front of the endpoint at ``path``."""
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == path:
            route.app = BodyCheck(route.app)
            return
    raise PilotError(f"no route {path} to guard", hint="This is a bug in this build of vmware-pilot.")
