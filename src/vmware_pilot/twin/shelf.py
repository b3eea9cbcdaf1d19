"""Where captures are kept: the Pilot home (``<home>/twins/<id>/``), or, when a database URL is set
(several Pilots may share it), rows of the database (store/captures.py), as templates and the
policy are.

A capture kept in the database is its record and its objects folder packed as a tar.gz of at most
``MAX_KEPT_BYTES``; a larger one is refused with the reason, nothing stored. A rehearsal unpacks
the newest capture of its target into a temporary folder (``materialise``), checking every
member (regular files and folders under ``objects/`` only, at most ``MAX_UNPACKED_BYTES`` in all)
and the digest of what it unpacked against the record's before the simulator loads it.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, Final, Protocol

from vmware_pilot.twin.binaries import TwinError
from vmware_pilot.twin.captures import (
    ID_PATTERN,
    Account,
    Capture,
    capture,
    digest_of,
    list_captures,
    remove_capture,
    twins_dir,
)

__all__ = ["MAX_KEPT_BYTES", "MAX_UNPACKED_BYTES", "CaptureRows", "CaptureShelf", "pack", "unpack"]

# A capture kept in the database: at most this much compressed (about 50,000 VMs' objects), and
# at most this much once unpacked (a body that would unpack larger is refused, nothing written).
MAX_KEPT_BYTES: Final = 64 * 1024 * 1024
MAX_UNPACKED_BYTES: Final = 1024 * 1024 * 1024
_CHUNK: Final = 1024 * 1024


class CaptureRows(Protocol):
    """Stored captures (``store.captures.CaptureRows``): records (``store/captures.FIELDS``) and their tar.gz bodies."""

    def capture_rows(self, target: str | None = None) -> list[dict[str, Any]]: ...
    def capture_body(self, capture_id: str) -> bytes | None: ...
    def put_capture(self, record: Mapping[str, Any], body: bytes) -> bool: ...
    def delete_capture(self, capture_id: str) -> bool: ...


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def pack(objects: Path, limit: int = MAX_KEPT_BYTES) -> bytes:
    """The objects folder as a tar.gz (members ``objects/…``); TwinError past ``limit`` bytes."""
    buffer = io.BytesIO()
    cut = False
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(objects.rglob("*")):
            if buffer.tell() > limit:  # no need to compress the rest to refuse it
                cut = True
                break
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=f"objects/{path.relative_to(objects).as_posix()}", recursive=False)
    data = buffer.getvalue()
    if len(data) > limit:
        raise TwinError(
            f"the capture is {'more than ' if cut else ''}{_mib(len(data))} compressed, "
            f"and a capture kept in the database may be at most {_mib(limit)}; nothing was stored",
            hint="An inventory this large would not fit a rehearsal's simulator either "
            "(VMWARE_PILOT_TWIN_MEMORY_MB). Capture a smaller vCenter, or rehearse from one Pilot's "
            "home (`twin capture` without VMWARE_PILOT_DATABASE_URL).",
        )
    return data


def unpack(data: bytes, into: Path, limit: int = MAX_UNPACKED_BYTES) -> Path:
    """Unpack a body ``pack`` made into ``into`` (a new, empty folder) and return its ``objects/``.

    Only regular files and folders under ``objects/`` are written (no links, devices, absolute or
    ``..`` names), each file 0600, and at most ``limit`` bytes in all; otherwise TwinError."""
    written = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                parts = PurePosixPath(member.name).parts
                if (
                    not parts
                    or parts[0] != "objects"
                    or any(p in ("", ".", "..") for p in parts)
                    or member.name.startswith("/")
                    or not (member.isfile() or member.isdir())
                ):
                    raise TwinError(
                        f"the stored capture holds '{member.name[:80]}', which is not a file of its objects",
                        hint="Remove the capture (`vmware-pilot twin remove`) and capture again.",
                    )
                target = into.joinpath(*parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True, mode=0o700)
                    continue
                written += member.size
                if written > limit:
                    raise TwinError(
                        f"the stored capture unpacks to more than {_mib(limit)}",
                        hint="Remove the capture (`vmware-pilot twin remove`) and capture a smaller vCenter.",
                    )
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                source = tar.extractfile(member)
                assert source is not None  # a regular file
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    while chunk := source.read(_CHUNK):
                        out.write(chunk)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise TwinError(
            f"the stored capture cannot be unpacked ({type(exc).__name__}: {str(exc)[:120]})",
            hint="Remove the capture (`vmware-pilot twin remove`) and capture again.",
        ) from None
    return into / "objects"


def _record(row: Mapping[str, Any]) -> Capture:
    return Capture(
        str(row["id"]),
        str(row["target"]),
        str(row["vcenter"]),
        str(row["at"]),
        int(row["objects"]),
        str(row["digest"]),
        "",
    )


class CaptureShelf:
    """The captures of this Pilot: ``home``'s folder, or ``rows`` when given (a database URL)."""

    def __init__(self, home: Path, rows: CaptureRows | None = None, *, max_bytes: int = MAX_KEPT_BYTES):
        self.home = home
        self.rows = rows
        self.max_bytes = max_bytes

    @property
    def where(self) -> str:
        return "the database" if self.rows is not None else str(twins_dir(self.home))

    def list(self) -> list[Capture]:
        """Every capture, newest first (a stored one's ``path`` is empty: see ``materialise``)."""
        if self.rows is None:
            return list_captures(self.home)
        return [_record(r) for r in self.rows.capture_rows()]

    def latest(self, target: str) -> Capture | None:
        if self.rows is None:
            return next((c for c in list_captures(self.home) if c.target == target), None)
        found = self.rows.capture_rows(target)
        return _record(found[0]) if found else None

    def remove(self, capture_id: str) -> Capture:
        if self.rows is None:
            return remove_capture(self.home, capture_id)
        if not ID_PATTERN.match(capture_id):
            raise TwinError(f"'{capture_id[:64]}' is not a capture id", hint="See `vmware-pilot twin list`.")
        found = next((c for c in self.list() if c.id == capture_id), None)
        if found is None or not self.rows.delete_capture(capture_id):
            raise TwinError(
                f"no capture '{capture_id}' in {self.where}", hint="See `vmware-pilot twin list`."
            )
        return found

    def keep(self, made: Capture) -> Capture:
        """Store ``made`` (a capture folder) in the database: its record and its objects, packed."""
        assert self.rows is not None
        body = pack(made.objects_dir, self.max_bytes)
        record = {**made.public(), "size": len(body)}
        if not self.rows.put_capture(record, body):
            raise TwinError(
                f"capture '{made.id}' is in the database already", hint="Wait a second and capture again."
            )
        return replace(made, path="")

    def take(
        self,
        target: str,
        account: Account,
        *,
        govc: str = "",
        progress: Callable[[int], None] | None = None,
    ) -> Capture:
        """Capture ``target`` (``captures.capture``) and keep it here."""
        if self.rows is None:
            return capture(target, self.home, account, govc=govc, progress=progress)
        scratch = Path(tempfile.mkdtemp(prefix="pilot-twin-capture-"))
        try:
            return self.keep(capture(target, scratch, account, govc=govc, progress=progress))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def materialise(self, found: Capture, into: Path) -> Capture:
        """``found`` with a folder the simulator can load: its own in the Pilot home; for a stored
        capture ``into`` (an empty folder the caller removes), unpacked there and checked against
        the record's digest. Blocking: call it from a worker thread."""
        if self.rows is None:
            return found
        data = self.rows.capture_body(found.id)
        if data is None:
            raise TwinError(
                f"capture {found.id} was removed from the database", hint="Capture the target again."
            )
        digest, count = digest_of(unpack(data, into))
        if (digest, count) != (found.digest, found.objects):
            raise TwinError(
                f"capture {found.id} in the database does not match its digest "
                f"({found.digest[:19]}…, {found.objects} objects recorded; {digest[:19]}…, {count} stored)",
                hint="Remove the capture (`vmware-pilot twin remove`) and capture again.",
            )
        return replace(found, path=str(into))
