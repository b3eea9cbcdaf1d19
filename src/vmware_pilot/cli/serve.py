"""`vmware-pilot mcp`: serve the 13 tools to an MCP client over stdio (or HTTPS: cli/network.py).

This is the command's full form (options, help, refusals); a plain stdio start skips the command
line framework and runs ``cli.stdio`` directly, which this command also serves through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from vmware_pilot.cli.refusals import exit_code, report
from vmware_pilot.cli.stdio import configure_logging, load_settings, serve
from vmware_pilot.errors import InvalidInput, PilotError

__all__ = ["configure_logging", "mcp", "refused"]

_TRANSPORTS = ("stdio", "https", "http")


def refused(exc: PilotError) -> typer.Exit:
    """Say why the server does not start (the server's form) and the exit code to leave with."""
    report(exc.message, exc.hint, server=True)
    return typer.Exit(exit_code(exc))


def mcp(
    transport: Annotated[
        str,
        typer.Option(
            help="stdio (the MCP client starts this command), https, or http (loopback only, for a "
            "TLS-terminating proxy). Network transports need a token: `vmware-pilot token create`."
        ),
    ] = "stdio",
    dispatch: Annotated[
        bool,
        typer.Option(
            "--dispatch",
            help="Let Pilot run each step in that skill's own MCP server instead of handing it back.",
        ),
    ] = False,
    host: Annotated[str, typer.Option(help="https/http: address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="https/http: port to listen on (0 picks a free one).")] = 8443,
    cert: Annotated[Path | None, typer.Option(help="https: PEM certificate file.")] = None,
    key: Annotated[Path | None, typer.Option(help="https: PEM private key file.")] = None,
    public_name: Annotated[
        str, typer.Option(help="https/http: comma-separated names clients use (checked in Host and Origin).")
    ] = "",
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="https/http: also serve /metrics without a token on this port (for a Prometheus on a "
            "private network; on the main port /metrics needs the role admin or metrics)."
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="https/http: address the --metrics-port listens on.")
    ] = "127.0.0.1",
    expose: Annotated[
        str | None,
        typer.Option(
            help="Which tools to offer: all (default) or read (the four read tools). Hidden tools are "
            "neither listed nor callable; not authorization: roles still decide. Default: "
            "VMWARE_PILOT_MCP_EXPOSE."
        ),
    ] = None,
    allow_write: Annotated[
        str | None,
        typer.Option(
            help="With --expose read: comma-separated write tools to offer as well. Default: "
            "VMWARE_PILOT_MCP_ALLOW_WRITE (read only when neither flag is given)."
        ),
    ] = None,
) -> None:
    """Serve the MCP tools: on stdio (configure this command in your MCP client) or over HTTPS."""
    kind = transport.strip().lower()
    if kind not in _TRANSPORTS:
        raise refused(
            InvalidInput(
                f"transport {transport!r} is not available",
                hint="Use --transport stdio (the default; the MCP client starts this command), https or http.",
            )
        )
    from vmware_pilot.cli.network import http_options, serve_network

    network = http_options(kind, host, port, cert, key, public_name, metrics_port, metrics_host)
    try:
        settings = load_settings(dispatch, expose, allow_write)
    except PilotError as exc:
        raise refused(exc) from None
    if network is not None:
        serve_network(settings, network)
        return
    code = serve(settings)
    if code:
        raise typer.Exit(code)
