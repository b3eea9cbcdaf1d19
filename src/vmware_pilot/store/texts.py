"""The texts every replica of one database shares as rows: custom templates, the policy and the skill
catalog's discovery cache (``TemplateRows``, ``PolicyRow``, ``CatalogRow``).

``custom_templates`` holds one row per template: its name and its YAML text, checked by the same
loader as a file of the templates folder once per change of the text (``template_digests`` tells
every replica which texts changed without sending them). ``catalog_cache`` holds the
discovery cache of `vmware-pilot catalog refresh` (the JSON the file ``catalog.json`` holds on a
single host) in its one row, ``discovered``; ``policies`` the policy file's text in its one row,
``current``. All are used instead of the files whenever a database
URL is set (app.py, cli/).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from vmware_pilot.domain.clock import iso
from vmware_pilot.templates.custom import digest_of

if TYPE_CHECKING:
    from vmware_pilot.store.database import Database

__all__ = [
    "CATALOG_KEY",
    "CatalogRow",
    "PolicyRow",
    "TemplateRows",
    "catalog_row",
    "catalog_stamp",
    "delete_template",
    "policy_row",
    "policy_stamp",
    "put_catalog",
    "put_policy",
    "put_template",
    "template_digests",
    "template_rows",
]

CATALOG_KEY = "discovered"
POLICY_KEY = "current"


def template_rows(conn: Connection, name: str | None = None) -> list[tuple[str, str]]:
    """(name, YAML text) of every template, by name; only ``name``'s when given."""
    if name is None:
        found = conn.execute(text("SELECT name, body FROM custom_templates ORDER BY name"))
    else:
        found = conn.execute(text("SELECT name, body FROM custom_templates WHERE name = :n"), {"n": name})
    return [(str(r.name), str(r.body)) for r in found]


def template_digests(conn: Connection) -> list[tuple[str, str]]:
    """(name, SHA-256 of the UTF-8 text) of every template, by name: computed by PostgreSQL
    itself (the texts stay on the server), by this process on SQLite (a local file read)."""
    if conn.dialect.name == "postgresql":
        found = conn.execute(
            text(
                "SELECT name, encode(sha256(convert_to(body, 'UTF8')), 'hex') AS digest "
                "FROM custom_templates ORDER BY name"
            )
        )
        return [(str(r.name), str(r.digest)) for r in found]
    return [(name, digest_of(body)) for name, body in template_rows(conn)]


def put_template(conn: Connection, name: str, body: str, previous: str | None, at: str, by: str) -> bool:
    """Write template ``name`` if it still holds ``previous`` (None: it must not exist yet);
    False when another writer changed it first (the caller's transaction is then unchanged)."""
    if previous is None:
        if conn.execute(text("SELECT 1 FROM custom_templates WHERE name = :n"), {"n": name}).first():
            return False
        conn.execute(
            text(
                "INSERT INTO custom_templates (name, body, updated_at, updated_by) VALUES (:n, :b, :at, :by)"
            ),
            {"n": name, "b": body, "at": at, "by": by},
        )
        return True
    done = conn.execute(
        text(
            "UPDATE custom_templates SET body = :b, updated_at = :at, updated_by = :by "
            "WHERE name = :n AND body = :prev"
        ),
        {"n": name, "b": body, "at": at, "by": by, "prev": previous},
    )
    return done.rowcount == 1


def delete_template(conn: Connection, name: str, previous: str | None = None) -> bool:
    """Remove template ``name`` (only while it holds ``previous``, when given)."""
    if previous is None:
        done = conn.execute(text("DELETE FROM custom_templates WHERE name = :n"), {"n": name})
    else:
        done = conn.execute(
            text("DELETE FROM custom_templates WHERE name = :n AND body = :prev"),
            {"n": name, "prev": previous},
        )
    return done.rowcount == 1


def catalog_row(conn: Connection) -> tuple[str, str] | None:
    """(JSON text, updated_at) of the catalog cache; None before the first refresh."""
    row = conn.execute(
        text("SELECT body, updated_at FROM catalog_cache WHERE key = :k"), {"k": CATALOG_KEY}
    ).first()
    return None if row is None else (str(row.body), str(row.updated_at))


def catalog_stamp(conn: Connection) -> str | None:
    """The updated_at of the catalog cache alone (cheap to ask on every use)."""
    value = conn.execute(
        text("SELECT updated_at FROM catalog_cache WHERE key = :k"), {"k": CATALOG_KEY}
    ).scalar()
    return None if value is None else str(value)


