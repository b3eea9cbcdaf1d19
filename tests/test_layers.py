"""The layer order in docs/architecture.md holds in the code: every import between packages goes
from a row of the Layers table to a row below it that the row names.

Type-only imports count too: a type a lower layer needs from a higher one means the lower layer
knows about the higher one, which is what the order forbids. Imports inside one package are not
judged here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import REPO

PACKAGE_ROOT = REPO / "src" / "vmware_pilot"
ARCHITECTURE = REPO / "docs" / "architecture.md"
ROW = re.compile(r"^\| `([\w.]+?)/?` \|[^|]*\| (.*) \|$")
INNER = re.compile(r"^\| `([\w.]+)` \| (.*) \|$")
NAME = re.compile(r"`([\w.]+?)/?`")


def documented_layers() -> list[tuple[str, set[str] | None]]:
    """The Layers table, top to bottom: each unit and the units it may import (None: every unit below)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str, set[str] | None]] = []
    for line in table.splitlines():
        match = ROW.match(line.strip())
        if match is None:
            continue
        unit, imports = match.groups()
        rows.append((unit, None if imports.strip() == "everything below" else set(NAME.findall(imports))))
    return rows


def inner_modules() -> dict[str, set[str]]:
    """The Doors table: each inner module (dotted, under vmware_pilot) and the units that may not import it."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text.split("## Doors", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for line in table.splitlines():
        match = INNER.match(line.strip())
        if match is not None:
            found[match.group(1)] = set(NAME.findall(match.group(2)))
    return found


def unit_of(module: str) -> str | None:
    """The Layers-table unit a dotted module belongs to: its package, or the top-level module's file name."""
    parts = module.split(".")
    if parts[0] != "vmware_pilot" or len(parts) < 2:
        return None
    head = parts[1]
    return head if (PACKAGE_ROOT / head).is_dir() else f"{head}.py"


def module_name(path: Path) -> tuple[str, str]:
    """The dotted name of a source file, and the package its relative imports resolve against."""
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def imported_modules(path: Path, source: str) -> list[tuple[str, int]]:
    """Every vmware_pilot module a source file imports, with the line, relative imports resolved."""
    _, package = module_name(path)
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
    return [(name, line) for name, line in found if name.startswith("vmware_pilot.")]


def test_the_table_names_every_unit_and_only_units_below_each_row() -> None:
    rows = documented_layers()
    units = [unit for unit, _ in rows]
    on_disk = {p.name for p in PACKAGE_ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    on_disk |= {p.name for p in PACKAGE_ROOT.glob("*.py") if p.name != "__init__.py"}
    assert sorted(units) == sorted(on_disk), "the Layers table and src/vmware_pilot disagree"
    for index, (unit, allowed) in enumerate(rows):
        below = set(units[index + 1 :])
        assert allowed is None or allowed <= below, (
            f"row {unit} names a unit that is not below it: {allowed - below}"
        )


def source_files() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def offending_imports(rows: list[tuple[str, set[str] | None]], files: dict[Path, str]) -> list[str]:
    units = [unit for unit, _ in rows]
    allowed_of = {
        unit: set(units[index + 1 :]) if allowed is None else allowed
        for index, (unit, allowed) in enumerate(rows)
    }
    offences = []
    for path, source in files.items():
        here = unit_of(module_name(path)[0])
        if here is None:
            continue
        for target, line in imported_modules(path, source):
            there = unit_of(target)
            if there is not None and there != here and there not in allowed_of[here]:
                offences.append(f"{path.relative_to(REPO)}:{line} imports {target} ({here} -> {there})")
    return offences


def test_no_module_imports_outside_what_its_layer_allows() -> None:
    offences = offending_imports(documented_layers(), source_files())
    assert not offences, "imports against docs/architecture.md#layers:\n" + "\n".join(offences)


def door_offences(inner: dict[str, set[str]], files: dict[Path, str]) -> list[str]:
    """Imports of an inner module (or a module inside it) by a unit its Doors row names."""
    offences = []
    for path, source in files.items():
        here = unit_of(module_name(path)[0])
        for target, line in imported_modules(path, source):
            for module, doors in inner.items():
                name = f"vmware_pilot.{module}"
                if here in doors and (target == name or target.startswith(name + ".")):
                    offences.append(f"{path.relative_to(REPO)}:{line} imports {target} ({here} -> {module})")
    return offences


def test_the_doors_table_names_modules_and_units_that_exist() -> None:
    inner = inner_modules()
    assert {"engine.execution", "store.sql"} <= set(inner)
    units = {unit for unit, _ in documented_layers()}
    for module, doors in inner.items():
        parts = module.split(".")
        assert (
            PACKAGE_ROOT.joinpath(*parts).is_dir()
            or PACKAGE_ROOT.joinpath(*parts[:-1], f"{parts[-1]}.py").exists()
        ), module
        assert doors and doors <= units, (module, doors - units)


def test_no_door_imports_the_engines_or_the_stores_inner_modules() -> None:
    """cli, transports and server go through PilotService and the store package's names."""
    offences = door_offences(inner_modules(), source_files())
    assert not offences, "imports against docs/architecture.md#doors:\n" + "\n".join(offences)


@pytest.mark.parametrize(
    ("door", "inner", "row"),
    [
        ("cli", "engine.execution.approval", "engine.execution"),
        ("transports", "store.sql", "store.sql"),
        ("server", "engine.execution", "engine.execution"),
    ],
)
def test_a_door_importing_an_inner_module_is_caught(door: str, inner: str, row: str) -> None:
    """The check can fail: a door module importing an inner module, even by a relative path, is reported."""
    probe = PACKAGE_ROOT / door / "probe.py"
    files = {probe: f"from vmware_pilot.{inner} import __name__ as _inner\n"}
    assert door_offences(inner_modules(), files) == [
        f"{probe.relative_to(REPO)}:1 imports vmware_pilot.{inner} ({door} -> {row})"
    ]
    relative = {PACKAGE_ROOT / door / "sub" / "probe.py": "from ...engine.execution import runner\n"}
    assert door_offences(inner_modules(), relative), "a relative import is resolved and caught"


@pytest.mark.parametrize(
    ("lower", "higher"), [("domain", "engine"), ("store", "server"), ("safety", "dispatch")]
)
@pytest.mark.slow
def test_an_upward_import_is_caught(lower: str, higher: str) -> None:
    """The check can fail: a row that may not import a higher one is reported when it does."""
    rows = documented_layers()
    units = [unit for unit, _ in rows]
    assert units.index(higher) < units.index(lower)
    files = source_files()
    files[PACKAGE_ROOT / lower / "probe.py"] = f"from vmware_pilot.{higher} import __name__ as _higher\n"
    offences = offending_imports(rows, files)
    assert any(f"({lower} -> {higher})" in offence for offence in offences)


BACKTICKED = re.compile(r"`([^`\s]+)`")
SECTION = re.compile(r"^### (\w+)$")
TOP_FOLDERS = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}
FILE_SUFFIXES = (".py", ".json", ".md", ".sh", ".yaml", ".toml", ".txt")


