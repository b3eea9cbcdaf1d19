"""The `vmware-pilot` command: one typer app; each command group lives in its own module."""

from __future__ import annotations

import sys

import typer

from vmware_pilot import __version__
from vmware_pilot.cli import audit, catalog, demo, operator, run, serve, tokens

__all__ = ["app", "main", "mcp_main"]

app = typer.Typer(
    name="vmware-pilot",
    help="Plan, review, approve, run and roll back multi-step VMware operations.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(audit.app, name="audit")
app.add_typer(catalog.app, name="catalog")
app.add_typer(tokens.app, name="token")
app.command(name="mcp")(serve.mcp)
app.command(name="demo")(demo.demo)
for _name in ("workflows", "status", "review", "templates", "approve", "reject", "cancel", "rollback"):
    app.command(name=_name)(getattr(operator, _name))
app.command(name="run")(run.run)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(f"vmware-pilot {__version__}")


def main() -> None:
    app()


def mcp_main() -> None:
    """`vmware-pilot-mcp [options]`: the MCP server on stdio, same options as `vmware-pilot mcp`."""
    server_only = typer.Typer(add_completion=False)
    server_only.command()(serve.mcp)  # a single command: its options are the program's own
    server_only(sys.argv[1:], prog_name="vmware-pilot-mcp")
