"""Finding a family skill's MCP server: a configured command, beside the interpreter, or on PATH.

Search order for skill ``<bare>`` (bare name per ``catalog.renames.skill_key``):

1. ``Settings.skill_commands[<bare>]`` (``VMWARE_PILOT_SKILL_COMMANDS``): a command line; its
   program is an absolute path, or a bare name looked up as below;
2. ``vmware-<bare>-mcp`` in the directory of the running interpreter (its venv's ``bin``);
3. ``vmware-<bare>-mcp`` in each absolute ``PATH`` entry, in order (relative entries are skipped:
   they would make the result depend on the working directory).

A hit must be a regular executable file. Anything else raises ``DispatchRefused`` saying how to
install the skill. A hit whose script names an interpreter that no longer exists (its tool
environment was removed, or rebuilt on another Python, after the program was put on ``PATH``) raises
``DispatchRefused`` naming that interpreter (field ``interpreter``) and how to reinstall the skill.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from vmware_pilot.catalog.renames import SKILL_PACKAGES, skill_key
from vmware_pilot.errors import DispatchRefused
from vmware_pilot.safety.redaction import MASK, is_secret_key, redact_text

__all__ = [
    "PACKAGES",
    "SETTING",
    "SkillCommand",
    "install_hint",
    "locate",
    "package_name",
    "search_dirs",
    "server_name",
]

SETTING: Final = "VMWARE_PILOT_SKILL_COMMANDS"

# PyPI packages whose name is not `vmware-<skill>`.
PACKAGES: Final = SKILL_PACKAGES

_NAME = re.compile(r"^[a-z][a-z0-9-]*$")

Source = Literal["setting", "interpreter", "path"]


@dataclass(frozen=True)
class SkillCommand:
    """How to start one skill's MCP server over stdio."""

    skill: str
    argv: tuple[str, ...]
    source: Source

    @property
    def program(self) -> str:
        return self.argv[0]

    @property
    def args(self) -> list[str]:
        return list(self.argv[1:])

    def display(self) -> str:
        """The command line as a shell would read it, with secrets masked: it is logged, shown and
        written to the catalog cache (``--password=x``, ``--token x``, ``https://u:x@h`` → ``***``)."""
        shown: list[str] = []
        for arg in self.argv:
            after_secret_flag = bool(shown) and shown[-1].startswith("-") and is_secret_key(shown[-1])
            shown.append(MASK if after_secret_flag and "=" not in shown[-1] else redact_text(arg))
        return shlex.join(shown)


def server_name(skill: str) -> str:
    """``vmware-<bare>-mcp``."""
    return f"vmware-{skill_key(skill)}-mcp"


def package_name(skill: str) -> str:
    """The PyPI package that installs the skill's server."""
    bare = skill_key(skill)
    return PACKAGES.get(bare, f"vmware-{bare}")


def install_hint(skill: str) -> str:
    bare = skill_key(skill)
    package = package_name(bare)
    return (
        f"Install the skill in a tool environment of its own (`uv tool install {package}` or "
        f"`pipx install {package}`) and restart, or map it to its server command in "
        f'{SETTING}, e.g. {{"{bare}": "/path/to/{server_name(bare)}"}}.'
    )


def _dirs(path: str | None, interpreter: str | None) -> list[tuple[Path, Source]]:
    exe = sys.executable if interpreter is None else interpreter
    found: list[tuple[Path, Source]] = [(Path(exe).parent, "interpreter")] if exe else []
    for entry in (os.environ.get("PATH", "") if path is None else path).split(os.pathsep):
        if entry and Path(entry).is_absolute() and all(Path(entry) != d for d, _ in found):
            found.append((Path(entry), "path"))
    return found


def search_dirs(path: str | None = None, interpreter: str | None = None) -> list[Path]:
    """Where a server is looked for: the interpreter's directory, then absolute PATH entries."""
    return [folder for folder, _ in _dirs(path, interpreter)]


def _find(program: str, dirs: list[tuple[Path, Source]]) -> tuple[Path, Source] | None:
    for folder, source in dirs:
        candidate = folder / program
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate, source
    return None


def _bare(skill: object, known_skills: Collection[str] | None) -> str:
    if not isinstance(skill, str) or not skill.strip():
        raise DispatchRefused(
            "Step names no skill", hint="Give the step a family skill name such as 'aiops'."
        )
    bare = skill_key(skill)
    if not _NAME.match(bare):
        raise DispatchRefused(
            f"'{skill}' is not a family skill name",
            hint="Use a bare skill name such as 'aiops', 'monitor' or 'nsx-security'.",
            skill=skill,
        )
    if bare == "pilot":
        raise DispatchRefused(
            "Pilot does not dispatch to itself",
            hint="Use a require_approval step for a human gate instead of calling Pilot's own tools.",
            skill=skill,
        )
    if known_skills is not None and bare not in {skill_key(s) for s in known_skills}:
        raise DispatchRefused(
            f"'{skill}' is not a known skill",
            hint=f"Known skills: {', '.join(known_skills)}.",
            skill=skill,
        )
    return bare


