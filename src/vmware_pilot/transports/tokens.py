"""Bearer tokens for the network transport: a file of names, roles and SHA-256 hashes.

The secret (``vpt_`` + ``secrets.token_urlsafe(32)``) is shown once at creation and never stored;
the file holds ``sha256:<hex>`` of it. The file is private (0600, owned by this user, in a folder
others cannot write), replaced atomically (temporary file + rename, under an exclusive lock) and
re-read whenever it changes, so create/revoke/set-role apply to the next request without a
restart. Verification hashes the presented secret and compares it with every entry in constant
time. An unsafe or unreadable file yields no tokens: every request is then refused.

When ``VMWARE_PILOT_DATABASE_URL`` is set, ``DbTokenStore`` keeps the same entries as rows of the
database instead (store/tokens.py), so a token created on one host works on every replica; it is
read on every request. While that database cannot be read no token can be checked: the HTTP
transport answers requests that carry one with 503 and ``Retry-After`` (transports/callers.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vmware_pilot.errors import DatabaseUnavailable, InvalidInput, PilotError
from vmware_pilot.safety.duties import is_valid_name

if TYPE_CHECKING:
    from vmware_pilot.store import TokenRows

__all__ = [
    "SECRET_PREFIX",
    "TOKENS_FILE",
    "DbTokenStore",
    "TokenEntry",
    "TokenStore",
    "TokenStoreError",
    "Tokens",
    "hash_secret",
]

_log = logging.getLogger(__name__)

TOKENS_FILE = "tokens.json"
SECRET_PREFIX = "vpt_"  # noqa: S105 (a marker for secret scanners, not a secret)
_FORMAT = 1
_MAX_SECRET = 256
_HOME_HINT = "Point VMWARE_PILOT_HOME at a folder you can write, or fix the permissions of the one named."


class TokenStoreError(PilotError):
    """The token file cannot be used (unsafe permissions, unreadable, malformed)."""


@dataclass(frozen=True, slots=True)
class TokenEntry:
    name: str
    role: str
    hash: str
    created_at: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "role": self.role, "hash": self.hash, "created_at": self.created_at}


def hash_secret(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode("utf-8")).hexdigest()


class Tokens(Protocol):
    """Where tokens are kept: the token file (``TokenStore``) or the database (``DbTokenStore``)."""

    def entries(self) -> list[TokenEntry]: ...
    def verify(self, secret: str) -> TokenEntry | None: ...
    def create(self, name: str, role: str) -> str: ...
    def revoke(self, name: str) -> None: ...
    def set_role(self, name: str, role: str) -> None: ...


def _match(entries: list[TokenEntry], secret: str) -> TokenEntry | None:
    """The entry whose hash is the secret's; every entry is compared, so timing does not tell which."""
    digest = hash_secret(secret)
    found: TokenEntry | None = None
    for entry in entries:
        if hmac.compare_digest(entry.hash, digest):
            found = entry
    return found


def _check_name(name: str) -> None:
    if not is_valid_name(name):
        raise InvalidInput(
            f"token name {name!r} is not valid",
            field="name",
            hint="Use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.",
        )


def _exists(name: str) -> InvalidInput:
    return InvalidInput(
        f"a token named {name!r} already exists",
        field="name",
        hint=f"Pick another name, or `vmware-pilot token revoke {name}` first.",
    )


def _missing(name: str) -> InvalidInput:
    return InvalidInput(
        f"no token named {name!r}", field="name", hint="`vmware-pilot token list` shows the tokens."
    )


def _new_secret() -> tuple[str, str]:
    """A new secret and its creation time."""
    return SECRET_PREFIX + secrets.token_urlsafe(32), datetime.now(UTC).isoformat(timespec="seconds")


def _check_private(path: Path, st: os.stat_result) -> None:
    """Refuse a file others could read or replace: it decides who may act on the platform."""
    if st.st_uid != os.geteuid():
        raise TokenStoreError(
            f"{path} is owned by uid {st.st_uid}, not by the user running Pilot (uid {os.geteuid()})",
            hint=f"Run Pilot as the file's owner, or recreate the tokens as this user (remove {path}).",
        )
    if st.st_mode & 0o077:
        raise TokenStoreError(
            f"{path} is accessible to other users (mode {stat.S_IMODE(st.st_mode):04o})",
            hint=f"chmod 600 {path}",
        )
    parent = path.parent.stat()
    if parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX:
        raise TokenStoreError(
            f"{path.parent} can be written by other users, who could replace the token file",
            hint=f"chmod go-w {path.parent}",
        )


def _parse(path: Path, text: str) -> list[TokenEntry]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise TokenStoreError(
            f"{path} is not valid JSON ({exc})",
            hint="Restore it from a backup, or remove it and create the tokens again.",
        ) from None
    items = doc.get("tokens") if isinstance(doc, dict) else None
    if not isinstance(items, list) or doc.get("format") != _FORMAT:
        raise TokenStoreError(
            f"{path} is not a vmware-pilot token file (format {_FORMAT})",
            hint="Remove it and create the tokens again with `vmware-pilot token create`.",
        )
    entries: list[TokenEntry] = []
    for i, item in enumerate(items):
        fields = (item.get(k) if isinstance(item, dict) else None for k in ("name", "role", "hash"))
        name, role, digest = fields
        if not (
            isinstance(name, str)
            and is_valid_name(name)
            and isinstance(role, str)
            and isinstance(digest, str)
            and digest.startswith("sha256:")
            and len(digest) == len("sha256:") + 64
        ):
            raise TokenStoreError(
                f"{path}: entry {i} is malformed",
                hint="Fix or remove that entry (`vmware-pilot token revoke NAME` rewrites the file).",
            )
        entries.append(TokenEntry(name, role, digest, str(item.get("created_at", ""))))
    return entries


