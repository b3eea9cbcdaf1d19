"""Serve the Pilot MCP server over streamable HTTP at ``/mcp``: HTTPS, or plain HTTP on loopback.

Every request to ``/mcp`` needs ``Authorization: Bearer <token>``: a static token (tokens.py),
whose name is the caller, or with OAuth configured a JWT access token (oauth.py), whose subject is
the caller; the caller's role limits what it sees and may do (server/pipeline.py). Before auth,
the Host header must name the server (421) and a browser Origin must be the server's own (403),
in any letter case, which defeats DNS rebinding. ``GET /healthz`` answers ``{"status": "ok"}``
to anyone and says nothing else; ``/livez`` and ``/readyz`` are the probes of health.py. ``/console`` is the web console (transports/console), signed in
with the same tokens; ``GET /`` leads there, and the start line names its URL. At start, requests without a token are sent to the app in-process and the
server refuses to start unless each one is refused with 401. Connections are guarded below HTTP
(connections.py): read deadlines and a cap per client address.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import anyio
import httpx
import uvicorn
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from vmware_pilot.app import PilotApp
from vmware_pilot.errors import InvalidInput, PilotError
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.server import create_server
from vmware_pilot.server.pipeline import PilotMCPServer
from vmware_pilot.transports.callers import (
    CallerVerifier,
    current_caller,
    gate_resource,
    install_authentication,
    resource_metadata_url,
    serve_resource_metadata,
)
from vmware_pilot.transports.connections import ConnectionLimits, guarded_protocol
from vmware_pilot.transports.health import PROBE_PATHS, Probes
from vmware_pilot.transports.http_body import check_bodies
from vmware_pilot.transports.metrics import Metrics, MetricsEndpoint, metrics_only_app
from vmware_pilot.transports.oauth import JwtVerifier
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import Tokens

__all__ = [
    "CONSOLE_PATH",
    "HttpOptions",
    "build_http_app",
    "parse_public_names",
    "public_base",
    "self_check",
    "serve_http",
]

CONSOLE_PATH = "/console/"  # where `GET /` leads and the start line points
_log = logging.getLogger("vmware_pilot.http")

Transport = Literal["https", "http"]
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_DNS_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$")
_GRACEFUL_SECONDS = 5
# A kept-alive connection idle this long after an answer is closed (README: slow and idle connections).
_KEEP_ALIVE_SECONDS = 5


def parse_public_names(text: str) -> tuple[str, ...]:
    """``a.example.com, 10.0.0.5`` → ``("a.example.com", "10.0.0.5")`` (blank entries dropped)."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_form(name: str) -> str:
    """How a name appears in a Host header or URL (IPv6 literals in brackets)."""
    return f"[{name}]" if ":" in name else name


