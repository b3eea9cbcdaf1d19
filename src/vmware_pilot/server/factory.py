"""Builds the `vmware-pilot` FastMCP server for one app; the caller is resolved on every request."""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, cast

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp.tools import Tool
from mcp.server.transport_security import TransportSecuritySettings

from vmware_pilot import __version__, telemetry
from vmware_pilot.domain.actor import Actor
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.ondemand import AppOnDemand
from vmware_pilot.server import sdk
from vmware_pilot.server.completions import register_completions
from vmware_pilot.server.descriptions import instructions
from vmware_pilot.server.exposure import exposed_tools
from vmware_pilot.server.pipeline import ActorSource, PilotFastMCP, RoleOf
from vmware_pilot.server.prompts import register_prompts
from vmware_pilot.server.resources import register_resources
from vmware_pilot.server.runaway import RunawayBreaker
from vmware_pilot.server.runlog import register_logging
from vmware_pilot.server.subscriptions import SubscriptionHub, VersionPolling, register_subscriptions
from vmware_pilot.server.wire import guard

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp

__all__ = ["SERVER_NAME", "create_server"]

SERVER_NAME = "vmware-pilot"

_LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _speak_fully(server: PilotFastMCP, source: AppOnDemand) -> None:
    """Resources with subscriptions, prompts, completions, logging and the JSON-RPC edges."""
    lowlevel = sdk.lowlevel(server)
    refusal = server.read_refusal
    service = source.service_proxy()
    register_resources(lowlevel, service, refusal)
    register_prompts(lowlevel)
    register_completions(lowlevel, service, refusal)
    register_logging(lowlevel)
    hub = SubscriptionHub(VersionPolling(source.versions, source.settings.watch_interval))
    register_subscriptions(lowlevel, hub, refusal, lambda wid: bool(source.versions([wid])))
    guard(lowlevel, on_end=hub.drop)
    sdk.declare_subscriptions(lowlevel)


def _tools(source: AppOnDemand, caller: ActorSource) -> list[Tool]:
    from vmware_pilot.server.tools import build_tools  # and the result models: not for `initialize`

    return build_tools(
        lambda: source.get().service, caller, source.settings.watch_interval, role=PilotFastMCP.call_role
    )


@contextlib.contextmanager
def _observed(request: Any) -> Iterator[None]:
    """An MCP request measured (``pilot_mcp_request_duration_seconds``) and, with tracing on, in
    a server span with the MCP semantic conventions, continuing the client's ``_meta.traceparent``."""
    if request is None:  # the SDK's own inner call (tools/list to refresh its cache): not a request
        yield
        return
    method = str(getattr(request, "method", "unknown"))
    params = getattr(request, "params", None)
    tool = str(getattr(params, "name", "")) if method == "tools/call" else ""
    arguments = getattr(params, "arguments", None) if tool else None
    workflow_id = arguments.get("workflow_id") if isinstance(arguments, dict) else None
    meta = getattr(params, "meta", None)
    parent = getattr(meta, "traceparent", "") if meta is not None else ""
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
            yield
    finally:
        telemetry.observe("mcp_request_duration_seconds", time.monotonic() - started, method=method)


def create_server(
    app: PilotApp | AppOnDemand,
    *,
    actor: Actor | ActorSource,
    role_of: RoleOf | None = None,
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
    transport_security: TransportSecuritySettings | None = None,
) -> PilotFastMCP:
    """A server exposing the 13 tools over ``app.service``.

    ``actor`` is the fixed caller (stdio) or a function returning the caller of the request being
    handled (network). With ``role_of``, tools/list and every call are limited to the caller's role
    (``server.pipeline``). The settings' exposure (``server.exposure``) hides tools from every caller,
    and their runaway limits refuse repeated identical write calls (``server.runaway``). The
    remaining arguments configure FastMCP's HTTP authentication and
    Host/Origin checks. ``initialize`` reports name ``vmware-pilot`` and the package version.
    An ``AppOnDemand`` not built yet is built by the first tool call that needs it.
    """
    caller: ActorSource = (lambda: actor) if isinstance(actor, Actor) else actor
    source = app if isinstance(app, AppOnDemand) else AppOnDemand.ready(app)
    settings = source.settings
    level = settings.log_level.upper()
    server = PilotFastMCP(
        SERVER_NAME,
        instructions=instructions(source.dispatching),
        tools=functools.partial(_tools, source, caller),
        log_level=cast(_LogLevel, level if level in _LEVELS else "INFO"),
        caller=caller,
        role_of=role_of,
        offered=exposed_tools(settings.mcp_expose, settings.mcp_allow_write),
        runaway=RunawayBreaker(settings.runaway_max, settings.runaway_window_sec),
        token_verifier=token_verifier,
        auth=auth,
        transport_security=transport_security,
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    _speak_fully(server, source)
    sdk.set_version(server, __version__)
    sdk.wrap_requests(sdk.lowlevel(server), _observed)
    if level != "DEBUG":
        # One INFO line per request ("Processing request of type …") is noise in an operator log.
        logging.getLogger("mcp.server.lowlevel.server").setLevel(logging.WARNING)
    return server
