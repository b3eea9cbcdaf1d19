"""The current table definitions the store queries (created only by ``migrations``, never here)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = [
    "api_tokens",
    "audit_events",
    "catalog_cache",
    "console_sessions",
    "custom_templates",
    "leases",
    "mcp_tasks",
    "metadata",
    "object_locks",
    "policies",
    "schema_meta",
    "twin_captures",
    "workflow_counts",
    "workflow_ledger",
    "workflows",
]

metadata = MetaData()

schema_meta = Table(
    "schema_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(255), nullable=False),
)

# Timestamps are UTC ISO-8601 text with microseconds, so text order is time order.
workflows = Table(
    "workflows",
    metadata,
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
    Column("is_active", Boolean, nullable=False),
)

audit_events = Table(
    "audit_events",
    metadata,
    # 64-bit on every backend (SQLite's INTEGER key is; its rowid alias must be spelled INTEGER).
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("workflow_id", String(64), ForeignKey("workflows.id"), nullable=False),
    Column("ts", String(40), nullable=False),
    Column("actor", String(255), nullable=False),
    Column("action", String(64), nullable=False),
    Column("detail", Text, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    sqlite_autoincrement=True,
)

# One row per workflow ever created, never changed or deleted: ``verify`` reports a workflow listed
# here whose row and events are gone.
workflow_ledger = Table(
    "workflow_ledger",
    metadata,
    Column("workflow_id", String(64), primary_key=True),
    Column("created_at", String(40), nullable=False),
)

# The run lease of each workflow (store/leases.py): expiry in epoch seconds on the database's clock.
leases = Table(
    "leases",
    metadata,
    Column("workflow_id", String(64), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("fence", BigInteger, nullable=False),
)

# Object locks (store/locks.py): which workflow holds an object its write steps name, tied to
# that workflow's run lease (``run_key``, a row of ``leases``).
object_locks = Table(
    "object_locks",
    metadata,
    Column("object_key", String(255), primary_key=True),
    Column("workflow_id", String(64), nullable=False, index=True),
    Column("run_key", String(64), nullable=False),
    Column("taken_at", Float, nullable=False),
)

# Maintained counters (one row per name; "active" = workflows whose is_active is true), updated in
# the transaction of every write that changes them, so a count never scans the workflows table.
workflow_counts = Table(
    "workflow_counts",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("value", Integer, nullable=False),
)

# Console sign-in sessions (store/sessions.py): the cookie value's SHA-256, never the value.
console_sessions = Table(
    "console_sessions",
    metadata,
    Column("session_hash", String(64), primary_key=True),
    Column("identity", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
)

# Bearer tokens of the network transport (store/tokens.py): the secret's SHA-256, never the secret.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("role", String(255), nullable=False),
    Column("hash", String(71), nullable=False, unique=True),
    Column("created_at", String(40), nullable=False),
)

# Custom templates (store/texts.py): each one's YAML text, read through the folder loader's checks.
custom_templates = Table(
    "custom_templates",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("body", Text, nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("updated_by", String(255), nullable=False),
)

# The skill catalog's discovery cache (store/texts.py): one row, the JSON of `catalog refresh`.
catalog_cache = Table(
    "catalog_cache",
    metadata,
    Column("key", String(32), primary_key=True),
    Column("body", Text, nullable=False),
    Column("updated_at", String(40), nullable=False),
)

# The policy (store/texts.py): its YAML text in one row, with the digest of its canonical form.
policies = Table(
    "policies",
    metadata,
    Column("key", String(32), primary_key=True),
    Column("body", Text, nullable=False),
    Column("digest", String(64), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("updated_by", String(255), nullable=False),
)

# Captures for rehearsals on a twin (store/captures.py): the record and the objects folder, tar.gz.
twin_captures = Table(
    "twin_captures",
    metadata,
    Column("id", String(140), primary_key=True),
    Column("target", String(64), nullable=False),
    Column("vcenter", String(300), nullable=False),
    Column("at", String(40), nullable=False),
    Column("objects", Integer, nullable=False),
    Column("digest", String(71), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("body", LargeBinary, nullable=False),
)
Index("ix_twin_captures_target_at", twin_captures.c.target, twin_captures.c.at)

# MCP tasks (store/tasks.py): times on the database's clock, the outcome as JSON text.
mcp_tasks = Table(
    "mcp_tasks",
    metadata,
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