@dataclass(frozen=True)
class HttpOptions:
    """How to serve: ``https`` (cert, key, public names) or ``http`` (loopback, behind a TLS proxy).

    ``port`` 0 picks a free port (the banner names it).
    """

    transport: Transport
    host: str = "127.0.0.1"
    port: int = 8443
    cert: Path | None = None
    key: Path | None = None
    public_names: tuple[str, ...] = ()
    metrics_port: int | None = None  # serve /metrics without a token on this port too
    metrics_host: str = "127.0.0.1"

    @property
    def scheme(self) -> str:
        return self.transport

    def validated(self) -> HttpOptions:
        """These options, checked; raises ``InvalidInput`` saying what to change."""
        if not 0 <= self.port <= 65535:
            raise InvalidInput(f"port {self.port} is out of range", field="port", hint="Use 1-65535.")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise InvalidInput(
                f"metrics port {self.metrics_port} is out of range", field="metrics_port", hint="Use 1-65535."
            )
        for name in self.public_names:
            if not (_is_ip(name) or (_DNS_NAME.match(name) and ".." not in name)):
                raise InvalidInput(
                    f"public name {name!r} is neither a DNS name nor an IP address",
                    field="public_name",
                    hint="Give the names clients use to reach this server, comma-separated.",
                )
        if self.transport == "http":
            if not _is_loopback(self.host):
                raise InvalidInput(
                    f"--transport http serves plain HTTP and only on loopback, not on {self.host!r}",
                    field="host",
                    hint="Use --host 127.0.0.1 behind a TLS-terminating proxy, or --transport https.",
                )
            return self
        if not self.public_names:
            raise InvalidInput(
                "--transport https needs at least one --public-name",
                field="public_name",
                hint="Pass the DNS names or addresses clients use, e.g. --public-name pilot.example.com.",
            )
        for flag, path in (("--cert", self.cert), ("--key", self.key)):
            if path is None or not path.expanduser().is_file():
                raise InvalidInput(
                    f"--transport https needs {flag} naming an existing file (got {path or 'nothing'})",
                    field=flag.lstrip("-"),
                    hint="Pass the PEM certificate (--cert) and its private key (--key).",
                )
        assert self.cert is not None and self.key is not None
        cert, key = self.cert.expanduser(), self.key.expanduser()
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            raise InvalidInput(
                f"the certificate and key cannot be used together ({exc})",
                field="cert",
                hint="Check that --cert is a PEM certificate and --key its unencrypted private key.",
            ) from None
        return replace(self, cert=cert, key=key)

    def names(self) -> tuple[str, ...]:
        """Names a client may use: the public names; on loopback HTTP also the loopback names."""
        if self.transport == "http":
            return tuple(dict.fromkeys([*self.public_names, *_LOOPBACK_NAMES]))
        return self.public_names

    def allowed_hosts(self, port: int) -> list[str]:
        return [h for n in self.names() for h in (_host_form(n).lower(), f"{_host_form(n).lower()}:{port}")]

    def allowed_origins(self, port: int) -> list[str]:
        schemes = ("https",) if self.transport == "https" else ("http", "https")
        return [f"{s}://{h}" for s in schemes for h in self.allowed_hosts(port)]


class _Guard:
    """``/healthz``, ``/livez`` and ``/readyz`` first (no checks: probes reach a replica by its
    address), then Host → 421 and Origin → 403 for everything else."""

    def __init__(
        self, app: ASGIApp, hosts: list[str], origins: list[str], probes: Probes, metrics: MetricsEndpoint
    ) -> None:
        self.app = app
        self.hosts = frozenset(hosts)
        self.origins = frozenset(origins)
        self.probes = probes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in ("/healthz", "/healthz/"):
            if scope["method"] in ("GET", "HEAD"):
                await _respond(send, 200, b'{"status":"ok"}', "application/json", scope["method"] == "HEAD")
            else:
                await _respond(send, 405, b"Method Not Allowed", "text/plain")
            return
        if scope["path"].rstrip("/") in PROBE_PATHS:
            if scope["method"] in ("GET", "HEAD"):
                await self.probes.answer(scope, send, _respond)
            else:
                await _respond(send, 405, b"Method Not Allowed", "text/plain")
            return
        headers = Headers(scope=scope)
        if headers.get("host", "").lower() not in self.hosts:
            await _respond(send, 421, b"Invalid Host header", "text/plain")
            return
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.origins:
            await _respond(send, 403, b"Invalid Origin header", "text/plain")
            return
        if scope["path"].rstrip("/") == "/metrics":
            await self.metrics(scope, receive, send)
            return
        await self.app(_lowercased(scope, (b"host", b"origin")), receive, send)


def _lowercased(scope: Scope, names: tuple[bytes, ...]) -> Scope:
    """``scope`` with the values of headers ``names`` in lower case: host names are case-insensitive,
    and the SDK's own Host/Origin check behind this guard compares them exactly."""
    headers = [(k, v.lower() if k.lower() in names else v) for k, v in scope["headers"]]
    return {**scope, "headers": headers}


async def _respond(send: Send, status: int, body: bytes, content_type: str, head: bool = False) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})


