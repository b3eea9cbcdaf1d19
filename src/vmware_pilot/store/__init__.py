"""Durable workflows: the Store protocol (concrete stores are built by ``app``)."""

from vmware_pilot.store.protocol import AuditRecord, AuditReport, Store, WorkflowSummary

__all__ = ["AuditRecord", "AuditReport", "Store", "WorkflowSummary"]
