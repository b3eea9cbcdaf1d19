"""`vmware-pilot mcp --transport https|http`: check the options and tokens, then serve over HTTP.

Refusals before serving exit 2 (bad options, neither a token nor an OAuth issuer, a token file or
store that cannot be used: start-up refusals, as from every command) or 1 (the port, the OAuth
issuer's keys or the start-up self-check failed), each with a message and what to do on stderr
(``cli.refusals``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from vmware_pilot.cli.refusals import starting
from vmware_pilot.cli.serve import refused
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import InvalidInput, PilotError, StartupRefused
from vmware_pilot.tooltable import TOOL_NAMES
from vmware_pilot.transports.http import HttpOptions, Transport, parse_public_names, serve_http
from vmware_pilot.transports.jwks import IssuerKeys
from vmware_pilot.transports.oauth import JwtVerifier, OAuthConfig, client_support
from vmware_pilot.transports.roles import ROLES_FILE, RoleBook
from vmware_pilot.transports.tokens import TOKENS_FILE, DbTokenStore, Tokens, TokenStore

if TYPE_CHECKING:
    from vmware_pilot.store import SqlStore

__all__ = ["http_options", "role_book", "serve_network", "token_store"]

_log = logging.getLogger("vmware_pilot")


def token_store(settings: Settings, store: SqlStore | None) -> Tokens:
    """The tokens file in the pilot home, or, when a database URL is set (several replicas may share
    it), the token table of ``store``, the process's one store (``app.shared_store``)."""
    if not settings.database_url or store is None:
        return TokenStore(settings.home_path / TOKENS_FILE)
    return DbTokenStore(store.tokens)


def role_book(settings: Settings) -> RoleBook:
    return RoleBook(settings.home_path / ROLES_FILE, TOOL_NAMES)


def http_options(
    transport: str,
    host: str,
    port: int,
    cert: Path | None,
    key: Path | None,
    public_name: str,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> HttpOptions | None:
    """The network options, or None for stdio; refuses network options given with stdio."""
    if transport == "stdio":
        given = [
            flag
            for flag, value, default in (
                ("--host", host, "127.0.0.1"),
                ("--port", port, 8443),
                ("--cert", cert, None),
                ("--key", key, None),
                ("--public-name", public_name, ""),
                ("--metrics-port", metrics_port, None),
                ("--metrics-host", metrics_host, "127.0.0.1"),
            )
            if value != default
        ]
        if given:
            raise refused(
                InvalidInput(
                    f"{', '.join(given)} only apply to --transport https or http",
                    hint="Drop them for stdio, or choose a network transport.",
                )
            )
        return None
    kind: Transport = "https" if transport == "https" else "http"
    return HttpOptions(
        kind,
        host.strip(),
        port,
        cert,
        key,
        parse_public_names(public_name),
        metrics_port=metrics_port,
        metrics_host=metrics_host.strip(),
    )


def serve_network(settings: Settings, options: HttpOptions) -> None:
    """Validate, build the app and serve until SIGINT/SIGTERM."""
    try:
        options = options.validated()
    except InvalidInput as exc:
        raise refused(exc) from None
    roles = role_book(settings)
    try:
        # One store, so one connection pool in this process, for the tokens, the app and the
        # catalog's refresh.
        from vmware_pilot.app import shared_store

        store = starting(lambda: shared_store(settings))
        tokens = token_store(settings, store)
        entries = starting(tokens.entries)
    except PilotError as exc:
        raise refused(exc) from None
    if not entries and not settings.oauth_issuer:
        raise refused(
            StartupRefused(
                "no token exists and no OAuth issuer is set, so nobody could call this server",
                hint="Create a token first: `vmware-pilot token create NAME [--role admin|reader|…]` prints "
                "its secret; or set VMWARE_PILOT_OAUTH_ISSUER to accept your identity provider's access "
                "tokens.",
            )
        )
    usable = roles.listing()
    for entry in entries:
        if entry.role not in usable.roles:
            _log.warning(
                "token %s has role %r, which cannot be used; its calls are refused%s",
                entry.name,
                entry.role,
                f" ({usable.problem})" if usable.problem else "",
            )
    from vmware_pilot.app import build_app

    try:
        app = starting(
            lambda: build_app(settings, store=store), "Check VMWARE_PILOT_HOME and VMWARE_PILOT_DATABASE_URL."
        )
    except PilotError as exc:
        raise refused(exc) from None

    async def oauth(base: str) -> JwtVerifier | None:
        """The verifier for OAuth access tokens to ``base``/mcp, its issuer's keys loaded."""
        config = OAuthConfig.from_settings(settings, f"{base}/mcp")
        if config is None:
            return None
        keys = IssuerKeys(config.issuer)
        await keys.load()
        for what, there, meaning in client_support(keys.metadata):
            if not there:  # the issuer's business, not Pilot's: said, and served anyway
                _log.warning("OAuth issuer %s, %s: %s", config.issuer, what, meaning)
        return JwtVerifier(config, keys)

    from vmware_pilot.engine.sweeper import Sweeper, sweeping

    # With dispatch, this server continues the runs of Pilots that stopped (engine/sweeper.py).
    runner = app.service.runner
    sweeper = Sweeper(lambda: runner, settings.sweep_seconds) if app.dispatcher is not None else None

    if app.dispatcher is not None:
        from vmware_pilot.cli.stdio import refresh_catalog_if_stale

        # The skill catalog brought up to date with the installed skills, beside serving (the
        # catalog is read again when its cache changes).
        threading.Thread(
            target=refresh_catalog_if_stale, args=(settings, lambda: app.sql), name="catalog", daemon=True
        ).start()

    async def run() -> None:
        try:
            async with sweeping(sweeper):
                await serve_http(
                    app,
                    options,
                    tokens,
                    roles,
                    service_account=Actor.os_user().name or "this account",
                    oauth=oauth,
                )
        finally:
            await app.aclose()

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run())
    except PilotError as exc:
        raise refused(exc) from None
