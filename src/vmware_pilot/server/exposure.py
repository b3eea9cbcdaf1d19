"""Which tools a server offers: ``--expose all|read`` and ``--allow-write NAMES`` (2.4.0's switch).

``all`` (the default) offers the 13 tools. ``read`` offers the tools whose effect is ``read`` in
the tool table (``vmware_pilot.tooltable``), plus the write tools ``--allow-write`` names. A tool
not offered is neither listed nor callable (``server.pipeline``): a call to it gets the answer of a
tool this server does not have. The flags win; the environment (``VMWARE_PILOT_MCP_EXPOSE``,
``VMWARE_PILOT_MCP_ALLOW_WRITE``) is read only when neither flag is given, so the two are never
mixed. Every problem is a ``StartupRefused`` (one line and a hint; exit 2).

This limits what clients are offered; it is not authorization: roles still decide who may call
what (``safety/duties.py``).
"""

from __future__ import annotations

from typing import Final

from vmware_pilot.errors import StartupRefused
from vmware_pilot.tooltable import TOOL_NAMES, TOOLS

__all__ = ["EXPOSURES", "exposed_tools", "resolve_exposure"]

EXPOSURES: Final = ("all", "read")
_WRITE_TOOLS: Final = tuple(t.name for t in TOOLS if t.effect != "read")
_READ_TOOLS: Final = tuple(t.name for t in TOOLS if t.effect == "read")


def resolve_exposure(
    flag_expose: str | None, flag_allow_write: str | None, env_expose: str, env_allow_write: str
) -> tuple[str, str]:
    """The (expose, allow_write) in force: the flags when either is given, else the environment's."""
    if flag_expose is None and flag_allow_write is None:
        return env_expose, env_allow_write
    return flag_expose if flag_expose is not None else "all", flag_allow_write or ""


def exposed_tools(expose: str, allow_write: str) -> frozenset[str]:
    """The names of the tools offered; raises ``StartupRefused`` for an unknown exposure, a name
    that is no tool, or a write list without ``read`` exposure."""
    kind = expose.strip().lower()
    if kind not in EXPOSURES:
        shown = expose.strip()[:40]
        raise StartupRefused(
            f"tool exposure {shown!r} is not known",
            hint="Use --expose all (every tool, the default) or --expose read (the read tools); "
            "or set VMWARE_PILOT_MCP_EXPOSE to one of them.",
        )
    names = [n.strip() for n in allow_write.split(",") if n.strip()]
    if names and kind != "read":
        raise StartupRefused(
            "--allow-write only applies with --expose read (with all, every tool is offered already)",
            hint="Add --expose read next to --allow-write (flags and the environment are not mixed), "
            "or with no flags set VMWARE_PILOT_MCP_EXPOSE=read; or drop the list.",
        )
    unknown = [n for n in names if n not in TOOL_NAMES]
    if unknown:
        shown = ", ".join(repr(n[:60]) for n in unknown[:5])
        raise StartupRefused(
            f"--allow-write names {shown}, which is not a tool of this server",
            hint=f"Name write tools from: {', '.join(_WRITE_TOOLS)}.",
        )
    if kind == "all":
        return frozenset(TOOL_NAMES)
    return frozenset(_READ_TOOLS) | frozenset(names)
