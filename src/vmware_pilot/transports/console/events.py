"""Live updates for console pages: server-sent events when a workflow (or the list) changes.

The stream polls the store (every Pilot process on the same store changes it, so there is no
in-process signal to wait for) and sends ``event: changed`` with the workflow's version, state,
the digest of its pending gate and the number of its approvals whenever one of them differs from the last one sent. A
comment line every few polls keeps proxies from closing an idle stream. Every few polls the
stream also asks whether its session still holds, and ends once it does not (signed out on any
replica, or expired), so a page left open stops following plan data.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import StreamingResponse

from vmware_pilot.app import PilotApp
from vmware_pilot.engine.gates import waiting_gate
from vmware_pilot.errors import PilotError

__all__ = ["POLL_SECONDS", "workflow_events", "workflows_events"]

POLL_SECONDS: Final = 1.0
_KEEPALIVE_POLLS: Final = 15
_MAX_POLLS: Final = 3600  # the browser reconnects after this
_SESSION_POLLS: Final = 5

SignedIn = Callable[[], bool]


def _stream(
    request: Request, snapshot: Callable[[], dict[str, Any]], signed_in: SignedIn
) -> StreamingResponse:
    async def body() -> AsyncIterator[str]:
        last: dict[str, Any] | None = None
        yield "retry: 2000\n\n"
        for polls in range(_MAX_POLLS):
            if await request.is_disconnected():
                return
            if polls and polls % _SESSION_POLLS == 0 and not signed_in():
                yield "event: signed_out\ndata: {}\n\n"
                return
            try:
                now = snapshot()
            except PilotError as exc:
                now = {"error": exc.message}
            if now != last:
                yield f"event: changed\ndata: {json.dumps(now)}\n\n"
                last = now
            elif polls % _KEEPALIVE_POLLS == 0:
                yield ": keep-alive\n\n"
            await asyncio.sleep(POLL_SECONDS)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)


def workflow_events(
    app: PilotApp, workflow_id: str, request: Request, signed_in: SignedIn
) -> StreamingResponse:
    def snapshot() -> dict[str, Any]:
        wf = app.service.records.load(workflow_id)
        gate = waiting_gate(wf)
        digest, approvals = (gate.digest, len(gate.approvers)) if gate is not None else ("", 0)
        return {"version": wf.version, "state": wf.state.value, "digest": digest, "approvals": approvals}

    return _stream(request, snapshot, signed_in)


def workflows_events(app: PilotApp, request: Request, signed_in: SignedIn) -> StreamingResponse:
    def snapshot() -> dict[str, Any]:
        rows = app.service.records.list_all(50, 0)
        return {"version": "|".join(f"{r['id']}:{r['state']}:{r['updated_at']}" for r in rows)}

    return _stream(request, snapshot, signed_in)
