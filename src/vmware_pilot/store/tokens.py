"""The network transport's bearer tokens as rows (``api_tokens``), shared by every replica.

Only the SHA-256 of a secret is stored (``sha256:<hex>``), as in the token file. The transport's
``DbTokenStore`` (transports/tokens.py) reads and writes through these functions.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

__all__ = ["TokenRow", "delete", "insert", "rows", "set_role"]

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
