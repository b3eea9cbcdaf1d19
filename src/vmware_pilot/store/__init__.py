"""Durable workflows: the ``Store`` protocol the engine uses, and the public entry to the stores.

The package is the door for every layer above it: ``open_store`` opens the one database of a
process (``Database``) and the narrow stores over it (``SqlStore``); ``MemoryStore`` is the same
protocol in memory (one process, nothing durable: tests and embedders). The SQL names load
SQLAlchemy only when first used, so importing the protocol stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vmware_pilot.store.protocol import (
    AuditRecord,
    AuditReport,
    AuditStore,
    LeaseStore,
    LockStore,
    OutboxStore,
    Store,
    WorkflowStore,
    WorkflowSummary,
)

if TYPE_CHECKING:
    from vmware_pilot.store.captures import CaptureRows
    from vmware_pilot.store.database import Database
    from vmware_pilot.store.memory import MemoryStore
    from vmware_pilot.store.migrations import LATEST
    from vmware_pilot.store.sessions import SessionRow, SessionRows
    from vmware_pilot.store.sql import DatabaseState, SqlStore, StoreGauges, database_state, open_store
    from vmware_pilot.store.texts import CatalogRow, PolicyRow, TemplateRows
    from vmware_pilot.store.tokens import TokenRow, TokenRows

__all__ = [
    "LATEST",
    "AuditRecord",
    "AuditReport",
    "AuditStore",
    "CaptureRows",
    "CatalogRow",
    "Database",
    "DatabaseState",
    "LeaseStore",
    "LockStore",
    "MemoryStore",
    "OutboxStore",
    "PolicyRow",
    "SessionRow",
    "SessionRows",
    "SqlStore",
    "Store",
    "StoreGauges",
    "TemplateRows",
    "TokenRow",
    "TokenRows",
    "WorkflowStore",
    "WorkflowSummary",
    "database_state",
    "open_store",
]

_LAZY = {
    "CaptureRows": "captures",
    "CatalogRow": "texts",
    "Database": "database",
    "DatabaseState": "sql",
    "LATEST": "migrations",
    "MemoryStore": "memory",
    "PolicyRow": "texts",
    "SessionRow": "sessions",
    "SessionRows": "sessions",
    "SqlStore": "sql",
    "StoreGauges": "sql",
    "TemplateRows": "texts",
    "TokenRow": "tokens",
    "TokenRows": "tokens",
    "database_state": "sql",
    "open_store": "sql",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vmware_pilot.store' has no attribute {name!r}")
    return getattr(importlib.import_module(f"vmware_pilot.store.{module}"), name)
