"""Reading a policy text: YAML read with the care of ``templates/yamlsafe.py``, then checked by
``policy.model.parse_policy``, each problem placed at its line.

``policy_from_text`` never quotes the text in its messages beyond the short names it checks;
``read_policy_text`` (behind ``read_policy_file``) is the package's only file access (the policy
file, bounded in size).
"""

from __future__ import annotations

import re
from pathlib import Path

from vmware_pilot.policy.model import EMPTY, Policy, PolicyInvalid, Problem, parse_policy
from vmware_pilot.templates.yamlsafe import YamlRefused, load_yaml_lines

__all__ = ["MAX_POLICY_BYTES", "policy_from_text", "read_policy_file", "read_policy_text"]

MAX_POLICY_BYTES = 1_000_000
_YAML_LINE = re.compile(r"\bline (\d+)")


def _line(lines: dict[tuple[str | int, ...], int], path: tuple[str | int, ...]) -> int | None:
    """The line of ``path``, or of its nearest ancestor the document has."""
    for end in range(len(path), -1, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def policy_from_text(text: str) -> Policy:
    """The policy a YAML text holds; PolicyInvalid with every problem at its line."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_POLICY_BYTES:
        raise PolicyInvalid([Problem((), f"the policy is larger than {MAX_POLICY_BYTES} bytes")])
    try:
        data, lines = load_yaml_lines(text)
    except YamlRefused as exc:
        message = str(exc)
        # yamlsafe says "at line L, column C": keep the line for callers that show it apart.
        found = _YAML_LINE.search(message)
        line = int(found.group(1)) if found else None
        raise PolicyInvalid([Problem((), message, line)]) from None
    if data is None:
        return EMPTY
    try:
        return parse_policy(data)
    except PolicyInvalid as exc:
        placed = [Problem(p.path, p.message, _line(lines, p.path)) for p in exc.problems]
        placed.sort(key=lambda p: p.line or 0)
        raise PolicyInvalid(placed) from None


def read_policy_file(path: Path) -> Policy:
    """The policy in the file at ``path``; EMPTY when there is no such file; PolicyInvalid when
    it cannot be read or used (each problem at its line)."""
    text = read_policy_text(path)
    return EMPTY if text is None else policy_from_text(text)


def read_policy_text(path: Path) -> str | None:
    """The text of the policy file at ``path`` (None when there is no such file); PolicyInvalid
    when it cannot be read, is too large or is not UTF-8."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_POLICY_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PolicyInvalid([Problem((), f"cannot be read ({exc.strerror or type(exc).__name__})")]) from None
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyInvalid([Problem((), f"the policy is larger than {MAX_POLICY_BYTES} bytes")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyInvalid([Problem((), f"is not UTF-8 text (byte {exc.start})")]) from None
