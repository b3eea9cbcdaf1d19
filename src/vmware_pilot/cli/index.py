"""The `vmware-pilot` commands, where each lives and its one-line help, and the top-level help
drawn from them: without typer, click or rich, so `vmware-pilot --help` starts in a few
milliseconds.

``cli.commands`` builds the typer app from ``COMMANDS``; a test checks that the help drawn here is
the help that app draws, and that each summary is its command's own help, so neither can drift.
"""

from __future__ import annotations

import os
import sys
import textwrap

__all__ = ["COMMANDS", "EPILOG", "PROG", "SUMMARY", "VERSION_HELP", "Lazy", "top_level_help"]

PROG = "vmware-pilot"
SUMMARY = "Plan, review, approve, run and roll back multi-step VMware operations."
EPILOG = f"Run `{PROG} COMMAND --help` for a command's own options and help."
VERSION_HELP = "Print the version and exit."


class Lazy:
    """Where a command lives (``cli.<module>.<attr>``: a function, or a typer app for a group).

    A plain class: ``typing.NamedTuple`` would import typing, a third of what `--help` costs."""

    __slots__ = ("attr", "group", "module", "summary")

    def __init__(self, module: str, attr: str, summary: str, group: bool = False) -> None:
        self.module = module
        self.attr = attr
        self.summary = summary
        self.group = group


_OPERATOR = {
    "workflows": "List workflows, newest first, one page at a time (--offset pages on).",
    "status": "Show a workflow: its steps with status and gate messages, gates, changes and audit tail.",
    "review": "Review a workflow's plan: findings, summary and verdict.",
    "templates": "List the built-in and custom templates `vmware-pilot run` can start.",
    "approve": "Approve the gate a workflow waits at, as yourself, after seeing what it releases.",
    "reject": "Reject the gate a workflow waits at: the workflow is cancelled, the rejection audited.",
    "cancel": "Cancel a workflow: shows what stays applied and what is skipped, asks, then cancels.",
    "rollback": "Roll back what Pilot ran, last first: shows the blast radius, asks, then acts.",
}

# In the order `--help` lists them; a test checks each summary against its command's own help.
COMMANDS: dict[str, Lazy] = {
    "mcp": Lazy(
        "serve",
        "mcp",
        "Serve the MCP tools: on stdio (configure this command in your MCP client) or over HTTPS.",
    ),
    "demo": Lazy(
        "demo",
        "demo",
        "Walk a built-in template through the MCP server: review, run, gate, approve, status, "
        "rollback preview.",
    ),
    # `templates` is a group (import, export, remove) that lists when given no subcommand.
    **{
        name: Lazy("templates", "app", summary, group=True)
        if name == "templates"
        else Lazy("operator", name, summary)
        for name, summary in _OPERATOR.items()
    },
    "run": Lazy(
        "run",
        "run",
        "Create a workflow and run it here: progress, and each approval gate asked at this terminal.",
    ),
    "doctor": Lazy(
        "doctor",
        "doctor",
        "Check what this host needs: settings, database, skills, OAuth, notify URL and clock.",
    ),
    "backup": Lazy(
        "backup", "backup", "Back up the SQLite store into a new FILE (online: servers may keep running)."
    ),
    "restore": Lazy(
        "backup", "restore", "Restore a backup FILE into an empty pilot home, then verify its audit trail."
    ),
    "version": Lazy("commands", "version", "Print the version."),
    "audit": Lazy("audit", "app", "Verify or export the audit trail.", group=True),
    "catalog": Lazy(
        "catalog", "app", "Discover the tools of installed skills and show the skill catalog.", group=True
    ),
    "policy": Lazy(
        "policies",
        "app",
        "Check, explain, import and export the policy (deny, approvals, windows, conflicts).",
        group=True,
    ),
    "twin": Lazy(
        "twin",
        "app",
        "Capture a vCenter's inventory for rehearsals on a twin; list and remove captures.",
        group=True,
    ),
    "token": Lazy(
        "tokens", "app", "Bearer tokens and roles for `vmware-pilot mcp --transport https|http`.", group=True
    ),
}


def _rows(rows: list[tuple[str, str]], width: int) -> list[str]:
    """A two-column list as click draws one inside a section (indent 2, 2 spaces between columns)."""
    first_col = min(max(len(name) for name, _ in rows), 30) + 2
    text_width = max(width - first_col - 2, 10)
    lines: list[str] = []
    for name, text in rows:
        wrapped = textwrap.wrap(text, text_width, replace_whitespace=False) or [""]
        if len(name) <= first_col - 2:
            lines.append(f"  {name}{' ' * (first_col - len(name))}{wrapped[0]}")
        else:
            lines.append(f"  {name}")
            lines.append(f"{' ' * (first_col + 2)}{wrapped[0]}")
        lines.extend(f"{' ' * (first_col + 2)}{line}" for line in wrapped[1:])
    return lines


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` gives it (click's measure), without
    importing shutil and the compression modules it loads."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def top_level_help() -> str:
    """`vmware-pilot --help`, as the typer app draws it (same layout, wrapped to the terminal)."""
    width = max(min(_columns(), 80) - 2, 50)
    lines = [
        f"Usage: {PROG} [OPTIONS] COMMAND [ARGS]...",
        "",
        *textwrap.wrap(SUMMARY, width, initial_indent="  ", subsequent_indent="  "),
        "",
        "Options:",
        *_rows([("--version", VERSION_HELP), ("--help", "Show this message and exit.")], width),
        "",
        "Commands:",
        *_rows([(name, where.summary) for name, where in COMMANDS.items()], width),
        "",
        *textwrap.wrap(EPILOG, width, initial_indent="  ", subsequent_indent="  "),
    ]
    return "\n".join(lines) + "\n"