def public_base(options: HttpOptions, port: int, configured: str = "") -> str:
    """The URL clients reach this server at: ``configured`` (VMWARE_PILOT_PUBLIC_URL), else the
    scheme, the first name and the port (left out when it is the scheme's default, as clients
    write the URL and identity providers compare it)."""
    if configured:
        return configured.rstrip("/")
    default = {"https": 443, "http": 80}[options.scheme]
    return f"{options.scheme}://{_host_form(options.names()[0])}{'' if port == default else f':{port}'}"


class _EndedSessionStream(logging.Filter):
    """Drop the SDK's ERROR and traceback for a session's GET event stream that its client ended
    (a DELETE closes the stream the SDK's writer reads: ``anyio.ClosedResourceError``). That is a
    client saying goodbye (fastmcp and the Python SDK do it on every close), not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        ended = record.exc_info is not None and isinstance(record.exc_info[1], anyio.ClosedResourceError)
        return not (ended and record.getMessage() == "Error in standalone SSE writer")


def build_http_app(
    app: PilotApp,
    options: HttpOptions,
    port: int,
    tokens: Tokens,
    roles: RoleBook,
    jwt: JwtVerifier | None = None,
    metrics: Metrics | None = None,
) -> ASGIApp:
    """The guarded ASGI app for validated ``options`` on the bound ``port``; with ``jwt``, also an
    OAuth resource server (protected resource metadata, JWT access tokens, 403 without a role).
    ``metrics``: the server's metrics (default: a new set, for ``/metrics`` behind a role)."""
    hosts, origins = options.allowed_hosts(port), options.allowed_origins(port)
    sdk_http = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, _EndedSessionStream) for f in sdk_http.filters):
        sdk_http.addFilter(_EndedSessionStream())
    if app.settings.log_level.upper() != "DEBUG":
        # Per-session and per-request INFO lines (session ids, the self-check's requests) are noise.
        for name in ("httpx", "mcp.server.streamable_http", "mcp.server.streamable_http_manager"):
            logging.getLogger(name).setLevel(logging.WARNING)
    if jwt is None:
        # The issuer is only a label here: tokens are issued by `vmware-pilot token create`.
        auth = AuthSettings(issuer_url=f"https://{_host_form(options.names()[0])}", resource_server_url=None)
    else:
        # No resource_server_url for the SDK: the protected resource metadata and the 401/403
        # challenges of /mcp are Pilot's own (callers.py), the verifier checks the audience.
        auth = AuthSettings(
            issuer_url=jwt.config.issuer,
            resource_server_url=None,
            required_scopes=list(jwt.config.scopes) or None,
        )
    verifier = CallerVerifier(tokens, jwt)
    server = create_server(
        app,
        actor=current_caller,
        role_of=roles.role_of,
        token_verifier=verifier,
        auth=auth,
    )
    if jwt is not None:
        serve_resource_metadata(server, jwt.config)
    starlette = server.streamable_http_app(
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        ),
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    _drain_tasks_on_shutdown(starlette, server)
    install_authentication(starlette, verifier)
    check_bodies(starlette, "/mcp")
    if jwt is not None:
        gate_resource(starlette, "/mcp", roles.role_of, jwt.config)
    from vmware_pilot.transports.console import mount_console
    from vmware_pilot.transports.console.oidc import OidcLogin

    oidc = (
        OidcLogin.from_settings(app.settings, jwt.keys, public_base(options, port, app.settings.public_url))
        if jwt
        else None
    )
    if jwt is None and app.settings.console_oidc_client_id.strip():
        _log.warning("VMWARE_PILOT_CONSOLE_OIDC_CLIENT_ID is ignored: VMWARE_PILOT_OAUTH_ISSUER is not set")
    mount_console(starlette, app, verifier, roles.role_of, oidc)
    # A person who opens the server's address lands on the console, not on a bare 404.
    starlette.router.routes.append(Route("/", _to_console, methods=["GET", "HEAD"]))
    endpoint = MetricsEndpoint(metrics or Metrics(app), verifier, roles.role_of)
    return _Guard(starlette, hosts, origins, Probes(app, jwt.keys if jwt else None), endpoint)


