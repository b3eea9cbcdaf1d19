"""`vmware-pilot token create|list|revoke|set-role|roles`: who may call the network transport.

``create`` prints the secret on stdout, once (a note goes to stderr), so a script can capture it.
Only its hash is kept. Changes apply to a running server on its next request. Errors exit 2: a
name, a role or the token file is the operator's to fix (a usage error).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from vmware_pilot.cli import common
from vmware_pilot.cli.common import EXIT_USAGE, JsonOption, Output, refuse
from vmware_pilot.cli.network import role_book, token_store
from vmware_pilot.cli.style import group
from vmware_pilot.cli.terminal import json_text, say
from vmware_pilot.config import Settings
from vmware_pilot.errors import PilotError
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import Tokens

__all__ = ["app"]

app = group("Bearer tokens and roles for `vmware-pilot mcp --transport https|http`.")

Name = Annotated[str, typer.Argument(help="Token name: who the caller is in workflows and the audit trail.")]
RoleArg = Annotated[str, typer.Argument(help="admin, reader, or a role from roles.yaml in the pilot home.")]


@contextmanager
def _tokens(settings: Settings) -> Iterator[Tokens]:
    """The tokens file, or with a database URL the database's token rows (closed after the command);
    raises ``PilotError`` when that database cannot be opened."""
    from vmware_pilot.app import shared_store

    store = shared_store(settings)
    try:
        yield token_store(settings, store)
    finally:
        if store is not None:
            store.close()


def _check_role(book: RoleBook, role: str) -> None:
    listing = book.listing()
    if role in listing.roles:
        return
    known = ", ".join(listing.roles)
    if listing.problem:
        refuse(f"role {role!r} is not usable: {listing.problem}", f"Usable roles now: {known}.", EXIT_USAGE)
    refuse(f"role {role!r} is not defined", f"Use one of {known}, or define it in {book.path}.", EXIT_USAGE)


@app.command()
def create(
    name: Name,
    role: Annotated[
        str,
        typer.Option(help="admin (every tool, approves anything), reader (the four read tools) or custom."),
    ] = "admin",
    json_output: JsonOption = False,
) -> None:
    """Create a token and print its secret once. Clients send `Authorization: Bearer <secret>`."""
    settings = common.settings()
    _check_role(role_book(settings), role)
    try:
        with _tokens(settings) as tokens:
            secret = tokens.create(name, role)
    except PilotError as exc:
        refuse(exc.message, exc.hint, EXIT_USAGE)
    if json_output:  # the secret is the result: printed as it is, this once
        sys.stdout.write(json_text({"name": name, "role": role, "secret": secret}) + "\n")
    else:
        say(secret)
    say(
        f"Token {name!r} created with role {role}. The secret above is shown only now; store it in the "
        "client's configuration. A running server accepts it from its next request.",
        err=True,
    )


@app.command(name="list")
def list_tokens(json_output: JsonOption = False) -> None:
    """Token names with their role and creation time (never the secrets)."""
    settings = common.settings()
    try:
        with _tokens(settings) as tokens:
            entries = tokens.entries()
    except PilotError as exc:
        refuse(exc.message, exc.hint, EXIT_USAGE)
    usable = role_book(settings).listing().roles
    if json_output:
        listed = [
            {"name": e.name, "role": e.role, "created_at": e.created_at, "role_usable": e.role in usable}
            for e in entries
        ]
        Output(True).result(listed)
        return
    if not entries:
        say("No tokens. Create one with `vmware-pilot token create NAME --role ROLE`.")
        return
    for entry in entries:
        note = "" if entry.role in usable else "  (role not usable: its calls are refused)"
        say(entry.name, entry.role, f"{entry.created_at}{note}")


@app.command()
def revoke(name: Name, json_output: JsonOption = False) -> None:
    """Delete a token; a running server refuses it from its next request (401)."""
    try:
        with _tokens(common.settings()) as tokens:
            tokens.revoke(name)
    except PilotError as exc:
        refuse(exc.message, exc.hint, EXIT_USAGE)
    Output(json_output).result({"name": name, "revoked": True})
    say(f"Token {name!r} revoked.", err=json_output)


@app.command(name="set-role")
def set_role(name: Name, role: RoleArg, json_output: JsonOption = False) -> None:
    """Give a token another role; applies from the server's next request."""
    settings = common.settings()
    _check_role(role_book(settings), role)
    try:
        with _tokens(settings) as tokens:
            tokens.set_role(name, role)
    except PilotError as exc:
        refuse(exc.message, exc.hint, EXIT_USAGE)
    Output(json_output).result({"name": name, "role": role})
    say(f"Token {name!r} now has role {role}.", err=json_output)


@app.command()
def roles(json_output: JsonOption = False) -> None:
    """The roles tokens can have and the groups mapped to roles for OAuth callers; exit 1 when the
    roles file is broken (custom roles and the group mapping are then off)."""
    book = role_book(common.settings())
    listing = book.listing()
    if json_output:
        Output(True).result(
            {
                "roles": [
                    {"name": r.name, "approve": r.approve, "tools": list(r.visible(TOOL_NAMES))}
                    for r in listing.roles.values()
                ],
                "groups": listing.groups,
                "problem": listing.problem or None,
            }
        )
        if listing.problem:
            say(f"error: custom roles are off: {listing.problem}", err=True)
            raise typer.Exit(1)
        return
    for role in listing.roles.values():
        visible = role.visible(TOOL_NAMES)
        tools = "all tools" if len(visible) == len(TOOL_NAMES) else ", ".join(visible)
        say(role.name, f"approve: {role.approve}", tools)
    for group_name, target in listing.groups.items():
        say(f"group {group_name}", f"→ {target or 'no role'}")
    if listing.problem:
        say(f"error: custom roles are off: {listing.problem}", err=True)
        raise typer.Exit(1)
