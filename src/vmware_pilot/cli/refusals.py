"""How every command refuses: one exit-code mapping, one settings loader, one way to say why.

Exit codes (README, "Operators (CLI)"): ``0`` done, ``1`` refused (a rule, the workflow's state, an
outside service, or the person said no), ``2`` usage (bad arguments, an unknown workflow id, or
settings that cannot be used). ``exit_code`` maps a ``PilotError`` to one of them by its class:
``InvalidInput``, ``WorkflowNotFound`` and ``StartupRefused`` are usage, every other refusal is
``1``. A command that cannot start (invalid settings, or a home, database or file they name
that cannot be opened) raises ``StartupRefused``: ``load_settings`` and ``starting`` make it, so
the same start-up failure exits ``2`` from every command, the server included.

A refusal is printed on stderr as ``error: …`` and ``hint: …``; the server (``vmware-pilot mcp``,
whose stderr an MCP client shows as its log) prints ``vmware-pilot mcp: …`` and an indented hint.
Printed text goes through ``cli.escapes.visible``. This module imports neither typer nor rich (the
stdio server's start-up uses it) and loads ``config`` only when settings are read.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeVar

from vmware_pilot.cli.escapes import visible
from vmware_pilot.errors import InvalidInput, PilotError, StartupRefused, WorkflowNotFound

if TYPE_CHECKING:
    from vmware_pilot.config import Settings

__all__ = [
    "EXIT_DONE",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "SETTINGS_HINT",
    "exit_code",
    "load_settings",
    "report",
    "starting",
]

T = TypeVar("T")

EXIT_DONE: Final = 0
EXIT_REFUSED: Final = 1
EXIT_USAGE: Final = 2

SETTINGS_HINT: Final = "fix the VMWARE_PILOT_* environment variables (docs/settings.md lists them)."


def exit_code(exc: PilotError) -> int:
    """The exit code of a command that ended with ``exc``."""
    if isinstance(exc, InvalidInput | WorkflowNotFound | StartupRefused):
        return EXIT_USAGE
    return EXIT_REFUSED


def load_settings(dispatch: bool = False, *, server: bool = False, policy: bool = True) -> Settings:
    """The settings from the environment (``dispatch``: ``--dispatch`` forces stdio dispatch);
    raises ``StartupRefused`` naming each invalid variable, never echoing a value whole. A
    ``VMWARE_PILOT_*`` name that is no setting is warned about on stderr (with the nearest known
    one), not refused (``server``: in the form of ``vmware-pilot mcp``). ``policy``: refuse a
    policy file that cannot be used (every problem by line); the database's is checked when the
    app is built."""
    from pydantic import ValidationError

    from vmware_pilot.config import Settings, settings_problem, unknown_settings

    for name, near in unknown_settings():
        guess = f"; did you mean {near}?" if near else " (docs/settings.md lists them)"
        warning = f"warning: {name} is not a vmware-pilot setting and is ignored{guess}"
        print(visible(("vmware-pilot mcp: " if server else "") + warning), file=sys.stderr)
    try:
        settings = Settings()
    except (ValidationError, ValueError) as exc:  # pydantic-settings raises ValueError on bad JSON
        raise StartupRefused(f"invalid settings: {settings_problem(exc)}", hint=SETTINGS_HINT) from None
    if policy and not settings.database_url:  # the database's policy is checked when the app is built
        path = settings.resolved_policies_path
        if settings.policies and not path.is_file():
            raise StartupRefused(
                f"VMWARE_PILOT_POLICIES names {path}, which is no file, so no policy could be enforced",
                hint="name the policy file that exists (docs/policies.md), or unset VMWARE_PILOT_POLICIES "
                "to use policies.yaml in the pilot home (none there means no policy).",
            )
        if path.is_file():  # no policies.yaml in the home is no policy: nothing to read or import
            from vmware_pilot.policy.source import PolicySource

            PolicySource(path).check_at_start()
    return settings.model_copy(update={"dispatch": "stdio"}) if dispatch else settings


def starting(open_: Callable[[], T], hint: str = "") -> T:
    """``open_()`` (the app, the store, the token file a command needs to start); its refusal
    becomes ``StartupRefused`` with the same message, and ``hint`` when it gave none."""
    try:
        return open_()
    except StartupRefused:
        raise
    except PilotError as exc:
        raise StartupRefused(exc.message, hint=exc.hint or hint) from exc


def report(message: str, hint: str = "", *, server: bool = False) -> None:
    """Say why on stderr (``server``: in the form of ``vmware-pilot mcp``)."""
    first, second = ("vmware-pilot mcp: ", "  ") if server else ("error: ", "hint: ")
    print(visible(first + message), file=sys.stderr)
    if hint:
        print(visible(second + hint), file=sys.stderr)
