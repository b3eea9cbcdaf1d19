"""Reading YAML that someone else wrote: plain data only, bounded in size and nesting.

``load_yaml`` is PyYAML's safe loader with more rules checked on the composed document, before
anything is built. Nesting deeper than ``MAX_DEPTH`` is refused while composing, so a deeply
nested file cannot exhaust the interpreter's stack. Aliases (``*name``, which yaml.safe_dump
writes for a value used twice) are allowed, but the document as they expand it may hold at most
``MAX_NODES`` values and ``MAX_DEPTH`` levels, and may not contain itself: a few hundred bytes
cannot become megabytes once stored. Errors say where (line and column) and what, and never
quote the text: the file may be one its reader must not see.
"""

from __future__ import annotations

import re
from typing import Any, Final

import yaml
import yaml.reader
from yaml.composer import Composer
from yaml.events import CollectionStartEvent
from yaml.nodes import MappingNode, Node, SequenceNode

__all__ = ["MAX_DEPTH", "MAX_NODES", "YamlRefused", "load_yaml", "load_yaml_lines"]

MAX_DEPTH: Final = 64
MAX_NODES: Final = 100_000
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# What PyYAML quotes that is not the document's text: token names ('<block end>'), one punctuation mark.
_TOKEN = re.compile(r"'(?:<[a-z ]+>|[^\w\s])'")


def _unquoted(problem: str) -> str:
    return _QUOTED.sub(lambda m: m.group() if _TOKEN.fullmatch(m.group()) else "'…'", problem)


class YamlRefused(ValueError):
    """The text is not YAML this project reads; the message names the place, not the content."""


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "an unknown place"


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expanded(root: Node) -> None:
    """Refuse a document whose aliases expand it past MAX_NODES values or MAX_DEPTH levels, or
    into itself. Sizes are computed once per node (iteratively), so checking a bomb is cheap."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            open_nodes.discard(key)
            if size[key] > MAX_NODES:
                raise YamlRefused(
                    f"the document holds more than {MAX_NODES} values once its aliases are expanded "
                    f"(at {_at(node.start_mark)})"
                )
            if depth[key] > MAX_DEPTH + 1:
                raise YamlRefused(
                    f"nesting deeper than {MAX_DEPTH} levels once its aliases are expanded "
                    f"(at {_at(node.start_mark)})"
                )
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise YamlRefused(f"an alias makes the document contain itself (at {_at(node.start_mark)})")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node) if id(kid) not in size)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_DEPTH while composing and checks the
    expanded document before constructing it."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, CollectionStartEvent):
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise YamlRefused(f"nesting deeper than {MAX_DEPTH} levels at {_at(event.start_mark)}")
            try:
                return Composer.compose_node(self, parent, index)
            finally:
                self._depth -= 1
        return Composer.compose_node(self, parent, index)

    def bounded_data(self, lines: dict[tuple[str | int, ...], int] | None = None) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        _check_expanded(node)
        if lines is not None:
            _lines_of(node, lines)
        return self.construct_document(node)


def _lines_of(root: Node, lines: dict[tuple[str | int, ...], int]) -> None:
    """Fill ``lines`` with the line (1-based) of every value of the document by its path of keys
    and indexes; a mapping's value is placed at its key's line. Aliases are walked once."""
    seen: set[int] = set()
    stack: list[tuple[Node, tuple[str | int, ...], int]] = [(root, (), root.start_mark.line + 1)]
    while stack:
        node, path, line = stack.pop()
        lines.setdefault(path, line)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            stack.extend((kid, (*path, i), kid.start_mark.line + 1) for i, kid in enumerate(node.value))
        elif isinstance(node, MappingNode):
            stack.extend(
                (value, (*path, str(key.value)), key.start_mark.line + 1) for key, value in node.value
            )


def _place(text: str, position: int) -> str:
    """``line L, column C`` of the character at ``position`` of ``text``."""
    line = text.count("\n", 0, position) + 1
    return f"line {line}, column {position - (text.rfind(chr(10), 0, position) + 1) + 1}"


def load_yaml(text: str) -> Any:
    """The data in ``text`` (one document); YamlRefused when it is not plain, bounded YAML."""
    return _load(text, None)


def load_yaml_lines(text: str) -> tuple[Any, dict[tuple[str | int, ...], int]]:
    """``load_yaml``, and the line of every value by its path of keys and indexes (for messages
    that name the line of a value found wrong after reading)."""
    lines: dict[tuple[str | int, ...], int] = {}
    return _load(text, lines), lines


def _load(text: str, lines: dict[tuple[str | int, ...], int] | None) -> Any:
    try:
        # The reader checks every character when it is built: a raw control character is
        # refused here, with its place, before any parsing.
        loader = _BoundedLoader(text)
    except yaml.reader.ReaderError as exc:
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        raise YamlRefused(
            f"not valid YAML at {_place(text, exc.position)}: the control character #x{code:04x} is not "
            "allowed (write it as an escape in a double-quoted string)"
        ) from None
    try:
        return loader.bounded_data(lines)
    except YamlRefused:
        raise
    except yaml.MarkedYAMLError as exc:
        # The problem text alone: PyYAML's full message carries a snippet of the document.
        problem = _unquoted(str(exc.problem or exc.context or "unreadable"))[:120]
        raise YamlRefused(f"not valid YAML at {_at(exc.problem_mark)}: {problem}") from None
    except yaml.YAMLError:
        raise YamlRefused("not valid YAML") from None
    except RecursionError:
        raise YamlRefused(f"nesting deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()
