"""Composition root: builds every service once from Settings. The only module that knows concrete classes."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.config import Settings
from vmware_pilot.dispatch.protocol import Dispatcher
from vmware_pilot.engine.runner import Runner
from vmware_pilot.engine.secrets import SecretVault
from vmware_pilot.engine.service import PilotService
from vmware_pilot.store.sql import SqlStore, open_store
from vmware_pilot.templates.registry import TemplateRegistry

__all__ = ["CatalogSource", "PilotApp", "build_app"]

_log = logging.getLogger(__name__)


@dataclass
class CatalogSource:
    """Curated + discovered catalog, reloaded when `catalog refresh` rewrites the cache file."""

    cache_path: Path
    _stamp: tuple[int, int] | None = None
    _catalog: Catalog = field(default_factory=Catalog.curated)

    def __call__(self) -> Catalog:
        try:
            stat = self.cache_path.stat()
            stamp: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._catalog = Catalog.load(self.cache_path) if stamp else Catalog.curated()
            self._stamp = stamp
        return self._catalog


@dataclass
class PilotApp:
    settings: Settings
    store: SqlStore
    service: PilotService
    dispatcher: Dispatcher | None = None

    async def aclose(self) -> None:
        """Release pooled sessions and the store."""
        if self.dispatcher is not None:
            await self.dispatcher.aclose()
        self.store.close()

    def close(self) -> None:
        self.store.close()


def build_app(settings: Settings, dispatcher: Dispatcher | None = None) -> PilotApp:
    """Wire store, catalog, templates, dispatcher and the service for these settings."""
    store = open_store(settings)
    catalog = CatalogSource(settings.catalog_cache_path)
    templates = TemplateRegistry(settings.resolved_templates_dir, catalog(), home=Path.home())
    runner = Runner(store, catalog, dispatcher, SecretVault())
    service = PilotService(store, catalog, templates, runner)
    return PilotApp(settings=settings, store=store, service=service, dispatcher=dispatcher)
