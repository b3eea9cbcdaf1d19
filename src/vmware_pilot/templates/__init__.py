"""Templates: the built-ins and custom YAML files behind create_workflow_from_template."""

from __future__ import annotations

from vmware_pilot.templates.registry import TemplateRegistry

__all__ = ["TemplateRegistry"]
