"""Entry points of `vmware-pilot` and `vmware-pilot-mcp`: route, then import only what runs.

`version` (and `--version`), the top-level help (`--help`, `-h`, or no arguments: drawn by ``cli.index``) and a
plain stdio start (`mcp` with at most ``--transport stdio`` and ``--dispatch``:
what an MCP client runs for every session) are served without typer or rich (``cli.stdio``);
every other form goes to the typer app in ``cli.commands``, which owns help and refusals. The
app is also reachable as ``vmware_pilot.cli.main.app``.
"""

from __future__ import annotations

import sys

from vmware_pilot import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing, which `version` and help skip
if TYPE_CHECKING:
    from typing import Any

__all__ = ["main", "mcp_main"]  # and `app`, imported on first use (__getattr__)


def __getattr__(name: str) -> Any:
    if name == "app":
        from vmware_pilot.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _serve_plain(args: list[str]) -> None:
    """Serve and exit when ``args`` are a plain stdio start; return otherwise."""
    from vmware_pilot.cli import stdio

    code = stdio.main(args)
    if code is not None:
        sys.exit(code)


def _top_level_help(given: bool) -> None:
    """Print the top-level help and exit: asked for, on stdout (0); no command given, on stderr (2)."""
    from vmware_pilot.cli.index import top_level_help

    if given:
        sys.stdout.write(top_level_help())
        sys.exit(0)
    sys.stderr.write(top_level_help())
    sys.exit(2)


def main() -> None:
    args = sys.argv[1:]
    if args in (["version"], ["--version"]):
        print(f"vmware-pilot {__version__}")
        return
    if args in ([], ["--help"], ["-h"]):
        _top_level_help(given=bool(args))
    if args[:1] == ["mcp"]:
        _serve_plain(args[1:])
    from vmware_pilot.cli.commands import app

    app()


def mcp_main() -> None:
    """`vmware-pilot-mcp [options]`: the MCP server on stdio, same options as `vmware-pilot mcp`."""
    _serve_plain(sys.argv[1:])
    from vmware_pilot.cli.commands import server_only

    server_only()(sys.argv[1:], prog_name="vmware-pilot-mcp")
