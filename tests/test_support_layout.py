"""Test modules share helpers through `tests/support/`, never by importing another test module:
a `test_*.py` imported by another is collected twice, and its fixtures and helpers change under
the tests that borrowed them."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import REPO

TESTS = REPO / "tests"


def imports_of_test_modules(path: Path, source: str) -> list[str]:
    """The test modules (`test_*`) a source file imports, relative imports resolved."""
    package = list(path.relative_to(REPO).with_suffix("").parts[:-1])
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [
            f"{path.relative_to(REPO)}:{node.lineno} imports {name}"
            for name in names
            if name.split(".")[0] == "tests"
            and name.split(".")[-1].startswith("test_")
            and (REPO.joinpath(*name.split(".")).with_suffix(".py")).exists()
        ]
    return found


def test_no_test_module_imports_another() -> None:
    offences = [
        found
        for path in sorted(TESTS.rglob("*.py"))
        if "node_modules" not in path.parts
        for found in imports_of_test_modules(path, path.read_text(encoding="utf-8"))
    ]
    assert not offences, "move what is shared into tests/support/:\n" + "\n".join(offences)


def test_a_test_module_importing_another_is_caught() -> None:
    """The check can fail: absolute and relative imports of a test module are reported."""
    probe = TESTS / "server" / "test_probe.py"
    assert imports_of_test_modules(probe, "from tests.test_layers import ROW\n")
    assert imports_of_test_modules(probe, "from ..test_layers import ROW\n")
    assert imports_of_test_modules(probe, "from .. import test_layers\n")
    assert imports_of_test_modules(probe, "import tests.test_layers\n")
    assert not imports_of_test_modules(probe, "from tests.support import REPO\n")