def put_catalog(conn: Connection, body: str, at: str) -> None:
    done = conn.execute(
        text("UPDATE catalog_cache SET body = :b, updated_at = :at WHERE key = :k"),
        {"b": body, "at": at, "k": CATALOG_KEY},
    )
    if done.rowcount == 0:
        conn.execute(
            text("INSERT INTO catalog_cache (key, body, updated_at) VALUES (:k, :b, :at)"),
            {"b": body, "at": at, "k": CATALOG_KEY},
        )


def policy_row(conn: Connection) -> tuple[str, str, str, str] | None:
    """(YAML text, digest, updated_at, updated_by) of the stored policy; None when there is none."""
    found = conn.execute(
        text("SELECT body, digest, updated_at, updated_by FROM policies WHERE key = :k"), {"k": POLICY_KEY}
    ).first()
    return (
        None
        if found is None
        else (str(found.body), str(found.digest), str(found.updated_at), str(found.updated_by))
    )


def policy_stamp(conn: Connection) -> str | None:
    """The stored policy's digest (None: no policy stored): what changed, without the text."""
    found = conn.execute(text("SELECT digest FROM policies WHERE key = :k"), {"k": POLICY_KEY}).first()
    return None if found is None else str(found.digest)


def put_policy(conn: Connection, body: str, digest: str, at: str, by: str) -> None:
    """Store the policy (a text already checked) in place of the one stored."""
    done = conn.execute(
        text("UPDATE policies SET body = :b, digest = :d, updated_at = :at, updated_by = :by WHERE key = :k"),
        {"k": POLICY_KEY, "b": body, "d": digest, "at": at, "by": by},
    )
    if done.rowcount == 0:
        conn.execute(
            text(
                "INSERT INTO policies (key, body, digest, updated_at, updated_by) VALUES (:k, :b, :d, :at, :by)"
            ),
            {"k": POLICY_KEY, "b": body, "d": digest, "at": at, "by": by},
        )


def _now() -> str:
    return iso(datetime.now(UTC))


class TemplateRows:
    """Custom templates' rows over the app's ``Database`` (``templates/registry.py``'s rows)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def template_rows(self, name: str | None = None) -> list[tuple[str, str]]:
        """(name, YAML text) of every stored template (only ``name``'s when given)."""
        with self._db.transaction(write=False) as conn:
            return template_rows(conn, name)

    def template_digests(self) -> list[tuple[str, str]]:
        """(name, SHA-256 of the YAML text) of every stored template: what changed, cheaply."""
        with self._db.transaction(write=False) as conn:
            return template_digests(conn)

    def put_template(self, name: str, body: str, previous: str | None, by: str) -> bool:
        """Write template ``name`` if it still holds ``previous`` (None: if there is none); False
        when another writer got there first."""
        try:
            with self._db.transaction(write=True) as conn:
                return put_template(conn, name, body, previous, _now(), by)
        except IntegrityError:  # inserted by another writer at the same moment
            return False

    def delete_template(self, name: str, previous: str | None = None) -> bool:
        with self._db.transaction(write=True) as conn:
            return delete_template(conn, name, previous)


class CatalogRow:
    """The skill catalog's discovery cache as one row over the app's ``Database``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def catalog_cache(self) -> tuple[str, str] | None:
        """(JSON text, updated_at) of the catalog cache; None before the first refresh."""
        with self._db.transaction(write=False) as conn:
            return catalog_row(conn)

    def catalog_stamp(self) -> str | None:
        # Read before every save of a run (the diff report's catalog): one round trip.
        with self._db.transaction(write=False, single=True) as conn:
            return catalog_stamp(conn)

    def put_catalog_cache(self, body: str) -> None:
        for attempt in (1, 2):
            try:
                with self._db.transaction(write=True) as conn:
                    put_catalog(conn, body, _now())
                return
            except IntegrityError:  # first written by another refresh at the same moment
                if attempt == 2:
                    raise


class PolicyRow:
    """The policy in force as one row over the app's ``Database`` (``policy/source.py``'s rows)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def policy_row(self) -> tuple[str, str, str, str] | None:
        """(YAML text, digest, updated_at, updated_by) of the stored policy; None without one."""
        with self._db.transaction(write=False) as conn:
            return policy_row(conn)

    def policy_stamp(self) -> str | None:
        with self._db.transaction(write=False) as conn:
            return policy_stamp(conn)

    def put_policy(self, body: str, digest: str, by: str) -> None:
        for attempt in (1, 2):
            try:
                with self._db.transaction(write=True) as conn:
                    put_policy(conn, body, digest, _now(), by)
                return
            except IntegrityError:  # first written by another import at the same moment
                if attempt == 2:
                    raise
