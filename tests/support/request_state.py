"""A 2026-07-28 call's ``requestState`` sealed as a Pilot's request-state boundary seals it (the
SDK's middleware that seals the ``requestState`` of every ``input_required`` result), for the
tests of its keys across replicas: no Pilot tool asks for input on that era yet, so nothing on
the wire mints one.

``sealed`` runs the boundary on a ``tools/call`` whose handler answers ``input_required``, as the
caller ``caller`` (the bearer's identity as the replica's token verifier gives it; None: an
unauthenticated transport, as in memory), and returns the sealed state a client would echo.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.request_state import RequestStateBoundary

__all__ = ["sealed"]


async def sealed(
    boundary: RequestStateBoundary, tool: str, arguments: dict[str, Any], caller: AccessToken | None = None
) -> str:
    ctx = SimpleNamespace(method="tools/call", params={"name": tool, "arguments": arguments})

    async def asks(_ctx: Any) -> dict[str, Any]:
        return {"resultType": "input_required", "inputRequests": {}, "requestState": "round 1"}

    user = auth_context_var.set(AuthenticatedUser(caller) if caller is not None else None)
    try:
        answer = await boundary(cast(Any, ctx), asks)
    finally:
        auth_context_var.reset(user)
    assert isinstance(answer, dict) and answer["requestState"] != "round 1"  # sealed, not plaintext
    return str(answer["requestState"])