def _drain_tasks_on_shutdown(starlette: Starlette, server: PilotMCPServer) -> None:
    """At shutdown, while the session manager still runs, wait for the calls carried for tasks:
    each task's result is recorded on its row instead of a "shut down" failure."""
    sessions = starlette.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[Any]:
        async with sessions(app) as state:
            try:
                yield state
            finally:
                await server.drain()

    starlette.router.lifespan_context = lifespan


async def _to_console(request: Request) -> Response:
    return RedirectResponse(CONSOLE_PATH, status_code=302)


async def self_check(asgi: ASGIApp, host: str, metadata_url: str = "") -> None:
    """Refuse to serve unless POST, GET and DELETE to /mcp without a valid token all get 401
    (naming ``metadata_url`` in ``WWW-Authenticate`` when given: OAuth clients start there)."""
    transport = httpx.ASGITransport(app=asgi)
    failures: list[str] = []
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as client:
        for method, auth in (("POST", None), ("GET", None), ("DELETE", None), ("POST", "Bearer not-a-token")):
            headers = {"host": host, "content-type": "application/json", "accept": "application/json"}
            if auth:
                headers["authorization"] = auth
            try:
                response = await client.request(method, "/mcp", headers=headers, content=b"{}")
                status: int | str = response.status_code
                challenge = response.headers.get("www-authenticate", "")
                if status == 401 and metadata_url and f'resource_metadata="{metadata_url}"' not in challenge:
                    status = f"401 without resource_metadata (WWW-Authenticate: {challenge!r})"
            except Exception as exc:
                status = f"{type(exc).__name__}"
            if status != 401:
                failures.append(
                    f"{method} /mcp {'with a bad token' if auth else 'without a token'} → {status}"
                )
    if failures:
        raise PilotError(
            "start-up check failed: unauthenticated requests were not refused (" + "; ".join(failures) + ")",
            hint="This is a bug in this build of vmware-pilot; do not expose it. Report the message.",
        )


class _Server(uvicorn.Server):
    """uvicorn's server with a TLS handshake deadline, and returning on SIGINT/SIGTERM."""

    def __init__(self, config: uvicorn.Config, handshake_timeout: float) -> None:
        super().__init__(config)
        self._handshake_timeout = handshake_timeout

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn passes no handshake timeout to asyncio (whose default is 60 s), so a client that
        # connects and never finishes TLS would hold its connection that long: listen here instead.
        await super().startup(sockets=[])
        config = self.config

        def create_protocol(_loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state, _loop=_loop
            )

        loop = asyncio.get_running_loop()
        for sock in sockets or []:
            server = await loop.create_server(
                create_protocol,
                sock=sock,
                ssl=config.ssl,
                backlog=config.backlog,
                ssl_handshake_timeout=self._handshake_timeout if config.ssl else None,
            )
            self.servers.append(server)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # Shut down gracefully and return (so runs drain and the store closes) instead of
        # re-raising the signal once uvicorn stops.
        self._captured_signals.clear()


def _announce(lines: list[str], json_log: bool) -> None:
    """The start-up banner on stderr, whatever the log level: plain lines, or with the JSON log
    records through the log's handlers (one object per line there too)."""
    if not json_log:
        sys.stderr.write("".join(f"{line}\n" for line in lines))
        sys.stderr.flush()
        return
    for line in lines:
        _log.handle(_log.makeRecord(_log.name, logging.INFO, __file__, 0, "%s", (line,), None))


