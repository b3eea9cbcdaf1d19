"""Captures of a vCenter for rehearsals on a twin, as rows shared by every replica of one database.

``twin_captures`` holds one row per capture: what ``capture.json`` says of it in the Pilot home
(id, target, vCenter, time, object count, digest of the objects' files) and the objects folder
as a gzip-compressed tar (``body``, ``size`` bytes). Listing never reads a body; a rehearsal reads
the newest capture of its target's body once and unpacks it into a temporary folder
(twin/shelf.py). Used instead of ``<home>/twins/`` whenever a database URL is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, insert, select
from sqlalchemy.exc import IntegrityError

from vmware_pilot.store.tables import twin_captures

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = ["FIELDS", "CaptureRows", "body", "delete_capture", "put_capture", "rows"]

# What a row says of its capture, besides the body (the Capture record's fields, and the body's size).
FIELDS = ("id", "target", "vcenter", "at", "objects", "digest", "size")


def rows(conn: Connection, target: str | None = None) -> list[dict[str, Any]]:
    """Every capture (only ``target``'s when given), newest first, without the bodies."""
    query = select(*(twin_captures.c[f] for f in FIELDS)).order_by(
        twin_captures.c.at.desc(), twin_captures.c.id.desc()
    )
    if target is not None:
        query = query.where(twin_captures.c.target == target)
    return [dict(r._mapping) for r in conn.execute(query)]


def body(conn: Connection, capture_id: str) -> bytes | None:
    """The compressed objects folder of capture ``capture_id`` (None: no such capture)."""
    found = conn.execute(select(twin_captures.c.body).where(twin_captures.c.id == capture_id)).scalar()
    return None if found is None else bytes(found)


def put_capture(conn: Connection, record: Mapping[str, Any], data: bytes) -> None:
    """Store a new capture (an id already stored: IntegrityError, the caller's to handle)."""
    values = {f: record[f] for f in FIELDS if f != "size"}
    conn.execute(insert(twin_captures).values(**values, size=len(data), body=data))


def delete_capture(conn: Connection, capture_id: str) -> bool:
    done = conn.execute(delete(twin_captures).where(twin_captures.c.id == capture_id))
    return done.rowcount == 1


class CaptureRows:
    """Captures for rehearsals on a twin (this module) over the app's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def capture_rows(self, target: str | None = None) -> list[dict[str, Any]]:
        """Every stored capture's record (only ``target``'s when given), newest first; no bodies."""
        with self._db.transaction(write=False) as conn:
            return rows(conn, target)

    def capture_body(self, capture_id: str) -> bytes | None:
        """The objects folder of capture ``capture_id``, a tar.gz (None: no such capture)."""
        with self._db.transaction(write=False) as conn:
            return body(conn, capture_id)

    def put_capture(self, record: Mapping[str, Any], data: bytes) -> bool:
        """Store a capture; False when one of that id is stored already."""
        try:
            with self._db.transaction(write=True) as conn:
                put_capture(conn, record, data)
        except IntegrityError:
            return False
        return True

    def delete_capture(self, capture_id: str) -> bool:
        with self._db.transaction(write=True) as conn:
            return delete_capture(conn, capture_id)