class TokenStore:
    """The token file at ``path``. Reads are cached until the file changes; writes are atomic."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._guard = threading.Lock()
        self._data: bytes | None = None
        self._entries: list[TokenEntry] = []
        self._problem: str | None = None

    # --- reading ----------------------------------------------------------------------------
    def _raw(self) -> bytes | None:
        """The file's bytes (None when it does not exist), after checking it is private."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:  # a home under a file, a folder it may not enter
            raise TokenStoreError(f"{self.path} cannot be read ({exc})", hint=_HOME_HINT) from None
        _check_private(self.path, st)
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TokenStoreError(f"{self.path} cannot be read ({exc})", hint="Check the file.") from None

    def _read(self) -> list[TokenEntry]:
        data = self._raw()
        return [] if data is None else _parse(self.path, data.decode("utf-8", "replace"))

    def _current(self) -> list[TokenEntry]:
        """The entries, parsed again whenever the file's bytes changed; raises when unusable.

        The file is small and read on every call, so a change is never missed (no reliance on
        timestamps) and takes effect on the next request.
        """
        with self._guard:
            try:
                data = self._raw()
                if data != self._data:
                    text = "" if data is None else data.decode("utf-8", "replace")
                    self._entries = [] if data is None else _parse(self.path, text)
                    self._data = data
            except TokenStoreError as exc:
                if exc.message != self._problem:
                    _log.error("token file unusable, every token is refused: %s", exc.message)
                    self._problem = exc.message
                raise
            self._problem = None
            return list(self._entries)

    def entries(self) -> list[TokenEntry]:
        """Every token, read now; raises ``TokenStoreError`` when the file is unusable (the
        caller says so: only a server's ``verify`` logs it)."""
        return self._read()

    def verify(self, secret: str) -> TokenEntry | None:
        """The token whose secret this is, or None (also when the file is unusable)."""
        if not secret or len(secret) > _MAX_SECRET:
            return None
        try:
            entries = self._current()
        except TokenStoreError:
            return None
        return _match(entries, secret)

    # --- writing ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[list[TokenEntry]]:
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        except OSError as exc:
            raise TokenStoreError(f"{self.path} cannot be written ({exc})", hint=_HOME_HINT) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self._read()
        finally:
            os.close(fd)  # closing releases the lock

    def _write(self, entries: list[TokenEntry]) -> None:
        doc: dict[str, Any] = {"format": _FORMAT, "tokens": [e.to_dict() for e in entries]}
        data = (json.dumps(doc, indent=2) + "\n").encode("utf-8")
        tmp = self.path.with_name(self.path.name + ".tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()  # left by a crash; we hold the lock, so nobody else is writing it
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            tmp.replace(self.path)
        except OSError as exc:  # a full disk, a read-only file system: the file is unchanged
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise TokenStoreError(f"{self.path} cannot be written ({exc})", hint=_HOME_HINT) from None
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def create(self, name: str, role: str) -> str:
        """Add token ``name`` with ``role``; returns the secret (shown once, never stored)."""
        _check_name(name)
        with self._locked() as entries:
            if any(e.name == name for e in entries):
                raise _exists(name)
            secret, created = _new_secret()
            self._write([*entries, TokenEntry(name, role, hash_secret(secret), created)])
        return secret

    def revoke(self, name: str) -> None:
        with self._locked() as entries:
            kept = [e for e in entries if e.name != name]
            if len(kept) == len(entries):
                raise _missing(name)
            self._write(kept)

    def set_role(self, name: str, role: str) -> None:
        with self._locked() as entries:
            if not any(e.name == name for e in entries):
                raise _missing(name)
            self._write(
                [TokenEntry(e.name, role, e.hash, e.created_at) if e.name == name else e for e in entries]
            )


class DbTokenStore:
    """The tokens as rows of the app's database (``api_tokens``), read on every call."""

    def __init__(self, rows: TokenRows) -> None:
        self.rows = rows
        self._problem: str | None = None

    def entries(self) -> list[TokenEntry]:
        """Every token; raises ``StoreError`` when the database cannot be read (an outage is
        logged once by the store itself, other problems here once per problem)."""
        try:
            rows = self.rows.token_rows()
        except PilotError as exc:
            if not isinstance(exc, DatabaseUnavailable) and exc.message != self._problem:
                _log.error("token table unreadable, every token is refused: %s", exc.message)
                self._problem = exc.message
            raise
        self._problem = None
        return [TokenEntry(*row) for row in rows]

    def verify(self, secret: str) -> TokenEntry | None:
        """The token whose secret this is, or None; raises ``StoreError`` when the database cannot
        be read (nobody can tell then whether the secret is a token: the caller is answered 503)."""
        if not secret or len(secret) > _MAX_SECRET:
            return None
        return _match(self.entries(), secret)

    def create(self, name: str, role: str) -> str:
        _check_name(name)
        secret, created = _new_secret()
        if not self.rows.add_token(name, role, hash_secret(secret), created):
            raise _exists(name)
        return secret

    def revoke(self, name: str) -> None:
        if not self.rows.delete_token(name):
            raise _missing(name)

    def set_role(self, name: str, role: str) -> None:
        if not self.rows.set_token_role(name, role):
            raise _missing(name)
