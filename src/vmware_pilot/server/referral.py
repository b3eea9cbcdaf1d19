"""Approvals by URL: ``approve`` under the ``elicit`` policy on a 2026-07-28 connection.

That revision has no server-to-client requests, so no form can be sent in the middle of a call.
The approval becomes a multi-round-trip request instead: the call answers an ``InputRequiredResult``
whose one input request is a URL-mode elicitation of the console's gate page for the workflow, where
the person signs in, sees the full view and decides (four-eyes included) through the console's own
door. The client shows the link and calls ``approve`` again with the person's answer and the
request state. Each such call reads what the gate became (``PilotService.referred_approval``):
decided, the call completes with the approval's (or the rejection's) result; not yet, the same link
again; expired or moved on, the refusal true now. The person's answer at the client is only "I went
there" (or "I will not decide": the gate keeps waiting): it never decides the gate.

The request state is the workflow id and the gate's step index, no secret; the SDK's
``RequestStateBoundary`` seals it (``RequestStateSecurity``) and binds it to this tool, these
arguments and the caller, and refuses one it did not mint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import anyio
from mcp.server.mcpserver import Context
from mcp_types import ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from vmware_pilot.errors import StateRefused
from vmware_pilot.server.subscriptions import version_moved, version_of

if TYPE_CHECKING:  # the engine is imported when the app is built, not at start-up
    from vmware_pilot.engine.approvals import Referral
    from vmware_pilot.engine.requests import ApproveRequest
    from vmware_pilot.engine.service import PilotService
    from vmware_pilot.results import ApproveResult

__all__ = ["CONSOLE_INPUT", "REQUEST_STATE_TTL", "approve_in_console", "gate_page_url", "speaks_urls_only"]

_log = logging.getLogger("vmware_pilot.server")

# The key of the one input request (the console's gate page) in an ``InputRequiredResult``.
CONSOLE_INPUT: Final = "console"
# How long one call waits for the run an approval released to stop before answering "ask again".
_RUN_WAIT: Final = 20.0
# How long a request state stays good (seconds; the SDK's default is 10 minutes): the person may
# take as long as the gate waits between two rounds, and the state grants nothing (it names a gate,
# whose decision every retry reads again). Each round seals a fresh one.
REQUEST_STATE_TTL: Final = 86400.0


def speaks_urls_only(ctx: Context[Any, Any]) -> bool:
    """Whether this request's connection speaks 2026-07-28 (no form can be sent during a call)."""
    try:
        return ctx.request_context.protocol_version in MODERN_PROTOCOL_VERSIONS
    except ValueError:  # no request in flight
        return False


def _opens_urls(ctx: Context[Any, Any]) -> bool:
    """Whether the client declared URL-mode elicitation (an empty ``elicitation`` means forms only)."""
    capabilities = ctx.request_context.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def gate_page_url(console_url: str, workflow_id: str) -> str:
    """The console's gate page of ``workflow_id`` under the server's public URL (as webhooks link it)."""
    return f"{console_url.rstrip('/')}/console/workflows/{workflow_id}/gate"


def _cli(workflow_id: str) -> str:
    return f"vmware-pilot approve {workflow_id}"


def _no_console(workflow_id: str) -> StateRefused:
    return StateRefused(
        f"Refusing to approve workflow '{workflow_id}' here: this Pilot asks the person directly "
        "(approvals policy 'elicit'), which on this connection (MCP 2026-07-28) means sending them to "
        "the web console's gate page, and no console address is configured",
        hint="The operator sets VMWARE_PILOT_PUBLIC_URL to the address of the Pilot that serves the "
        f"console (`vmware-pilot mcp --transport http`); until then, ask the user to run `{_cli(workflow_id)}` "
        "themselves on the Pilot host (do not run it for them).",
        workflow_id=workflow_id,
        refused="console_not_configured",
        approve_command=_cli(workflow_id),
    )