def _from_setting(bare: str, command: str, dirs: list[tuple[Path, Source]]) -> SkillCommand:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        argv, problem = [], f"cannot be parsed ({exc})"
    else:
        problem = "is empty" if not argv else ""
    hint = f"Fix the entry for '{bare}' in {SETTING} (a JSON object: skill → command line)."
    if problem:
        raise DispatchRefused(f"The command configured for skill '{bare}' {problem}", hint=hint, skill=bare)
    program = argv[0]
    if Path(program).is_absolute():
        if _find(Path(program).name, [(Path(program).parent, "setting")]) is None:
            raise DispatchRefused(
                f"The command configured for skill '{bare}' ({program}) is not an executable file",
                hint=hint,
                skill=bare,
                command=command,
            )
        return SkillCommand(bare, tuple(argv), "setting")
    if "/" in program or (os.altsep is not None and os.altsep in program):
        raise DispatchRefused(
            f"The command configured for skill '{bare}' ({program}) is a relative path",
            hint=hint + " Use an absolute path or a bare program name found on PATH.",
            skill=bare,
            command=command,
        )
    found = _find(program, dirs)
    if found is None:
        raise DispatchRefused(
            f"The command configured for skill '{bare}' ({program}) was not found beside the "
            "interpreter or on PATH",
            hint=hint,
            skill=bare,
            command=command,
        )
    return SkillCommand(bare, (str(found[0]), *argv[1:]), "setting")


def locate(
    skill: str,
    overrides: Mapping[str, str] | None = None,
    *,
    known_skills: Collection[str] | None = None,
    path: str | None = None,
    interpreter: str | None = None,
) -> SkillCommand:
    """The command that starts ``skill``'s MCP server, or ``DispatchRefused`` saying how to install it.

    ``overrides`` is ``Settings.skill_commands``; ``known_skills``, when given, limits the skills
    accepted; ``path`` and ``interpreter`` default to ``$PATH`` and ``sys.executable``.
    """
    bare = _bare(skill, known_skills)
    dirs = _dirs(path, interpreter)
    for key, command in (overrides or {}).items():
        if skill_key(key) == bare:
            return _check_environment(_from_setting(bare, command, dirs))
    program = server_name(bare)
    found = _find(program, dirs)
    if found is None:
        raise DispatchRefused(
            f"Skill '{bare}' is not installed where Pilot can find it ({program} is neither beside "
            "the Python running vmware-pilot nor in an absolute PATH directory)",
            hint=install_hint(bare),
            skill=bare,
            package=package_name(bare),
        )
    return _check_environment(SkillCommand(bare, (str(found[0]),), found[1]))


_SCRIPT_HEAD = 512  # enough for a shebang line and pip's `exec` trampoline below it
_TRAMPOLINE = "'" * 3 + "exec' "  # pip's second line under `#!/bin/sh` for a long or spaced path


def _interpreter(program: Path) -> str:
    """The absolute interpreter ``program``'s script names ("" for a binary, ``/usr/bin/env …`` or
    an unreadable head): its ``#!`` line, or the trampoline line pip writes below ``#!/bin/sh``."""
    try:
        with program.open("rb") as handle:
            head = handle.read(_SCRIPT_HEAD).decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    if not head or not head[0].startswith("#!"):
        return ""
    try:
        words = shlex.split(head[0][2:])
        if words[:1] == ["/bin/sh"] and len(head) > 1 and head[1].startswith(_TRAMPOLINE):
            words = shlex.split(head[1][len(_TRAMPOLINE) :])
    except ValueError:
        return ""
    first = words[0] if words else ""
    return first if Path(first).is_absolute() and Path(first).name != "env" else ""


def _check_environment(command: SkillCommand) -> SkillCommand:
    """``command``, or ``DispatchRefused`` when the interpreter its script names is gone."""
    interpreter = _interpreter(Path(command.program))
    if not interpreter or Path(interpreter).exists():
        return command
    package = package_name(command.skill)
    raise DispatchRefused(
        f"The environment of skill '{command.skill}' is missing: {redact_text(command.program)} runs "
        f"{redact_text(interpreter)}, which does not exist",
        hint=(
            f"Reinstall the skill in its own tool environment (`uv tool install --reinstall {package}` "
            f"or `pipx reinstall {package}`), or map it to a working command in {SETTING}."
        ),
        skill=command.skill,
        command=command.display(),
        interpreter=redact_text(interpreter),
    )
