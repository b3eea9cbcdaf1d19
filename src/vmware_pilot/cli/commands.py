"""The `vmware-pilot` typer app, whose commands are imported only when they are needed.

The commands live in their own modules and are listed in ``cli.index.COMMANDS`` with their one-line
help, so the group's help imports none of them; a command's module is imported when the command
runs or shows its own help. (``cli.main`` routes the forms that need no typer at all.)
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from vmware_pilot import __version__
from vmware_pilot.cli.index import COMMANDS, EPILOG, SUMMARY, VERSION_HELP, Lazy
from vmware_pilot.cli.style import SuggestingGroup, single

__all__ = ["COMMANDS", "Lazy", "LazyGroup", "app", "load_command", "server_only", "version"]


def load_command(name: str) -> Any:
    """The real command ``name`` (its module imported now): a click command or group."""
    where = COMMANDS[name]
    target = importlib.import_module(f"vmware_pilot.cli.{where.module}")
    obj: Any = getattr(target, where.attr)
    command: Any
    if where.group:
        command = typer.main.get_group(obj)
    else:
        app = single()
        app.command(name=name)(obj)
        command = typer.main.get_command(app)
    command.name = name
    return command


class LazyGroup(SuggestingGroup):
    """A group that imports a command's module only when the command itself is needed.

    While the group's own help is drawn it answers with stand-ins that carry only the summary,
    which is all the help shows of a command."""

    describing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if self.describing:
            summary = COMMANDS[cmd_name].summary
            return TyperCommand(cmd_name, help=summary, short_help=summary)
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.describing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.describing = False


# The top level's help and usage errors are plain text: drawing them with rich would import
# rich and markdown-it, several times the cost of the rest of `vmware-pilot --help`. Each
# command's own help is drawn as before.
app = typer.Typer(
    name="vmware-pilot",
    help=SUMMARY,
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    cls=LazyGroup,
    rich_markup_mode=None,
)


def version() -> None:
    """Print the version."""
    print(f"vmware-pilot {__version__}")


def _print_version(given: bool) -> None:
    if given:
        version()
        raise typer.Exit()


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option("--version", help=VERSION_HELP, is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    """Plan, review, approve, run and roll back multi-step VMware operations."""


def server_only() -> typer.Typer:
    """`vmware-pilot-mcp`: the `mcp` command as a program of its own (its options are the program's)."""
    from vmware_pilot.cli import serve

    app = single()
    app.command()(serve.mcp)
    return app
