"""`vmware-pilot audit verify|export`: check and export the tamper-evident audit trail."""

from __future__ import annotations

import typer

__all__ = ["app"]

app = typer.Typer(help="Verify or export the audit trail.", no_args_is_help=True)
