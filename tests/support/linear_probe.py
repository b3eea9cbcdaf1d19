"""Run every regex and every text scrubber of vmware_pilot on 1 MB adversarial inputs.

``python -m tests.support.linear_probe patterns NAME`` runs one module-level pattern (``module:attr``
or ``module:attr[i]`` for a tuple of patterns); ``… helpers NAME`` one scrubber. Each prints the
name before it starts and ``ok`` at the end, so a caller that stops it after a timeout knows which
one hung. A backtracking regex takes hours on these inputs; a linear one takes well under a second.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import vmware_pilot

SIZE = 1 << 20


def shapes() -> dict[str, str]:
    """Inputs that make a backtracking scan quadratic or worse: 1 MB runs, and 256 KB chains of
    short tokens (each token costs a match, so a chain is slower per byte yet just as linear)."""

    def run(unit: str, size: int = SIZE) -> str:
        return unit * (size // len(unit))

    def chain(unit: str) -> str:
        return run(unit, SIZE // 4)

    return {
        "word": run("a"),
        "CAPS": run("A"),
        "alnum": run("a1"),
        "camel": run("aB"),
        "dashes": run("a-"),
        "spaces": run(" "),
        "unterminated value": "password=" + run("x"),
        "unterminated quote": 'password="' + run("\\a"),
        "url without @": "https://user:" + run("p"),
        "bearer spaces": "Bearer" + run(" "),
        "basic letters": "Basic " + run("a"),
        "open placeholder": "{{" + run("a"),
        "angle": "<" + run("a"),
        "escapes": run("\x1b[\x9b\u202e"),
        "key=value chain": chain("a="),
        "key: chain": chain("a: "),
        "quoted chain": chain('"a":"'),
        "url scheme chain": chain("a://b:"),
        "basic chain": chain("Basic a/"),
        "placeholder chain": chain("{{ a "),
    }


def patterns() -> dict[str, re.Pattern[str]]:
    """Every compiled pattern held at module level in vmware_pilot (alone or in a tuple/list)."""
    found: dict[str, re.Pattern[str]] = {}
    for info in pkgutil.walk_packages(vmware_pilot.__path__, "vmware_pilot."):
        if info.name.endswith("__main__"):  # importing it would start a server
            continue
        module = importlib.import_module(info.name)
        for attr, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                found[f"{info.name}:{attr}"] = value
            elif isinstance(value, tuple | list):
                for i, item in enumerate(value):
                    if isinstance(item, re.Pattern) and isinstance(item.pattern, str):
                        found[f"{info.name}:{attr}[{i}]"] = item
    # A pattern imported into another module is probed once, under its first name.
    unique: dict[int, str] = {}
    for name in sorted(found, reverse=True):
        unique[id(found[name])] = name
    return {name: found[name] for name in sorted(unique.values())}


def _probe_pattern(pattern: re.Pattern[str]) -> Callable[[str], object]:
    def run(text: str) -> object:
        return pattern.search(text), pattern.fullmatch(text), pattern.findall(text)

    return run


def _review(text: str) -> object:
    from tests.support.plans import plan, step
    from vmware_pilot.catalog.registry import Catalog
    from vmware_pilot.safety.review import review

    wf = plan(step("monitor", "get_vm_info", {"vm_name": text, "nested": {"k": [text]}}, action=text))
    return review(wf, Catalog.curated())


def _classify(text: str) -> object:
    from vmware_pilot.catalog.registry import Catalog
    from vmware_pilot.safety.classify import classify_tool

    return classify_tool(text, text, text, Catalog.curated())


def _redact(text: str) -> object:
    from vmware_pilot.safety.redaction import redact

    return redact({text: text, "goal": text, "items": [text]}, scrub_text=True)


def _key_tokens(text: str) -> object:
    from vmware_pilot.safety.redaction import is_secret_key, key_tokens

    return key_tokens(text), is_secret_key(text)


def _redact_text(text: str) -> object:
    from vmware_pilot.safety.redaction import redact_text

    return redact_text(text)


def _for_people(text: str) -> object:
    from vmware_pilot.transports.console.words import for_people

    return for_people(text), for_people(f"{text} — decide with the user. {text}")


def _template(text: str) -> object:
    from vmware_pilot.templates.custom import load_file

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "t.yaml")
        quoted = text.replace("\\", "\\\\").replace('"', '\\"')
        quoted = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in quoted)
        path.write_text(
            'name: t\nsteps:\n  - {action: a, skill: monitor, tool: get_vm_info, params: {vm_name: "'
            + quoted[: (1 << 20) - 200]
            + '"}}\n',
            encoding="utf-8",
        )
        tpl = load_file(path, ())
        return tpl.signature(), tpl.render({"a": "x"} | dict.fromkeys(_names(text), "x"))


def _names(text: str) -> Iterator[str]:
    # The placeholders a template uses must all get a value for it to render.
    yield from re.findall(r"\{\{\s*+(\w++)\s*+\}\}", text)


def _terminal(text: str) -> object:
    from vmware_pilot.cli.terminal import json_text, visible

    return visible(text), json_text({"text": text, text: [text]})


def _step_names(text: str) -> object:
    from vmware_pilot.templates.steps import identifier_problem

    return identifier_problem(text), identifier_problem(text, "group_id")


HELPERS: dict[str, Callable[[str], Any]] = {
    "terminal": _terminal,
    "step_names": _step_names,
    "redact_text": _redact_text,
    "redact": _redact,
    "key_tokens": _key_tokens,
    "review": _review,
    "classify_tool": _classify,
    "template": _template,
    "for_people": _for_people,
}


# Parsing YAML is slow per byte: a template gets the shapes that aim at its placeholders.
ONLY = {"template": ("word", "open placeholder", "placeholder chain", "escapes")}


def main(kind: str, name: str) -> None:
    if kind == "patterns":
        run = _probe_pattern(patterns()[name])
    else:
        run = HELPERS[name]
    for label, text in shapes().items():
        if name in ONLY and label not in ONLY[name]:
            continue
        print(f"{name} on {label}", flush=True)
        try:
            run(text)
        except Exception as exc:  # a refusal is an answer; only the time it takes matters here
            print(f"  refused: {type(exc).__name__}", flush=True)
    print("ok", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
