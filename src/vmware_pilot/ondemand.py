"""AppOnDemand: the app built at its first use, so a server answers `initialize` at the SDK's pace.

An MCP client starts the stdio server for every session and waits for `initialize`; the store
(SQLAlchemy), the engine, the catalog and the templates are needed only by the first tool call.
``get`` builds the app once (thread-safe: writing tools run in worker threads); a build that fails
(e.g. the store cannot be opened) raises that ``PilotError`` to the call, which reports it with its
hint, and the next call tries again. Work ``prepare`` started (the skill catalog's refresh of a
dispatching server) ends before the first build.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from vmware_pilot.app import PilotApp
    from vmware_pilot.config import Settings
    from vmware_pilot.engine.service import PilotService
    from vmware_pilot.store import SqlStore

__all__ = ["AppOnDemand"]


class AppOnDemand:
    def __init__(self, settings: Settings, app: PilotApp | None = None) -> None:
        self.settings = settings
        self._app = app
        self._lock = threading.Lock()
        self._preparing: threading.Thread | None = None
        self._store_lock = threading.Lock()
        self._store: SqlStore | None = None

    def prepare(self, work: Callable[[Settings], object]) -> None:
        """Start ``work(settings)`` in a daemon thread now (beside the handshake); the app's first
        build waits for it to end, so no tool call sees the state before it (e.g. a stale catalog)."""
        self._preparing = threading.Thread(target=work, args=(self.settings,), name="prepare", daemon=True)
        self._preparing.start()

    def shared_store(self) -> SqlStore | None:
        """With a database URL, the process's one store (``app.shared_store``), opened at the first
        need: the catalog's refresh in ``prepare`` and the app's build use the same one."""
        if self._app is not None:  # built (with a database URL its store is that database)
            return self._app.sql if self.settings.database_url else None
        with self._store_lock:
            if self._store is None and self.settings.database_url:
                from vmware_pilot.app import shared_store

                self._store = shared_store(self.settings)
            return self._store

    @classmethod
    def ready(cls, app: PilotApp) -> AppOnDemand:
        """An already built app."""
        return cls(app.settings, app)

    @property
    def built(self) -> PilotApp | None:
        return self._app

    @property
    def dispatching(self) -> bool:
        """Whether steps run in the skills' own servers (known before the app is built)."""
        if self._app is not None:
            return self._app.dispatcher is not None
        return self.settings.dispatch == "stdio"

    def get(self) -> PilotApp:
        app = self._app
        if app is None:
            with self._lock:
                app = self._app
                if app is None:
                    if self._preparing is not None:
                        self._preparing.join()
                        self._preparing = None
                    from vmware_pilot.app import build_app

                    app = self._app = build_app(self.settings, store=self.shared_store())
        return app

    def versions(self, workflow_ids: Collection[str]) -> dict[str, int]:
        """The stored versions of these workflows (the store opened if it is not yet)."""
        return self.get().store.workflows.versions(workflow_ids)

    def service_proxy(self) -> PilotService:
        """A stand-in for the app's service that builds the app at its first use."""
        return cast("PilotService", _ServiceProxy(self))

    async def aclose(self) -> None:
        if self._app is not None:
            await self._app.aclose()
        elif self._store is not None:  # opened for the catalog's refresh, the app never built
            self._store.close()


class _ServiceProxy:
    """Forwards every attribute to the service of the app ``source`` builds on first use."""

    def __init__(self, source: AppOnDemand) -> None:
        self._source = source

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source.get().service, name)
