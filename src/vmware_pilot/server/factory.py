"""Builds the `vmware-pilot` MCP server (the SDK's ``MCPServer``) for one app; the caller is resolved on every request."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, Literal, cast

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import RequestStateSecurity
from mcp.server.mcpserver.tools import Tool
from pydantic import SecretStr

from vmware_pilot import __version__, telemetry
from vmware_pilot.card import ApprovalCard, approval_card
from vmware_pilot.domain.actor import Actor
from vmware_pilot.ondemand import AppOnDemand
from vmware_pilot.server import sdk
from vmware_pilot.server.completions import register_completions
from vmware_pilot.server.descriptions import instructions
from vmware_pilot.server.exposure import exposed_tools
from vmware_pilot.server.pipeline import ActorSource, PilotMCPServer, RoleOf
from vmware_pilot.server.prompts import register_prompts
from vmware_pilot.server.referral import REQUEST_STATE_TTL
from vmware_pilot.server.resources import register_resources
from vmware_pilot.server.runaway import RunawayBreaker
from vmware_pilot.server.runlog import register_logging
from vmware_pilot.server.subscriptions import (
    SubscriptionHub,
    VersionPolling,
    WorkflowBus,
    register_listen,
    register_subscriptions,
)
from vmware_pilot.server.tasks import TasksExtension
from vmware_pilot.server.wire import in_request

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp

__all__ = ["SERVER_NAME", "create_server"]

SERVER_NAME = "vmware-pilot"

_LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _speak_fully(
    server: PilotMCPServer, source: AppOnDemand, card: ApprovalCard, hub: SubscriptionHub, bus: WorkflowBus
) -> None:
    """Resources with subscriptions (both eras'), prompts, completions and logging, as low-level
    handlers."""
    lowlevel = sdk.lowlevel(server)
    sdk.fixed_lists(lowlevel)
    refusal = server.read_refusal
    service = source.service_proxy()
    register_resources(lowlevel, service, refusal, card, source.settings.watch_interval)
    register_prompts(lowlevel)
    register_completions(lowlevel, service, refusal)
    register_logging(lowlevel)

    def exists(workflow_id: str) -> bool:
        return bool(source.versions([workflow_id]))

    register_subscriptions(lowlevel, hub, refusal, exists)
    register_listen(lowlevel, bus, refusal, exists)


def request_state_security(secrets: SecretStr) -> RequestStateSecurity:
    """The policy sealing a 2026-07-28 call's ``requestState``, good for ``REQUEST_STATE_TTL``:
    under the secrets of VMWARE_PILOT_REQUEST_STATE_KEYS (the first seals, each unseals), shared
    by every replica so a round sealed by one is accepted by another; without them, under a key
    of this process alone."""
    keys = [k.strip() for k in secrets.get_secret_value().split(",") if k.strip()]
    if not keys:
        return RequestStateSecurity.ephemeral(ttl=REQUEST_STATE_TTL)
    return RequestStateSecurity(keys=keys, ttl=REQUEST_STATE_TTL, audience=SERVER_NAME)


def _tools(source: AppOnDemand, caller: ActorSource) -> list[Tool]:
    from vmware_pilot.server.tools import build_tools  # and the result models: not for `initialize`

    return build_tools(
        lambda: source.get().service,
        caller,
        source.settings.watch_interval,
        role=PilotMCPServer.call_role,
        console_url=source.settings.public_url,
    )


async def _observed(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: an MCP request measured (``pilot_mcp_request_duration_seconds``) and,
    with tracing on, in a server span with the MCP semantic conventions, continuing the client's
    ``_meta.traceparent``. Notifications pass unmeasured."""
    if ctx.request_id is None:
        return await call_next(ctx)
    method = ctx.method
    params = ctx.params or {}
    tool = str(params.get("name", "")) if method == "tools/call" else ""
    arguments = params.get("arguments") if tool else None
    workflow_id = arguments.get("workflow_id") if isinstance(arguments, dict) else None
    parent = (ctx.meta or {}).get("traceparent", "")
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if tool:
        attributes.update({"gen_ai.tool.name": tool, "gen_ai.operation.name": "execute_tool"})
    if isinstance(workflow_id, str):
        attributes["vmware_pilot.workflow_id"] = workflow_id[:64]
    started = time.monotonic()
    try:
        with telemetry.span(
            f"{method} {tool}".strip(), "server", attributes, parent if isinstance(parent, str) else ""
        ):
            return await call_next(ctx)
    finally:
        telemetry.observe("mcp_request_duration_seconds", time.monotonic() - started, method=method)


def create_server(
    app: PilotApp | AppOnDemand,
    *,
    actor: Actor | ActorSource,
    role_of: RoleOf | None = None,
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
) -> PilotMCPServer:
    """A server exposing the 13 tools over ``app.service``.

    ``actor`` is the fixed caller (stdio) or a function returning the caller of the request being
    handled (network). With ``role_of``, tools/list and every call are limited to the caller's role
    (``server.pipeline``). The settings' exposure (``server.exposure``) hides tools from every caller,
    and their runaway limits refuse repeated identical write calls (``server.runaway``). The
    remaining arguments configure the HTTP authentication (the transport's
    ``streamable_http_app`` takes the Host/Origin checks and the body limit). ``initialize`` reports name ``vmware-pilot`` and the package version.
    An ``AppOnDemand`` not built yet is built by the first tool call that needs it.
    """
    caller: ActorSource = (lambda: actor) if isinstance(actor, Actor) else actor
    source = app if isinstance(app, AppOnDemand) else AppOnDemand.ready(app)
    settings = source.settings
    level = settings.log_level.upper()
    card = approval_card(settings.public_url)
    tasks = TasksExtension(source, caller=caller, role_of=role_of)
    # Workflow changes, read from the store's versions (any process's, any replica's), told to
    # 2025-11-25 subscribers (resources/subscribe) and to 2026-07-28 subscriptions/listen streams.
    hub = SubscriptionHub(VersionPolling(source.versions, settings.watch_interval))
    bus = WorkflowBus(hub)
    server = PilotMCPServer(
        SERVER_NAME,
        version=__version__,
        instructions=instructions(source.dispatching),
        tools=functools.partial(_tools, source, caller),
        log_level=cast(_LogLevel, level if level in _LEVELS else "INFO"),
        caller=caller,
        role_of=role_of,
        offered=exposed_tools(settings.mcp_expose, settings.mcp_allow_write),
        runaway=RunawayBreaker(settings.runaway_max, settings.runaway_window_sec),
        token_verifier=token_verifier,
        auth=auth,
        middleware=[in_request, _observed],
        # Approvals by URL span as many rounds as a person takes in the console (server.referral);
        # replicas share the keys that seal them.
        request_state_security=request_state_security(settings.request_state_keys),
        # subscriptions/listen is served over this bus (server.subscriptions.register_listen).
        subscriptions=bus,
        # The approval card (MCP Apps), and tasks for runs (io.modelcontextprotocol/tasks).
        extensions=[card],
        tasks=tasks,
    )
    _speak_fully(server, source, card, hub, bus)
    return server
