"""The previous release (release/previous.json), built from this repository's git history for the
upgrade tests: its source tree at the tagged commit, run in a virtual environment of its own with
its code first on the path.

``git archive COMMIT`` extracts the release's files. The release's declared dependencies are
installed in its own venv (pip, from the package index, once per commit; the release may pin
other versions than this checkout: 3.0.0 needs ``mcp<2`` where this code runs on 2.x). Tree and
venv are cached in the temporary folder under the commit's name, so a test session builds them
once; a lock file keeps two test workers from building the same one. The release runs with that
venv's interpreter and ``PYTHONPATH`` at its tree's ``src``; ``imported`` checks that its own
``vmware_pilot`` is the one imported.

A clone without the history (``git clone --depth 1``, an exported tarball) cannot build it: the
tests fail and say so. CI must fetch the full history with its tags (``fetch-depth: 0``).
"""

from __future__ import annotations

import fcntl
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
from pathlib import Path

__all__ = ["PREVIOUS", "REPO", "Release", "previous_release", "tagged_commit"]

REPO = Path(__file__).resolve().parents[2]
PREVIOUS: dict[str, object] = json.loads((REPO / "release" / "previous.json").read_text())


class ReleaseUnavailable(RuntimeError):
    """The previous release cannot be built here (no history, or its dependencies fail to install)."""


@dataclass(frozen=True)
class Release:
    version: str
    commit: str
    root: Path  # the release's source tree
    python: Path  # the interpreter of the release's own venv

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` with the release's code first on the Python path."""
        return {**base, "PYTHONPATH": str(self.root / "src")}

    def command(self, *args: str) -> list[str]:
        """`vmware-pilot ARGS` of the release: the entry point its pyproject.toml declares."""
        scripts = tomllib.loads((self.root / "pyproject.toml").read_text())["project"]["scripts"]
        module, function = scripts["vmware-pilot"].split(":")
        return [
            str(self.python),
            "-c",
            f"import sys; from {module} import {function}; sys.exit({function}())",
            *args,
        ]

    def imported(self) -> tuple[str, str]:
        """(the file ``vmware_pilot`` is imported from, its ``__version__``) in the release's env."""
        done = subprocess.run(
            [str(self.python), "-c", "import vmware_pilot as v; print(v.__file__); print(v.__version__)"],
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


def _venv(tree: Path, commit: str) -> Path:
    """The release's own venv with its declared dependencies (built once per commit)."""
    home = Path(tempfile.gettempdir()) / f"vmware-pilot-release-venv-{commit}"
    python = home / "bin" / "python"
    lock = Path(tempfile.gettempdir()) / f"vmware-pilot-release-venv-{commit}.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if (home / "ready").exists():
            return python
        shutil.rmtree(home, ignore_errors=True)
        wanted = tomllib.loads((tree / "pyproject.toml").read_text())["project"]["dependencies"]
        for step in (
            [sys.executable, "-m", "venv", str(home)],
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *wanted],
        ):
            done = subprocess.run(step, capture_output=True, text=True, check=False, timeout=900)
            if done.returncode != 0:
                raise ReleaseUnavailable(
                    f"the previous release's venv could not be built ({' '.join(step[:4])} ...): "
                    f"{(done.stderr or done.stdout)[-800:]}"
                )
        (home / "ready").write_text("\n".join(wanted))
    return python


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
    return Release(version, commit, cache, _venv(cache, commit))
