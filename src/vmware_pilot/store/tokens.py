"""The network transport's bearer tokens as rows (``api_tokens``), shared by every replica.

Only the SHA-256 of a secret is stored (``sha256:<hex>``), as in the token file. The transport's
``DbTokenStore`` (transports/tokens.py) reads and writes through these functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = ["TokenRow", "TokenRows", "delete", "insert", "rows", "set_role"]

TokenRow = tuple[str, str, str, str]  # name, role, hash, created_at


def rows(conn: Connection) -> list[TokenRow]:
    found = conn.execute(
        text("SELECT name, role, hash, created_at FROM api_tokens ORDER BY created_at, name")
    )
    return [(str(r.name), str(r.role), str(r.hash), str(r.created_at)) for r in found]


def insert(conn: Connection, name: str, role: str, digest: str, created_at: str) -> bool:
    """Add a token; False when one with that name exists already."""
    if conn.execute(text("SELECT 1 FROM api_tokens WHERE name = :n"), {"n": name}).first():
        return False
    conn.execute(
        text("INSERT INTO api_tokens (name, role, hash, created_at) VALUES (:n, :r, :h, :c)"),
        {"n": name, "r": role, "h": digest, "c": created_at},
    )
    return True


def delete(conn: Connection, name: str) -> bool:
    return conn.execute(text("DELETE FROM api_tokens WHERE name = :n"), {"n": name}).rowcount == 1


def set_role(conn: Connection, name: str, role: str) -> bool:
    done = conn.execute(text("UPDATE api_tokens SET role = :r WHERE name = :n"), {"n": name, "r": role})
    return done.rowcount == 1


class TokenRows:
    """The bearer tokens' rows (this module) over the app's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def token_rows(self) -> list[TokenRow]:
        with self._db.transaction(write=False) as conn:
            return rows(conn)

    def add_token(self, name: str, role: str, digest: str, created_at: str) -> bool:
        """False when a token of that name exists (also one created at the same moment elsewhere)."""
        try:
            with self._db.transaction(write=True) as conn:
                return insert(conn, name, role, digest, created_at)
        except IntegrityError:
            return False

    def delete_token(self, name: str) -> bool:
        with self._db.transaction(write=True) as conn:
            return delete(conn, name)

    def set_token_role(self, name: str, role: str) -> bool:
        with self._db.transaction(write=True) as conn:
            return set_role(conn, name, role)
