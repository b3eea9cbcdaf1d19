"""Fixtures for template tests: registries on a temporary templates folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.templates.registry import TemplateRegistry


@pytest.fixture
def templates_dir(tmp_path: Path) -> Path:
    return tmp_path / "workflows"


@pytest.fixture
def registry(templates_dir: Path, _isolated_home: Path) -> TemplateRegistry:
    """A registry on the curated catalog (no discovered schemas), home = the test's HOME."""
    return TemplateRegistry(templates_dir, Catalog.curated(), home=_isolated_home)


@pytest.fixture
def snapshot_registry(templates_dir: Path, companion_tools: dict[str, Any]) -> TemplateRegistry:
    """A registry that knows the real companion tools' schemas."""
    return TemplateRegistry(templates_dir, Catalog.from_snapshot(companion_tools))
