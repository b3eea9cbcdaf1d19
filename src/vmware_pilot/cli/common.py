"""What every operator command shares: the app, the caller, output, confirmation and exit codes.

Exit codes: 0 done (or nothing to do), 1 refused (a rule, the workflow's state, or the person
said no), 2 usage (bad arguments, unknown workflow id, invalid settings); ``cli.refusals`` maps a
``PilotError`` to its code and loads the settings, for every command. Results are printed
readably, or as JSON on stdout with ``--json`` (then everything meant for the person goes to
stderr). Secrets are masked in everything printed, and control characters are shown as escapes
(``cli.terminal``).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from vmware_pilot.cli.refusals import EXIT_REFUSED, EXIT_USAGE, exit_code, load_settings, report, starting
from vmware_pilot.cli.terminal import ask, console, json_text, say
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import PilotError, TemplateError, WorkflowNotFound
from vmware_pilot.safety.redaction import redact

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp

__all__ = [
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "JsonOption",
    "Output",
    "YesOption",
    "confirm",
    "fail",
    "open_app",
    "operator",
    "refuse",
    "run_async",
    "settings",
]

T = TypeVar("T")

JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (you already decided).")
]


class Output:
    """Where to print: a rich console for the person (stderr in --json mode) and JSON on stdout."""

    def __init__(self, json_mode: bool) -> None:
        self.json_mode = json_mode
        self.console = console(stderr=json_mode)

    def show(self, *renderables: Any) -> None:
        self.console.print(*renderables)

    def result(self, data: Any) -> None:
        """The command's result: JSON on stdout in --json mode (secrets masked)."""
        if self.json_mode:
            sys.stdout.write(json_text(redact(data, scrub_text=False)) + "\n")


def operator() -> Actor:
    """The person at the terminal: the OS user."""
    return Actor.os_user()


def settings(dispatch: bool = False) -> Settings:
    """The settings from the environment, or exit 2 saying which variable is wrong."""
    try:
        return load_settings(dispatch)
    except PilotError as exc:
        fail(exc)


@contextmanager
def open_app(dispatch: bool = False) -> Iterator[PilotApp]:
    """The same engine, rules and store a server on this home uses (safe alongside a running server)."""
    from vmware_pilot.app import build_app

    chosen = settings(dispatch)
    try:
        app = starting(lambda: build_app(chosen), "Check VMWARE_PILOT_HOME and VMWARE_PILOT_DATABASE_URL.")
    except PilotError as exc:
        fail(exc)
    if app.dispatcher is not None:
        _refresh_catalog(app)
    try:
        yield app
    finally:
        app.close()


def _refresh_catalog(app: PilotApp) -> None:
    """Before a dispatching command: the skill catalog brought up to date with the installed skills
    when its cache is missing or older than them, said on stderr (a failure too; the command goes on
    with the catalog it has)."""
    from vmware_pilot.app import refresh_stale_catalog

    try:
        refreshed = refresh_stale_catalog(app.settings, app.sql)
    except PilotError as exc:
        report(f"the skill catalog was not refreshed: {exc.message}", exc.hint)
        return
    if refreshed is not None:
        found = [r.skill for r in refreshed.results if r.status == "discovered"]
        say(
            f"Refreshed the skill catalog from the installed skills ({', '.join(found) or 'none found'}).",
            err=True,
        )


def run_async(app: PilotApp, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to the end, then close the skill sessions a dispatching run opened."""

    async def main() -> T:
        try:
            return await work
        finally:
            await app.service.drain()
            if app.dispatcher is not None:
                await app.dispatcher.aclose()

    return asyncio.run(main())


def refuse(message: str, hint: str = "", code: int = EXIT_REFUSED) -> NoReturn:
    """Print why (and what to do) on stderr and exit with ``code``."""
    report(message, hint)
    raise typer.Exit(code)


# The engine words its refusals for MCP clients (tool names, calls); a person at the terminal is
# told the command instead.
_TOOL_CALL = re.compile(r"create_workflow_from_template\('([^']*)'(?:, \.\.\.)?\)")


def _cli_words(exc: PilotError) -> tuple[str, str]:
    """The refusal's message and hint in the words of the command line."""
    message, hint = exc.message, exc.hint
    if isinstance(exc, WorkflowNotFound):
        hint = "`vmware-pilot workflows` lists the workflows and their ids."
    elif isinstance(exc, TemplateError) and message.startswith("Unknown"):
        hint = "`vmware-pilot templates` lists the templates and their parameters."
    message = _TOOL_CALL.sub(r"template '\1'", message)
    hint = hint.replace(" and call create_workflow_from_template again", " (-p NAME=VALUE) and run it again")
    return message, hint


def fail(exc: PilotError, json_mode: bool = False, hint: str = "") -> NoReturn:
    """Print a refusal (its payload in --json mode) and exit with ``exit_code(exc)``; ``hint``
    replaces the refusal's own hint. The printed words are the command line's (an unknown id gets
    the command that lists the ids, not the MCP tool); the --json payload is the tools' own."""
    message, own_hint = _cli_words(exc)
    if json_mode:
        sys.stdout.write(json_text(redact(exc.payload(), scrub_text=False)) + "\n")
    refuse(message, hint or own_hint, exit_code(exc))


def confirm(question: str, yes: bool, json_mode: bool = False, hint: str = "") -> None:
    """Ask the person; ``--yes`` answers for them. No terminal and no ``--yes``: refuse with ``hint``."""
    if yes:
        return
    if not sys.stdin.isatty():
        refuse(
            "this needs a person's confirmation and there is no terminal to ask on; nothing was changed",
            hint or "Run it in a terminal, or add --yes if you already decided.",
        )
    if not ask(question, err=json_mode):
        refuse("not confirmed; nothing was changed")