class _QuietServer(uvicorn.Server):
    """A second server in the same loop: the main one owns the signals and stops this one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _metrics_server(metrics: Metrics, options: HttpOptions) -> tuple[uvicorn.Server, socket.socket]:
    """The ``--metrics-port`` server (``/metrics`` only, no token) and its bound socket."""
    assert options.metrics_port is not None
    sock = _bind(options.metrics_host, options.metrics_port)
    config = uvicorn.Config(
        metrics_only_app(metrics),
        ws="none",
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_keep_alive=_KEEP_ALIVE_SECONDS,
    )
    return _QuietServer(config), sock


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if host == "localhost":
        host = "127.0.0.1"
    # proto must be TCP for asyncio to disable Nagle on accepted connections (else every
    # response written in two parts waits ~40 ms for the client's delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise PilotError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc})",
            hint="Pick another --port, or stop whatever listens there.",
        ) from None
    sock.setblocking(False)
    return sock


def _tls_context(
    cert: Path, key: Path
) -> Callable[[uvicorn.Config, Callable[[], ssl.SSLContext]], ssl.SSLContext]:
    def factory(_config: uvicorn.Config, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert, key)
        return context

    return factory


async def serve_http(
    app: PilotApp,
    options: HttpOptions,
    tokens: Tokens,
    roles: RoleBook,
    *,
    service_account: str,
    oauth: Callable[[str], Awaitable[JwtVerifier | None]] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM, then let runs still going finish; the caller closes ``app``.
    ``oauth`` builds the JWT verifier for this server's public URL (it is known once bound)."""
    sock = _bind(options.host, options.port)
    port = int(sock.getsockname()[1])
    try:
        jwt = await oauth(public_base(options, port, app.settings.public_url)) if oauth else None
    except BaseException:
        sock.close()
        raise
    metrics = Metrics(app)
    asgi = build_http_app(app, options, port, tokens, roles, jwt, metrics)
    await self_check(asgi, options.allowed_hosts(port)[1], resource_metadata_url(jwt.config) if jwt else "")
    settings = app.settings
    limits = ConnectionLimits(
        header_timeout=settings.http_header_timeout,
        body_timeout=settings.http_body_timeout,
        per_client=settings.http_max_connections_per_client,
    )
    config = uvicorn.Config(
        asgi,
        http=guarded_protocol(limits),
        ws="none",
        timeout_keep_alive=_KEEP_ALIVE_SECONDS,
        lifespan="on",
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=_GRACEFUL_SECONDS,
        ssl_certfile=options.cert if options.transport == "https" else None,
        ssl_keyfile=options.key if options.transport == "https" else None,
        ssl_context_factory=(
            _tls_context(options.cert, options.key)
            if options.transport == "https" and options.cert and options.key
            else None
        ),
    )
    scraper = _metrics_server(metrics, options) if options.metrics_port is not None else None
    names = ", ".join(options.names())
    who = f" (a static one, or an OAuth access token from {jwt.config.issuer})" if jwt else ""
    url = f"{options.scheme}://{_host_form(options.names()[0])}:{port}/mcp"
    dispatch = (
        f"steps run in the skills' servers as {service_account}"
        if app.dispatcher is not None
        else "steps are handed back to the callers"
    )
    console = f"{url.removesuffix('/mcp')}{CONSOLE_PATH}"
    lines = [
        f"vmware-pilot MCP server: {url} (listening on {_host_form(options.host)}:{port}; names: {names}). "
        f"Every caller needs a bearer token{who}; {dispatch}. Web console: {console}"
    ]
    if scraper is not None:
        where = f"{_host_form(options.metrics_host)}:{scraper[1].getsockname()[1]}"
        lines.append(
            f"vmware-pilot metrics: http://{where}/metrics (no token; keep it on a private network)."
        )
    _announce(lines, json_log=app.settings.log_format == "json")
    scraping = asyncio.create_task(scraper[0].serve(sockets=[scraper[1]])) if scraper else None
    try:
        await _Server(config, handshake_timeout=limits.header_timeout).serve(sockets=[sock])
    finally:
        with contextlib.suppress(OSError):
            sock.close()
        if scraper is not None and scraping is not None:
            scraper[0].should_exit = True
            with contextlib.suppress(Exception):
                await scraping
            with contextlib.suppress(OSError):
                scraper[1].close()
        metrics.close()
        await app.service.drain()
    _log.info("vmware-pilot MCP server on port %d stopped", port)
