from __future__ import annotations

import pytest
from sqlalchemy import Connection, inspect, text

from tests.support.backends import Database
from tests.support.store_helpers import recorded_schema, sample_workflow
from vmware_pilot.config import Settings
from vmware_pilot.domain.enums import WorkflowState
from vmware_pilot.errors import SchemaTooNew, StoreError
from vmware_pilot.store.connection import make_engine
from vmware_pilot.store.migrations import (
    CONTRACTS,
    EXPANDS_AFTER,
    LATEST,
    MIGRATIONS,
    SchemaVersion,
    current_version,
    migrate,
    needed_version,
    schema_version,
)
from vmware_pilot.store.sql import open_store
from vmware_pilot.store.tables import metadata

# These tests migrate from empty or from an old version: the PostgreSQL database starts empty.
pytestmark = pytest.mark.empty_database


def _triggers(database: Database) -> set[str]:
    query = (
        "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        if database.backend == "sqlite"
        else "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"
    )
    with database.raw() as conn:
        return set(conn.execute(text(query)).scalars())


def _old_database(backend_settings: Settings, version: int) -> None:
    engine = make_engine(backend_settings.resolved_database_url)
    backend_settings.home_path.mkdir(parents=True, exist_ok=True)
    with engine.begin() as conn:
        migrate(conn, MIGRATIONS[:version])
    engine.dispose()


def test_fresh_database_gets_the_latest_schema_matching_the_table_definitions(
    backend_settings: Settings,
) -> None:
    with open_store(backend_settings) as store, store.database.engine.connect() as conn:
        assert current_version(conn) == LATEST
        found = inspect(conn)
        for table in metadata.sorted_tables:
            assert {c["name"] for c in found.get_columns(table.name)} == set(table.c.keys())
        index_names = {ix["name"] for ix in found.get_indexes("workflows")}
        assert "ix_workflows_active_created" in index_names


def test_old_version_database_is_migrated_and_keeps_its_rows(
    backend_settings: Settings, database: Database
) -> None:
    _old_database(backend_settings, version=1)
    with database.raw() as conn:
        for wid, state, created in (("wf-a", "pending", "2026-01-01"), ("wf-b", "completed", "2026-01-02")):
            conn.execute(
                text(
                    "INSERT INTO workflows (id, type, state, version, created_at, updated_at, created_by, "
                    "document, audit_head, audit_count) VALUES (:id, 't', :state, 1, :c, :c, '', '{}', :h, 0)"
                ),
                {"id": wid, "state": state, "c": created, "h": "0" * 64},
            )
        assert conn.execute(text("SELECT value FROM schema_meta")).scalar() == "1"

    with open_store(backend_settings) as store:
        # Version 2 backfilled the active flag from the state; version 3 made events append-only.
        assert [row["id"] for row in store.workflows.list_active()] == ["wf-a"]
        assert store.workflows.count_active() == 1
        assert [row["id"] for row in store.workflows.list_all(states=[WorkflowState.COMPLETED])] == ["wf-b"]
        # Version 5 listed both in the ledger.
        assert store.audit.verify_audit().ok and store.audit.verify_audit().workflows == 2
    with database.raw() as conn:
        assert {str(k): str(v) for k, v in conn.execute(text("SELECT key, value FROM schema_meta"))} == (
            recorded_schema(LATEST)
        )
        ledger = set(conn.execute(text("SELECT workflow_id FROM workflow_ledger")).scalars())
        assert ledger == {"wf-a", "wf-b"}
    if database.backend == "sqlite":
        expected = {"audit_events_no_update", "audit_events_no_delete"}
        expected |= {"workflow_ledger_no_update", "workflow_ledger_no_delete"}
    else:
        expected = {"audit_events_no_change", "audit_events_no_truncate"}
        expected |= {"workflow_ledger_no_change", "workflow_ledger_no_truncate"}
    assert _triggers(database) == expected


def test_opening_again_applies_nothing_twice(backend_settings: Settings) -> None:
    open_store(backend_settings).close()
    with open_store(backend_settings) as store, store.database.engine.connect() as conn:
        assert current_version(conn) == LATEST


def test_database_from_a_newer_vmware_pilot_is_refused_with_a_hint(
    backend_settings: Settings, database: Database
) -> None:
    open_store(backend_settings).close()
    with database.raw() as conn:
        conn.execute(text("UPDATE schema_meta SET value = :v"), {"v": str(LATEST + 1)})
    with pytest.raises(SchemaTooNew) as caught:
        open_store(backend_settings)
    assert caught.value.fields["schema_version"] == LATEST + 1
    assert "Upgrade vmware-pilot" in caught.value.hint


