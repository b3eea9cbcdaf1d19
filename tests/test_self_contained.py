"""The repository stands on its own: nothing in it reads or names a folder outside its tree, and
every pointer into docs/ lands on a heading that exists."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO

THIS_FILE = Path(__file__).resolve()
OUTSIDE = re.compile(
    "|".join(
        [
            r"\.\./shared\b",  # relative to the repository
            r"/work/shared\b",  # the absolute path of the folder beside it
            r"parents?(?:\[\d+\])?\s*/\s*[\"']shared[\"']",  # Path arithmetic
        ]
    )
)
DOC_POINTER = re.compile(r"docs/(contract|architecture)\.md((?:#[\w-]+)(?:(?:, | and )#[\w-]+)*)")
LOCAL_LINK = re.compile(r"\]\(#([\w-]+)\)")


def tracked_files() -> list[Path]:
    """The files git tracks; outside a git checkout, every file except tool and build folders."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
        ).stdout
        return [REPO / name for name in out.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", ".lab", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
        return [p for p in REPO.rglob("*") if p.is_file() and not skip & set(p.relative_to(REPO).parts)]


def texts() -> Iterator[tuple[Path, str]]:
    for path in tracked_files():
        if not path.is_file():  # listed by git but deleted in the work tree
            continue
        try:
            yield path, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    return {slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", doc.read_text(encoding="utf-8"), re.M)}


def test_the_walk_sees_the_project() -> None:
    names = {p.relative_to(REPO).as_posix() for p in tracked_files()}
    assert {"README.md", "tests/conftest.py", "tests/data/companion-tools.json"} <= names


def test_no_file_reads_or_names_a_folder_beside_the_repository() -> None:
    hits = [
        f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}"
        for path, text in texts()
        if path.resolve() != THIS_FILE  # the patterns and their examples
        for m in OUTSIDE.finditer(text)
    ]
    assert hits == [], "the project must not depend on anything outside its tree:\n" + "\n".join(hits)


def test_no_file_points_to_sections_of_a_document_outside_the_repository() -> None:
    # Numbered sections ("§5.4") belonged to a document the repository does not have; pointers
    # go to headings of docs/ instead, which the test below checks.
    hits = [
        f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}"
        for path, text in texts()
        if path.resolve() != THIS_FILE
        for m in re.finditer(r"§\s?\d+(?:\.\d+)*", text)
    ]
    assert hits == [], "point to a heading of docs/contract.md or docs/architecture.md:\n" + "\n".join(hits)


# The examples name the outside folder only through this, so the file itself holds no such path.
_FOLDER = "sha" + "red"


@pytest.mark.parametrize(
    "line",
    [
        f'DATA = REPO.parent / "{_FOLDER}" / "companion-tools.json"',
        f"see ../{_FOLDER}/reference/vmware-pilot-2.4.0.md",
        "cat /work/shared/DESIGN.md",
        "root = Path(__file__).parents[2] / 'shared'",
    ],
)
def test_the_pattern_catches_each_way_of_reaching_outside(line: str) -> None:
    assert OUTSIDE.search(line)


def test_every_pointer_into_docs_names_an_existing_heading() -> None:
    known = {name: anchors(REPO / "docs" / f"{name}.md") for name in ("contract", "architecture")}
    dangling = [
        f"{path.relative_to(REPO)}: docs/{m[1]}.md#{anchor}"
        for path, text in texts()
        for m in DOC_POINTER.finditer(text)
        for anchor in re.findall(r"#([\w-]+)", m[2])
        if anchor not in known[m[1]]
    ]
    for name, ids in known.items():
        doc = REPO / "docs" / f"{name}.md"
        dangling += [f"docs/{name}.md: #{a}" for a in LOCAL_LINK.findall(doc.read_text()) if a not in ids]
    assert dangling == [], "pointers to headings that do not exist:\n" + "\n".join(dangling)