def named_modules(text: str) -> list[tuple[str, str | None]]:
    """Every module or file named in backticks, with the `### package` section it is named under.

    Named are: paths (`engine/requests.py`, `store/`, `safety/roles.call_refusal`, with an
    attribute after the module), dotted modules under the package (`vmware_pilot.engine.gates`,
    `engine.execution`, `kept.TextSource`) and bare file names (`saving.py`), the latter looked for
    inside the section's package when under one.
    """
    units = {p.name for p in PACKAGE_ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"} | {
        p.stem for p in PACKAGE_ROOT.glob("*.py")
    }
    found: list[tuple[str, str | None]] = []
    section: str | None = None
    for line in text.splitlines():
        if line.startswith(("## ", "### ")):
            section = None
        heading = SECTION.match(line)
        if heading is not None:
            section = heading.group(1)
        for named in BACKTICKED.findall(line):
            token = named.removesuffix("()")
            if not re.fullmatch(r"[\w./-]+", token):
                continue
            dotted = token.split(".")
            if "/" in token:
                if token.split("/")[0] in units | TOP_FOLDERS:
                    found.append((token, section))
            elif token.endswith(".py"):
                found.append((token, section))
            elif token.endswith(FILE_SUFFIXES):
                continue
            elif dotted[0] == "vmware_pilot" or (len(dotted) > 1 and dotted[0] in units):
                found.append((token, section))
    return found


def module_problem(token: str, section: str | None) -> str | None:
    """Why a backticked name does not name what is in the repository, or None when it does."""
    if token.startswith("vmware_pilot."):
        token = token.removeprefix("vmware_pilot.")
    if "/" not in token and not token.endswith(FILE_SUFFIXES):
        token = token.replace(".", "/")
        parts = token.split("/")
        for cut in range(len(parts), 0, -1):
            base = PACKAGE_ROOT.joinpath(*parts[:cut])
            if base.is_dir() or base.with_suffix(".py").exists():
                return attribute_problem(".".join(parts[:cut]), parts[cut:])
        return f"no module {token}"
    folder, _, leaf = token.rpartition("/")
    if token.endswith("/") or leaf.endswith(FILE_SUFFIXES) or "." not in leaf:
        return None if path_exists(token, section) else f"no file {token}"
    module, *attribute = leaf.split(".")
    if not path_exists(f"{folder}/{module}.py", section):
        return f"no module {folder}/{module}.py"
    return attribute_problem(f"{folder}/{module}".replace("/", "."), attribute)


def path_exists(path: str, section: str | None) -> bool:
    """A path under src/vmware_pilot, the repository, or (a bare file name) the section's package."""
    if "/" not in path.rstrip("/"):
        root = PACKAGE_ROOT / section if section and (PACKAGE_ROOT / section).is_dir() else PACKAGE_ROOT
        return any(root.rglob(path.rstrip("/"))) or (PACKAGE_ROOT / path).exists()
    return (PACKAGE_ROOT / path).exists() or (REPO / path).exists()


def attribute_problem(module: str, attribute: list[str]) -> str | None:
    """`module.attr`: the module defines (or lazily offers) the name."""
    if not attribute:
        return None
    import importlib

    loaded = importlib.import_module(f"vmware_pilot.{module}")
    return None if hasattr(loaded, attribute[0]) else f"{module} has no {attribute[0]}"


def test_every_module_the_architecture_names_exists() -> None:
    """docs/architecture.md names modules, files and attributes that are in the code as it is."""
    named = named_modules(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(named) > 200, "the doc's module names are found"
    problems = sorted(
        {f"{token}: {why}" for token, section in named if (why := module_problem(token, section))}
    )
    assert not problems, "docs/architecture.md names what is not in src:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "named",
    [
        "`engine/gone.py`",
        "`vmware_pilot.engine.gone`",
        "`store/memory.nothing`",
        "`kept.Nothing`",
        "`gone.py`",
    ],
)
def test_a_module_the_architecture_names_that_is_missing_is_caught(named: str) -> None:
    """The check can fail: a missing module, file or attribute the doc names is reported."""
    ((token, section),) = named_modules(f"### engine\n- {named}: what it was.\n")
    assert module_problem(token, section) is not None
