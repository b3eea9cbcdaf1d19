"""What every operator command shares: the app, the caller, output, confirmation and exit codes.

Exit codes: 0 done (or nothing to do), 1 refused (a rule, the workflow's state, or the person
said no), 2 usage (bad arguments, unknown workflow id, invalid settings). Results are printed
readably, or as JSON on stdout with ``--json`` (then everything meant for the person goes to
stderr). Secrets are masked in everything printed, and control characters are shown as escapes
(``cli.terminal``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import ValidationError

from vmware_pilot.cli.terminal import ask, console, json_text, say
from vmware_pilot.config import Settings, settings_problem
from vmware_pilot.domain.actor import Actor
from vmware_pilot.errors import InvalidInput, PilotError, WorkflowNotFound
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
]

T = TypeVar("T")

EXIT_REFUSED = 1
EXIT_USAGE = 2

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


def _settings(dispatch: bool = False) -> Settings:
    try:
        settings = Settings()
    except (ValidationError, ValueError) as exc:  # pydantic-settings raises ValueError on bad JSON
        say(f"error: invalid settings: {settings_problem(exc)}", err=True)
        say("hint: fix the VMWARE_PILOT_* environment variables (README, Settings).", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if dispatch:
        settings = settings.model_copy(update={"dispatch": "stdio"})
    return settings


@contextmanager
def open_app(dispatch: bool = False) -> Iterator[PilotApp]:
    """The same engine, rules and store a server on this home uses (safe alongside a running server)."""
    from vmware_pilot.app import build_app

    try:
        app = build_app(_settings(dispatch))
    except PilotError as exc:
        refuse(exc.message, exc.hint or "Check VMWARE_PILOT_HOME and VMWARE_PILOT_DATABASE_URL.", EXIT_USAGE)
    try:
        yield app
    finally:
        app.close()


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
    say(f"error: {message}", err=True)
    if hint:
        say(f"hint: {hint}", err=True)
    raise typer.Exit(code)


def fail(exc: PilotError, json_mode: bool = False) -> NoReturn:
    """Print a refusal (its payload in --json mode) and exit 1, or 2 for bad input / unknown id."""
    code = EXIT_USAGE if isinstance(exc, InvalidInput | WorkflowNotFound) else EXIT_REFUSED
    hint = exc.hint
    if isinstance(exc, WorkflowNotFound):
        hint = "`vmware-pilot workflows` lists the workflows and their ids."
    if json_mode:
        sys.stdout.write(json_text(redact(exc.payload(), scrub_text=False)) + "\n")
    refuse(exc.message, hint, code)


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
