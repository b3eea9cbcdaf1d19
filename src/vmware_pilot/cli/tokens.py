"""`vmware-pilot token create|list|revoke|set-role|roles`: who may call the network transport.

``create`` prints the secret on stdout, once (a note goes to stderr), so a script can capture it.
Only its hash is kept. Changes apply to a running server on its next request. Errors exit 2.
"""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError

from vmware_pilot.cli.network import role_book, token_store
from vmware_pilot.cli.terminal import say
from vmware_pilot.config import Settings, settings_problem
from vmware_pilot.errors import PilotError
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.roles import RoleBook

__all__ = ["app"]

app = typer.Typer(
    help="Bearer tokens and roles for `vmware-pilot mcp --transport https|http`.", no_args_is_help=True
)

Name = Annotated[str, typer.Argument(help="Token name: who the caller is in workflows and the audit trail.")]
RoleArg = Annotated[str, typer.Argument(help="admin, reader, or a role from roles.yaml in the pilot home.")]


def _fail(message: str, hint: str = "") -> typer.Exit:
    say(f"error: {message}", err=True)
    if hint:
        say(f"hint: {hint}", err=True)
    return typer.Exit(2)


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        raise _fail(
            f"invalid settings: {settings_problem(exc)}",
            "Fix the VMWARE_PILOT_* environment variables (README, Settings).",
        ) from None


def _check_role(book: RoleBook, role: str) -> None:
    listing = book.listing()
    if role in listing.roles:
        return
    known = ", ".join(listing.roles)
    if listing.problem:
        raise _fail(f"role {role!r} is not usable: {listing.problem}", f"Usable roles now: {known}.")
    raise _fail(f"role {role!r} is not defined", f"Use one of {known}, or define it in {book.path}.")


@app.command()
def create(
    name: Name,
    role: Annotated[
        str,
        typer.Option(help="admin (every tool, approves anything), reader (the four read tools) or custom."),
    ] = "admin",
) -> None:
    """Create a token and print its secret once. Clients send `Authorization: Bearer <secret>`."""
    settings = _settings()
    _check_role(role_book(settings), role)
    try:
        secret = token_store(settings).create(name, role)
    except PilotError as exc:
        raise _fail(exc.message, exc.hint) from None
    say(secret)
    say(
        f"Token {name!r} created with role {role}. The secret above is shown only now; store it in the "
        "client's configuration. A running server accepts it from its next request.",
        err=True,
    )


@app.command(name="list")
def list_tokens() -> None:
    """Token names with their role and creation time (never the secrets)."""
    settings = _settings()
    try:
        entries = token_store(settings).entries()
    except PilotError as exc:
        raise _fail(exc.message, exc.hint) from None
    if not entries:
        say("No tokens. Create one with `vmware-pilot token create NAME --role ROLE`.")
        return
    usable = role_book(settings).listing().roles
    for entry in entries:
        note = "" if entry.role in usable else "  (role not usable: its calls are refused)"
        say(entry.name, entry.role, f"{entry.created_at}{note}")


@app.command()
def revoke(name: Name) -> None:
    """Delete a token; a running server refuses it from its next request (401)."""
    try:
        token_store(_settings()).revoke(name)
    except PilotError as exc:
        raise _fail(exc.message, exc.hint) from None
    say(f"Token {name!r} revoked.")


@app.command(name="set-role")
def set_role(name: Name, role: RoleArg) -> None:
    """Give a token another role; applies from the server's next request."""
    settings = _settings()
    _check_role(role_book(settings), role)
    try:
        token_store(settings).set_role(name, role)
    except PilotError as exc:
        raise _fail(exc.message, exc.hint) from None
    say(f"Token {name!r} now has role {role}.")


@app.command()
def roles() -> None:
    """The roles tokens can have and the groups mapped to roles for OAuth callers; exit 1 when the
    roles file is broken (custom roles and the group mapping are then off)."""
    book = role_book(_settings())
    listing = book.listing()
    for role in listing.roles.values():
        visible = role.visible(TOOL_NAMES)
        tools = "all tools" if len(visible) == len(TOOL_NAMES) else ", ".join(visible)
        say(role.name, f"approve: {role.approve}", tools)
    for group, target in listing.groups.items():
        say(f"group {group}", f"→ {target or 'no role'}")
    if listing.problem:
        say(f"error: custom roles are off: {listing.problem}", err=True)
        raise typer.Exit(1)