def test_foreign_database_with_a_workflows_table_is_refused(
    backend_settings: Settings, database: Database
) -> None:
    backend_settings.home_path.mkdir(parents=True)
    with database.raw() as conn:
        conn.execute(text("CREATE TABLE workflows (id TEXT PRIMARY KEY, type TEXT, state TEXT, data TEXT)"))
    with pytest.raises(StoreError, match="no vmware-pilot schema version") as caught:
        open_store(backend_settings)
    assert "VMWARE_PILOT_DATABASE_URL" in caught.value.hint


# Expand, then contract (the module docstring of store/migrations.py): the next release's migrations
# as it would write them, applied by its migrate() to a database this build then opens.


def _expand(conn: Connection) -> None:
    """A next release's expansion: a nullable column and a table this build knows nothing of."""
    conn.execute(text("ALTER TABLE workflows ADD COLUMN next_note TEXT"))
    conn.execute(text("CREATE TABLE next_things (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"))


def _contract(conn: Connection) -> None:
    """A later release's contraction: what this build still reads is gone."""
    conn.execute(text("DROP INDEX ix_workflows_created"))


def _meta(database: Database) -> dict[str, str]:
    with database.raw() as conn:
        return {str(k): str(v) for k, v in conn.execute(text("SELECT key, value FROM schema_meta"))}


def test_a_fresh_database_records_the_migrations_applied_and_the_oldest_schema_a_build_needs(
    backend_settings: Settings, database: Database
) -> None:
    open_store(backend_settings).close()
    # Migrations after EXPANDS_AFTER expand: the release before reads the version it knows.
    assert _meta(database) == recorded_schema(LATEST)
    assert recorded_schema(EXPANDS_AFTER) == {"schema_version": str(EXPANDS_AFTER)}  # as 3.0.0 wrote it
    with database.raw() as conn:
        assert schema_version(conn) == SchemaVersion(LATEST, needed_version(LATEST))


def test_this_build_keeps_serving_a_database_the_next_release_expanded(
    backend_settings: Settings, database: Database
) -> None:
    with open_store(backend_settings) as store:
        before = sample_workflow("before")
        store.workflows.create(before)
    engine = make_engine(backend_settings.resolved_database_url)
    with engine.begin() as conn:
        assert migrate(conn, (*MIGRATIONS, _expand)) == LATEST + 1
    engine.dispose()
    # What every build reads is unchanged; the applied count is a row of its own.
    assert _meta(database) == recorded_schema(LATEST + 1)
    assert _meta(database)["schema_version"] == str(needed_version(LATEST))
    with open_store(backend_settings) as store, store.database.engine.connect() as conn:
        assert schema_version(conn) == SchemaVersion(LATEST + 1, needed_version(LATEST))
        assert current_version(conn) == LATEST + 1
        # this build reads and writes rows of the expanded schema
        assert store.workflows.load(before.id).workflow_type == "before"
        after = sample_workflow("after")
        store.workflows.create(after)
        assert {row["id"] for row in store.workflows.list_all()} == {before.id, after.id}
        assert store.audit.verify_audit().ok
    assert _meta(database) == recorded_schema(LATEST + 1)


def test_a_contraction_is_refused_by_the_builds_it_names_too_old(
    backend_settings: Settings, database: Database
) -> None:
    open_store(backend_settings).close()
    engine = make_engine(backend_settings.resolved_database_url)
    with engine.begin() as conn:
        # the release after next drops what this build reads; the next release (LATEST + 1) copes
        migrate(conn, (*MIGRATIONS, _expand, _contract), {LATEST + 2: LATEST + 1})
    engine.dispose()
    assert _meta(database) == {"schema_version": str(LATEST + 1), "schema_applied": str(LATEST + 2)}
    with pytest.raises(SchemaTooNew) as caught:
        open_store(backend_settings)
    assert caught.value.fields["schema_version"] == LATEST + 1
    engine = make_engine(backend_settings.resolved_database_url)
    with engine.begin() as conn:  # the next release still opens it, and applies nothing
        assert migrate(conn, (*MIGRATIONS, _expand)) == LATEST + 2
    engine.dispose()


def test_every_contraction_names_a_version_between_the_rule_and_itself() -> None:
    assert all(EXPANDS_AFTER <= oldest <= number <= LATEST for number, oldest in CONTRACTS.items())
    assert [needed_version(n) for n in range(1, EXPANDS_AFTER + 1)] == list(range(1, EXPANDS_AFTER + 1))
    assert needed_version(LATEST) <= LATEST
