"""Backing up and restoring a SQLite store with SQLite's online backup API.

``backup`` copies the live database page by page while servers keep using it (a consistent
snapshot: the copy is one committed state, WAL included) into a new file, mode 0600. ``restore``
copies such a file into an empty pilot home as its ``pilot.db`` after checking it: SQLite's
integrity check, and a vmware-pilot schema this build can read. A PostgreSQL store is backed up
with ``pg_dump`` instead (docs/operations.md#backup-and-restore): both refuse with that hint.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from vmware_pilot.config import Settings
from vmware_pilot.errors import InvalidInput, StoreError
from vmware_pilot.store.connection import private_umask, sqlite_path
from vmware_pilot.store.migrations import LATEST

__all__ = ["Copied", "backup", "restore"]

_PG_HINT = (
    "A PostgreSQL store is backed up with pg_dump and restored with pg_restore into an empty database: "
    "see docs/operations.md (Backup and restore)."
)
_PAGES_PER_STEP = 1024


@dataclass(frozen=True)
class Copied:
    source: Path
    target: Path
    workflows: int
    schema_version: int


def _sqlite_file(settings: Settings) -> Path:
    path = sqlite_path(settings.resolved_database_url)
    if path is None or settings.resolved_database_url.startswith("sqlite:///:memory:"):
        raise InvalidInput("backup and restore copy the SQLite file; this store is not one", hint=_PG_HINT)
    return path


def _check(path: Path) -> tuple[int, int]:
    """(schema version, workflow count) of a vmware-pilot SQLite file; StoreError when it is not one."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            verdict = conn.execute("PRAGMA integrity_check").fetchone()
            if not verdict or verdict[0] != "ok":
                raise StoreError(
                    f"{path} fails SQLite's integrity check ({verdict[0] if verdict else 'no answer'})",
                    hint="Use another backup.",
                )
            meta = dict(conn.execute("SELECT key, value FROM schema_meta").fetchall())
            count = conn.execute("SELECT COUNT(*) FROM workflows").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{path} is not a vmware-pilot database ({exc})",
            hint="Give a file written by `vmware-pilot backup`.",
        ) from None
    # store/migrations.py: schema_version is the oldest schema a build needs, schema_applied (when
    # present) the migrations applied.
    needed = str(meta.get("schema_version", "none"))
    version = int(needed) if needed.isdigit() else -1
    if not 0 < version <= LATEST:
        raise StoreError(
            f"{path} has schema version {needed}; this vmware-pilot reads 1 to {LATEST}",
            hint="Restore it with the vmware-pilot release that wrote it, or a newer one.",
        )
    applied = str(meta.get("schema_applied", needed))
    return max(version, int(applied) if applied.isdigit() else version), int(count[0]) if count else 0


def _copy(source: Path, target: Path) -> None:
    """SQLite's online backup of ``source`` into the new file ``target`` (0600)."""
    with private_umask():
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    try:
        with (
            contextlib.closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as src,
            contextlib.closing(sqlite3.connect(target)) as dst,
        ):
            src.backup(dst, pages=_PAGES_PER_STEP)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def backup(settings: Settings, target: Path) -> Copied:
    """Copy this home's SQLite store into ``target`` (a new file); refuses an existing one."""
    source = _sqlite_file(settings)
    if not source.is_file():
        raise InvalidInput(f"there is no database to back up at {source}", hint="Check VMWARE_PILOT_HOME.")
    target = target.expanduser()
    if target.exists():
        raise InvalidInput(f"{target} exists; a backup never overwrites a file", hint="Name a new file.")
    if not target.parent.is_dir():
        raise InvalidInput(
            f"the folder {target.parent} does not exist", hint="Create it, or name another file."
        )
    try:
        _copy(source, target)
    except sqlite3.Error as exc:
        raise StoreError(
            f"the backup of {source} failed ({exc})", hint="Check the space and retry."
        ) from None
    version, count = _check(target)
    return Copied(source, target, count, version)


def restore(settings: Settings, source: Path) -> Copied:
    """Copy the backup ``source`` into this pilot home, which must be empty (or not exist yet)."""
    target = _sqlite_file(settings)
    if settings.database_url:
        raise InvalidInput(
            "restore writes the pilot home's pilot.db; VMWARE_PILOT_DATABASE_URL names another database",
            hint="Unset VMWARE_PILOT_DATABASE_URL and point VMWARE_PILOT_HOME at an empty folder.",
        )
    source = source.expanduser()
    if not source.is_file():
        raise InvalidInput(
            f"there is no backup file {source}", hint="Give the file `vmware-pilot backup` wrote."
        )
    home = settings.home_path
    if home.exists() and any(home.iterdir()):
        raise InvalidInput(
            f"the pilot home {home} is not empty; restore writes only into an empty home, so nothing "
            "of a running Pilot is overwritten",
            hint="Point VMWARE_PILOT_HOME at a new folder, restore there, then move the old home aside.",
        )
    version, count = _check(source)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    home.chmod(0o700)
    try:
        _copy(source, target)
    except sqlite3.Error as exc:
        raise StoreError(
            f"the restore of {source} failed ({exc})", hint="Check the space and retry."
        ) from None
    return Copied(source, target, count, version)