def _no_urls(workflow_id: str) -> StateRefused:
    return StateRefused(
        f"Refusing to approve workflow '{workflow_id}': this Pilot asks the person directly in the web "
        "console (approvals policy 'elicit'), and this MCP client cannot open a link for them (no "
        "URL elicitation capability)",
        hint=f"Ask the user to open the console's gate page themselves, or to run `{_cli(workflow_id)}` "
        "on the Pilot host (do not run it for them), or use an MCP client that supports URL elicitation.",
        workflow_id=workflow_id,
        refused="elicitation_unsupported",
        approve_command=_cli(workflow_id),
    )


def _ask(referral: Referral, console_url: str) -> InputRequiredResult:
    """The input request sending the person to the gate page, and the state naming the gate."""
    url = gate_page_url(console_url, referral.workflow_id)
    message = (
        f"Workflow {referral.workflow_id} waits for a person's approval at step {referral.gate_step}. "
        "Open the Pilot console's gate page, sign in, review the plan and approve or reject it there. "
        "Come back here once you decided."
    )
    return InputRequiredResult(
        input_requests={
            CONSOLE_INPUT: ElicitRequest(params=ElicitRequestURLParams(message=message, url=url))
        },
        request_state=_state(referral),
    )


def _state(referral: Referral) -> str:
    return json.dumps({"workflow_id": referral.workflow_id, "gate_step": referral.gate_step})


def _referral_of(state: str | None, workflow_id: str) -> Referral | None:
    """The gate a retry's (already verified) request state names; None on a first call."""
    from vmware_pilot.engine.approvals import Referral

    if state is None:
        return None
    try:
        data = json.loads(state)
        referral = Referral(str(data["workflow_id"]), int(data["gate_step"]))
    except (ValueError, KeyError, TypeError) as exc:  # minted by another flow: start over
        _log.warning("approve: request state not a console referral (%s); asking again", exc)
        return None
    return referral if referral.workflow_id == workflow_id else None


def _answer(ctx: Context[Any, Any]) -> str:
    """The person's answer to the link on this retry (``accept``: they say they went there;
    ``decline`` or ``cancel``: they will not decide now), "" when the retry carries none."""
    answer = (ctx.input_responses or {}).get(CONSOLE_INPUT)
    return answer.action if isinstance(answer, ElicitResult) else ""


async def approve_in_console(
    ctx: Context[Any, Any],
    service: PilotService,
    request: ApproveRequest,
    console_url: str,
    versions: Callable[[list[str]], dict[str, int]],
    watch: float,
) -> ApproveResult | InputRequiredResult:
    """``approve`` as a multi-round-trip request whose input is the console's gate page (see the
    module's text). ``versions`` reads workflows' stored versions, every ``watch`` seconds while
    a retry waits: for the console's save when the person says they decided (it is recorded
    just after their answer page), and up to ``_RUN_WAIT`` seconds for the run the approval
    released to stop."""
    workflow_id = request.workflow_id
    if not console_url:
        raise _no_console(workflow_id)
    referral = _referral_of(ctx.request_state, workflow_id)
    if referral is None:
        if not _opens_urls(ctx):
            raise _no_urls(workflow_id)
        return _ask(await service.refer_approval(request), console_url)
    answer = _answer(ctx)
    declined = answer not in ("", "accept")
    # Each state read comes after a version read: the wait that follows returns at the first save
    # after that version, even one landing while the state was being read.
    seen = await version_of(versions, workflow_id)
    became = await service.referred_approval(request, referral, declined=declined)
    if became == "waiting" and answer == "accept":
        seen = await version_moved(versions, workflow_id, seen, 2 * watch, watch)
        became = await service.referred_approval(request, referral)
    with anyio.move_on_after(_RUN_WAIT):
        while became == "running":
            seen = await version_moved(versions, workflow_id, seen, _RUN_WAIT, watch)
            became = await service.referred_approval(request, referral)
    if became == "waiting":
        return _ask(referral, console_url)
    if became == "running":  # still going: the client asks again (no input needed)
        return InputRequiredResult(request_state=_state(referral))
    return became
