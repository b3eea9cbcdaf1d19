"""Schema versions: ordered migrations applied when a store opens, recorded in ``schema_meta``.

Each migration is a function of a connection inside the open transaction and defines the tables it
creates itself, so it keeps meaning what it meant when written. A recorded version that is not a
number is refused with StoreError.

Expand, then contract (docs/operations.md#upgrades): during a rolling upgrade a build of the
release before uses a database the new build has migrated. ``schema_meta`` records two numbers:

- ``schema_version``: the oldest schema a build must know to use the database. Every build reads
  it (3.0.0 reads only it): a build that knows fewer migrations refuses the database with
  SchemaTooNew, one that knows more applies the rest.
- ``schema_applied``: the migrations applied, written only when it differs from
  ``schema_version`` (after an expand), so a database without expansions looks as 3.0.0 left it.

Migrations 1 to ``EXPANDS_AFTER`` predate the rule: each needs a build that knows it. A later one
expands (it adds what older builds ignore, and leaves ``schema_version`` where it was) unless
``CONTRACTS`` names it with the oldest schema whose builds can still use the database after it.

``migrate`` runs under a lock, so any number of processes opening one database at once apply each
migration exactly once and all come up: a transaction-scoped advisory lock on PostgreSQL (taken
here), the write lock of ``BEGIN IMMEDIATE`` on SQLite (the caller's write transaction takes it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    func,
    inspect,
    select,
    text,
)

from vmware_pilot.errors import SchemaTooNew, StoreError
from vmware_pilot.store.audit import GENESIS, SealedRow, seal
from vmware_pilot.store.tables import schema_meta

__all__ = [
    "CONTRACTS",
    "EXPANDS_AFTER",
    "LATEST",
    "MIGRATIONS",
    "MIGRATION_LOCK",
    "Migration",
    "SchemaVersion",
    "current_version",
    "migrate",
    "needed_version",
    "schema_version",
]

Migration = Callable[[Connection], None]
_KEY = "schema_version"
_APPLIED = "schema_applied"
# The advisory lock key of schema changes on PostgreSQL (any fixed 64-bit number, unique to Pilot).
MIGRATION_LOCK = 0x766D_7069_6C6F_7401


def _v1_tables(conn: Connection) -> None:
    """workflows (one versioned JSON document per row) and the append-only audit_events."""
    md = MetaData()
    wf = Table(
        "workflows",
        md,
        Column("id", String(64), primary_key=True),
        Column("type", String(255), nullable=False),
        Column("state", String(32), nullable=False),
        Column("version", Integer, nullable=False),
        Column("created_at", String(40), nullable=False),
        Column("updated_at", String(40), nullable=False),
        Column("created_by", String(255), nullable=False),
        Column("document", Text, nullable=False),
        Column("audit_head", String(64), nullable=False),
        Column("audit_count", Integer, nullable=False),
    )
    ev = Table(
        "audit_events",
        md,
        Column("seq", Integer, primary_key=True, autoincrement=True),
        Column("workflow_id", String(64), ForeignKey("workflows.id"), nullable=False),
        Column("ts", String(40), nullable=False),
        Column("actor", String(255), nullable=False),
        Column("action", String(64), nullable=False),
        Column("detail", Text, nullable=False),
        Column("prev_hash", String(64), nullable=False),
        Column("hash", String(64), nullable=False),
        sqlite_autoincrement=True,
    )
    Index("ix_workflows_created", wf.c.created_at, wf.c.id)
    Index("ix_workflows_state_created", wf.c.state, wf.c.created_at)
    Index("ix_audit_events_workflow_seq", ev.c.workflow_id, ev.c.seq)
    md.create_all(conn)


def _v2_active_flag(conn: Connection) -> None:
    """An is_active flag (backfilled from state) and its index, so list_active reads 50 index rows."""
    conn.execute(text("ALTER TABLE workflows ADD COLUMN is_active BOOLEAN NOT NULL DEFAULT FALSE"))
    conn.execute(text("UPDATE workflows SET is_active = (state NOT IN ('completed', 'failed', 'cancelled'))"))
    conn.execute(text("CREATE INDEX ix_workflows_active_created ON workflows (is_active, created_at, id)"))


def _v3_append_only(conn: Connection) -> None:
    """On SQLite, triggers refuse UPDATE and DELETE of audit events."""
    if conn.dialect.name != "sqlite":
        return
    for verb in ("UPDATE", "DELETE"):
        conn.execute(
            text(
                f"CREATE TRIGGER audit_events_no_{verb.lower()} BEFORE {verb} ON audit_events "
                "BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END"
            )
        )


def _v4_seal_rows(conn: Connection) -> None:
    """Seal every workflow row (``audit.seal``): its head hash becomes a hash over the last event
    and the row with its document. Rows stored before are trusted as they are at the upgrade."""
    rows = conn.execute(
        text(
            "SELECT id, type, state, is_active, created_at, updated_at, created_by, document, "
            "audit_count FROM workflows"
        )
    ).all()
    for row in rows:
        last = conn.execute(
            text("SELECT hash FROM audit_events WHERE workflow_id = :id ORDER BY seq DESC LIMIT 1"),
            {"id": row.id},
        ).scalar()
        sealed = SealedRow(
            workflow_id=row.id,
            type=row.type,
            state=row.state,
            is_active=bool(row.is_active),
            created_at=row.created_at,
            updated_at=row.updated_at,
            created_by=row.created_by,
            document=row.document,
        )
        conn.execute(
            text("UPDATE workflows SET audit_head = :head WHERE id = :id"),
            {"head": seal(str(last or GENESIS), int(row.audit_count), sealed), "id": row.id},
        )


_PG_APPEND_ONLY = """
CREATE OR REPLACE FUNCTION pilot_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
END
$$
"""


def _refuse_changes(conn: Connection, table: str) -> None:
    """Triggers that refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL) of ``table``."""
    if conn.dialect.name == "sqlite":
        for verb in ("UPDATE", "DELETE"):
            conn.execute(
                text(
                    f"CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
                )
            )
        return
    conn.execute(text(_PG_APPEND_ONLY))
    conn.execute(
        text(
            f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION pilot_append_only()"
        )
    )
    conn.execute(
        text(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION pilot_append_only()"
        )
    )


def _v5_ledger(conn: Connection) -> None:
    """The audit trail as strong on PostgreSQL as on SQLite, on both:

    - ``workflow_ledger``, append-only, one row per workflow ever created (backfilled), so a
      workflow deleted together with all its events is still known to ``verify``;
    - on PostgreSQL, triggers refusing UPDATE, DELETE and TRUNCATE of audit events, and 64-bit
      event numbers (SQLite's INTEGER key already is).
    """
    md = MetaData()
    ledger = Table(
        "workflow_ledger",
        md,
        Column("workflow_id", String(64), primary_key=True),
        Column("created_at", String(40), nullable=False),
    )
    md.create_all(conn)
    conn.execute(
        text(
            "INSERT INTO workflow_ledger (workflow_id, created_at) "
            "SELECT id, created_at FROM workflows UNION "
            "SELECT workflow_id, MIN(ts) FROM audit_events "
            "WHERE workflow_id NOT IN (SELECT id FROM workflows) GROUP BY workflow_id"
        )
    )
    _refuse_changes(conn, ledger.name)
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE audit_events ALTER COLUMN seq TYPE BIGINT"))
        conn.execute(text("ALTER SEQUENCE audit_events_seq_seq AS BIGINT"))
        _refuse_changes(conn, "audit_events")


def _v6_leases(conn: Connection) -> None:
    """``leases``: the run lease of each workflow (owner, expiry on the database's clock, fence)."""
    md = MetaData()
    Table(
        "leases",
        md,
        Column("workflow_id", String(64), primary_key=True),
        Column("owner", String(255), nullable=False),
        Column("expires_at", Float, nullable=False),
        Column("fence", BigInteger, nullable=False),
    )
    md.create_all(conn)


def _v7_active_count(conn: Connection) -> None:
    """A one-row table holding the number of active workflows (backfilled once), so counting them
    reads one row instead of the active index; the store keeps it in step in every write."""
    md = MetaData()
    counts = Table(
        "workflow_counts",
        md,
        Column("name", String(32), primary_key=True),
        Column("value", Integer, nullable=False),
    )
    md.create_all(conn)
    active = conn.execute(text("SELECT COUNT(*) FROM workflows WHERE is_active")).scalar_one()
    conn.execute(counts.insert().values(name="active", value=int(active)))


def _v8_console_sessions(conn: Connection) -> None:
    """``console_sessions``: signed-in console sessions by the SHA-256 of their cookie value, with
    the identity (JSON) and times on the database's clock, so every replica knows them."""
    md = MetaData()
    Table(
        "console_sessions",
        md,
        Column("session_hash", String(64), primary_key=True),
        Column("identity", Text, nullable=False),
        Column("created_at", Float, nullable=False),
        Column("expires_at", Float, nullable=False, index=True),
    )
    md.create_all(conn)


def _v9_notification_outbox(conn: Connection) -> None:
    """``notifications``: the webhook outbox (store/outbox.py), one row per event, written in the
    transaction of the workflow change it announces and delivered by one sender at a time."""
    md = MetaData()
    outbox = Table(
        "notifications",
        md,
        Column("event_id", String(64), primary_key=True),
        Column("workflow_id", String(64), nullable=False),
        Column("body", Text, nullable=False),
        Column("created_at", Float, nullable=False),
        Column("next_at", Float, nullable=False),
        Column("claimed_until", Float, nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("status", String(16), nullable=False),
    )
    Index("ix_notifications_due", outbox.c.status, outbox.c.next_at)
    md.create_all(conn)


def _v10_shared_state(conn: Connection) -> None:
    """``api_tokens``: the network transport's bearer tokens (name, role, SHA-256 of the secret,
    creation time), so a token created against the database works on every replica."""
    md = MetaData()
    Table(
        "api_tokens",
        md,
        Column("name", String(64), primary_key=True),
        Column("role", String(255), nullable=False),
        Column("hash", String(71), nullable=False, unique=True),
        Column("created_at", String(40), nullable=False),
    )
    md.create_all(conn)


def _v11_shared_templates_catalog(conn: Connection) -> None:
    """``custom_templates`` (name, YAML text, who wrote it when) and ``catalog_cache`` (the
    discovery cache's JSON in one row), so templates and `catalog refresh` reach every replica."""
    md = MetaData()
    Table(
        "custom_templates",
        md,
        Column("name", String(100), primary_key=True),
        Column("body", Text, nullable=False),
        Column("updated_at", String(40), nullable=False),
        Column("updated_by", String(255), nullable=False),
    )
    Table(
        "catalog_cache",
        md,
        Column("key", String(32), primary_key=True),
        Column("body", Text, nullable=False),
        Column("updated_at", String(40), nullable=False),
    )
    md.create_all(conn)


def _v12_policies(conn: Connection) -> None:
    """``policies``: the policy's YAML text in one row, with the SHA-256 of its canonical form,
    so every replica enforces the same policy (`vmware-pilot policy import`)."""
    md = MetaData()
    Table(
        "policies",
        md,
        Column("key", String(32), primary_key=True),
        Column("body", Text, nullable=False),
        Column("digest", String(64), nullable=False),
        Column("updated_at", String(40), nullable=False),
        Column("updated_by", String(255), nullable=False),
    )
    md.create_all(conn)


def _v13_object_locks(conn: Connection) -> None:
    """``object_locks``: the objects each running workflow's write steps name (store/locks.py),
    one row per object, tied to the holder's run lease, so replicas refuse (or hold) a second
    workflow on the same object."""
    md = MetaData()
    Table(
        "object_locks",
        md,
        Column("object_key", String(255), primary_key=True),
        Column("workflow_id", String(64), nullable=False, index=True),
        Column("run_key", String(64), nullable=False),
        Column("taken_at", Float, nullable=False),
    )
    md.create_all(conn)


def _v14_twin_captures(conn: Connection) -> None:
    """``twin_captures``: captures of a vCenter for rehearsals on a twin (store/captures.py), the
    record and the objects folder as a tar.gz, so every replica rehearses on the same capture."""
    md = MetaData()
    captures = Table(
        "twin_captures",
        md,
        Column("id", String(140), primary_key=True),
        Column("target", String(64), nullable=False),
        Column("vcenter", String(300), nullable=False),
        Column("at", String(40), nullable=False),
        Column("objects", Integer, nullable=False),
        Column("digest", String(71), nullable=False),
        Column("size", BigInteger, nullable=False),
        Column("body", LargeBinary, nullable=False),
    )
    Index("ix_twin_captures_target_at", captures.c.target, captures.c.at)
    md.create_all(conn)


def _v15_mcp_tasks(conn: Connection) -> None:
    """``mcp_tasks``: the MCP tasks clients follow (store/tasks.py): who started each, its tool and
    workflow, its status and final outcome, times and expiry on the database's clock, so every
    replica answers ``tasks/get``."""
    md = MetaData()
    Table(
        "mcp_tasks",
        md,
        Column("task_id", String(64), primary_key=True),
        Column("owner", String(300), nullable=False),
        Column("tool", String(64), nullable=False),
        Column("workflow_id", String(64), nullable=False, index=True),
        Column("status", String(16), nullable=False),
        Column("status_message", Text, nullable=False),
        Column("outcome", Text, nullable=True),
        Column("started_by", String(300), nullable=False),
        Column("created_at", Float, nullable=False),
        Column("updated_at", Float, nullable=False),
        Column("ttl", Float, nullable=True),
        Column("expires_at", Float, nullable=True, index=True),
    )
    md.create_all(conn)


MIGRATIONS: tuple[Migration, ...] = (
    _v1_tables,
    _v2_active_flag,
    _v3_append_only,
    _v4_seal_rows,
    _v5_ledger,
    _v6_leases,
    _v7_active_count,
    _v8_console_sessions,
    _v9_notification_outbox,
    _v10_shared_state,
    _v11_shared_templates_catalog,
    _v12_policies,
    _v13_object_locks,
    _v14_twin_captures,
    _v15_mcp_tasks,
)
LATEST = len(MIGRATIONS)
# See the module docstring. A contract is {its number: the oldest schema version (LATEST of a
# build) that still works after it}, between EXPANDS_AFTER and its own number.
EXPANDS_AFTER = 11
CONTRACTS: Mapping[int, int] = {}


class SchemaVersion(NamedTuple):
    """What ``schema_meta`` records: the migrations ``applied`` and the oldest schema ``needed``."""

    applied: int
    needed: int

    def usable_by(self, latest: int) -> bool:
        """Whether a build knowing ``latest`` migrations can use the database as it is (after it
        applies what it knows and the database lacks)."""
        return self.needed <= latest


def needed_version(applied: int, contracts: Mapping[int, int] = CONTRACTS) -> int:
    """The oldest schema a build must know to use a database with ``applied`` migrations."""
    if applied <= EXPANDS_AFTER:
        return applied
    return max([EXPANDS_AFTER, *(oldest for number, oldest in contracts.items() if number <= applied)])


def _number(conn: Connection, key: str) -> int | None:
    value = conn.execute(select(schema_meta.c.value).where(schema_meta.c.key == key)).scalar()
    if value is None:
        return None
    text_value = str(value).strip()
    if not text_value.isascii() or not text_value.isdigit():
        shown = text_value[:40] + ("…" if len(text_value) > 40 else "")
        raise StoreError(
            f"The database records {key.replace('_', ' ')} {shown!r}, which is not a number",
            hint="The schema_meta table was edited or damaged. Restore the database from a backup, or "
            "point VMWARE_PILOT_DATABASE_URL at a new database file.",
        )
    return int(text_value)


def schema_version(conn: Connection) -> SchemaVersion:
    """The schema recorded in the database (``(0, 0)``: nothing created yet)."""
    if not inspect(conn).has_table("schema_meta"):
        if inspect(conn).has_table("workflows"):
            raise StoreError(
                "The database has a 'workflows' table but no vmware-pilot schema version",
                hint="It was not created by vmware-pilot 3 (a 2.4.0 workflows.db?). Point "
                "VMWARE_PILOT_DATABASE_URL at a new database file.",
            )
        return SchemaVersion(0, 0)
    needed = _number(conn, _KEY) or 0
    applied = _number(conn, _APPLIED)
    return SchemaVersion(needed if applied is None else max(applied, needed), needed)


def current_version(conn: Connection) -> int:
    """The number of migrations the database has (0: nothing created yet)."""
    return schema_version(conn).applied


def _lock(conn: Connection) -> None:
    """Wait for other processes migrating the same database (see the module docstring)."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK)))


def migrate(
    conn: Connection, migrations: Sequence[Migration] = MIGRATIONS, contracts: Mapping[int, int] = CONTRACTS
) -> int:
    """Apply the migrations the database lacks, in order, inside the caller's transaction; the
    number of migrations the database has after.

    On SQLite the caller's transaction must hold the write lock (``WRITE_OPTION``), as
    ``open_store``'s does, or two processes may both see an older version.
    """
    _lock(conn)
    found = schema_version(conn)
    if not found.usable_by(len(migrations)):
        raise SchemaTooNew(
            f"The database schema is version {found.needed}; this vmware-pilot understands up to "
            f"version {len(migrations)}",
            hint="Upgrade vmware-pilot (pip install -U vmware-pilot), or point "
            "VMWARE_PILOT_DATABASE_URL at another database.",
            schema_version=found.needed,
            supported=len(migrations),
        )
    if found.applied >= len(migrations):
        return found.applied
    if found.applied == 0:
        schema_meta.create(conn, checkfirst=True)
        conn.execute(schema_meta.insert().values(key=_KEY, value="0"))
    for number, step in enumerate(migrations[found.applied :], start=found.applied + 1):
        step(conn)
        _record(conn, number, max(found.needed, needed_version(number, contracts)))
    return len(migrations)


def _record(conn: Connection, applied: int, needed: int) -> None:
    conn.execute(schema_meta.update().where(schema_meta.c.key == _KEY).values(value=str(needed)))
    conn.execute(schema_meta.delete().where(schema_meta.c.key == _APPLIED))
    if applied != needed:
        conn.execute(schema_meta.insert().values(key=_APPLIED, value=str(applied)))
