"""The previous release (release/previous.json), built from this repository's git history for the
upgrade tests: its source tree at the tagged commit, run with this test environment's Python and
its own code first on the path.

``git archive COMMIT`` extracts the release's files, nothing comes from the network. The tree is
cached in the temporary folder under the commit's name, so a test session extracts it once. The
release runs from that tree (``PYTHONPATH``) with this virtual environment's packages, which must
satisfy its declared dependencies (checked; a release that needs other versions is refused with
the names, rather than run against the wrong ones). The editable install of this checkout is a
path added after site-packages, so the release's ``vmware_pilot`` is the one imported; ``run``
checks that too.

A clone without the history (``git clone --depth 1``, an exported tarball) cannot build it: the
tests fail and say so. CI must fetch the full history with its tags (``fetch-depth: 0``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

__all__ = ["PREVIOUS", "REPO", "Release", "previous_release", "tagged_commit"]

REPO = Path(__file__).resolve().parents[2]
PREVIOUS: dict[str, object] = json.loads((REPO / "release" / "previous.json").read_text())


class ReleaseUnavailable(RuntimeError):
    """The previous release cannot be built here (no history, or dependencies this venv lacks)."""


@dataclass(frozen=True)
class Release:
    version: str
    commit: str
    root: Path  # the release's source tree

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` with the release's code first on the Python path."""
        return {**base, "PYTHONPATH": str(self.root / "src")}

    def command(self, *args: str) -> list[str]:
        """`vmware-pilot ARGS` of the release: the entry point its pyproject.toml declares."""
        scripts = tomllib.loads((self.root / "pyproject.toml").read_text())["project"]["scripts"]
        module, function = scripts["vmware-pilot"].split(":")
        return [
            sys.executable,
            "-c",
            f"import sys; from {module} import {function}; sys.exit({function}())",
            *args,
        ]

    def imported(self) -> tuple[str, str]:
        """(the file ``vmware_pilot`` is imported from, its ``__version__``) in the release's env."""
        done = subprocess.run(
            [sys.executable, "-c", "import vmware_pilot as v; print(v.__file__); print(v.__version__)"],
            env=self.env(dict(os.environ)),
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        where, version = done.stdout.split()
        return where, version


def tagged_commit(tag: str) -> str | None:
    """The commit the tag ``tag`` names in this repository, or None when there is no such tag."""
    found = _git("rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}")
    return found.stdout.decode().strip() if found.returncode == 0 else None


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=False, timeout=120)


def _missing_dependencies(pyproject: Path) -> list[str]:
    """The release's dependencies this environment does not satisfy, as 'requirement (found)'."""
    wanted = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    missing = []
    for line in wanted:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            found = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            missing.append(f"{req} (not installed)")
            continue
        if not req.specifier.contains(found, prereleases=True):
            missing.append(f"{req} (found {found})")
    return missing


def previous_release() -> Release:
    """The release named by release/previous.json, extracted (once per commit) and checked."""
    commit, version = str(PREVIOUS["commit"]), str(PREVIOUS["version"])
    cache = Path(tempfile.gettempdir()) / f"vmware-pilot-release-{commit}"
    if not (cache / "pyproject.toml").exists():
        if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
            shallow = _git("rev-parse", "--is-shallow-repository").stdout.decode().strip()
            raise ReleaseUnavailable(
                f"release {version} (commit {commit}) is not in this repository's history"
                + (" (a shallow clone)" if shallow == "true" else "")
                + ": the upgrade tests build it from git. Fetch the full history with its tags "
                "(git fetch --unshallow --tags; in CI, actions/checkout with fetch-depth: 0)."
            )
        archive = _git("archive", "--format=tar", commit)
        if archive.returncode != 0:
            raise ReleaseUnavailable(f"git archive {commit} failed: {archive.stderr.decode()[-500:]}")
        work = Path(tempfile.mkdtemp(prefix=f"vmware-pilot-release-{commit[:12]}-"))
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(work, filter="data")
        try:
            work.rename(cache)  # atomic: another worker may have put the same tree there first
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
    missing = _missing_dependencies(cache / "pyproject.toml")
    if missing:
        raise ReleaseUnavailable(
            f"release {version} needs what this environment lacks: {'; '.join(missing)}. Install them "
            "in a venv of their own for the release, or update release/previous.json."
        )
    return Release(version, commit, cache)
