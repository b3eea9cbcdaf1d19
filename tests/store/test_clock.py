"""The database's clock (SqlStore.now, docs/architecture.md): every save of a run reads it, so on
PostgreSQL it is one statement sent in autocommit, not a transaction of its own (BEGIN, the
statement, COMMIT: three round trips); the pooled connection goes back to the store's usual
transactions after it (bench/round_trips.py counts both)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text

from tests.support.backends import Database
from vmware_pilot.config import Settings
from vmware_pilot.store.sql import open_store


@pytest.mark.backends("postgresql")
def test_the_database_clock_is_one_statement_without_a_transaction_of_its_own(
    backend_settings: Settings, database: Database
) -> None:
    one_connection = backend_settings.model_copy(update={"database_pool_size": 1})
    with open_store(one_connection) as store:
        begun: list[object] = []
        sent: list[str] = []

        def on_begin(conn: Any) -> None:
            begun.append(conn.get_execution_options().get("isolation_level"))

        def on_execute(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
            sent.append(statement)

        event.listen(store.database.engine, "begin", on_begin)
        event.listen(store.database.engine, "after_cursor_execute", on_execute)
        with database.raw() as conn:
            before = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        read = store.now()
        with database.raw() as conn:
            after = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        assert before <= read <= after
        assert sent == ["SELECT clock_timestamp()"]
        assert begun == ["AUTOCOMMIT"]  # SQLAlchemy's bookkeeping only: no BEGIN is sent
        # The same pooled connection then serves the store's transactions as before.
        with store.database.engine.connect() as conn:
            assert conn.execute(text("SHOW transaction_isolation")).scalar_one() == "read committed"
        event.remove(store.database.engine, "after_cursor_execute", on_execute)
        assert store.workflows.count_active() == 0 and store.audit.verify_audit().ok
