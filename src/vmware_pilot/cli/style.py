"""One help style for every command, and "did you mean" for a mistyped subcommand.

Every help page is click's plain text, the same layout as the top-level help that ``cli.index``
draws without typer (rich's boxed panels would differ from it, and would show a ``<bool>`` type
on flags that take no value). A group answers a mistyped command with the nearest ones.
"""

from __future__ import annotations

import difflib
from typing import Any

import typer
from typer.core import TyperGroup

__all__ = ["SuggestingGroup", "group", "single"]


class SuggestingGroup(TyperGroup):
    """A group whose "No such command" names the nearest commands."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name = str(args[0]) if args else ""
        known = self.list_commands(ctx)
        if name and not name.startswith("-") and name not in known and not ctx.resilient_parsing:
            near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
            if near:
                guesses = " or ".join(repr(n) for n in near)
                ctx.fail(f"No such command {name!r}. Did you mean {guesses}?")
        return super().resolve_command(ctx, args)


def group(help: str | None = None, *, no_args_is_help: bool = True) -> typer.Typer:
    """A command group (``vmware-pilot token``, ``catalog``…) in the common style; without
    ``help``, its callback's docstring is its help."""
    app = typer.Typer(
        no_args_is_help=no_args_is_help, add_completion=False, cls=SuggestingGroup, rich_markup_mode=None
    )
    if help is not None:  # an explicit None would hide the callback's docstring
        app.info.help = help
    return app


def single() -> typer.Typer:
    """The app a single command is registered on, in the common style."""
    return typer.Typer(add_completion=False, rich_markup_mode=None)
