"""One store per process: with a database URL, what a server does beside the app (the catalog's
refresh, the tokens) uses the app's store; nothing opens a second one behind its back."""

from __future__ import annotations

import pytest

from vmware_pilot.app import refresh_stale_catalog
from vmware_pilot.config import Settings
from vmware_pilot.errors import StoreError
from vmware_pilot.ondemand import AppOnDemand


async def test_the_stdio_servers_catalog_refresh_and_its_app_share_one_store(
    backend_settings: Settings,
) -> None:
    demand = AppOnDemand(backend_settings)
    opened = demand.shared_store()  # what the catalog's refresh beside the handshake uses
    try:
        app = demand.get()
        if backend_settings.database_url:
            assert opened is not None and app.store is opened
            assert demand.shared_store() is opened
        else:  # the home's SQLite file: the app opens it, the refresh uses the cache file
            assert opened is None
    finally:
        await demand.aclose()


@pytest.mark.backends("postgresql")
def test_the_catalog_refresh_never_opens_a_store_of_its_own(backend_settings: Settings) -> None:
    assert backend_settings.database_url
    with pytest.raises(StoreError) as refused:
        refresh_stale_catalog(backend_settings, None)
    assert "no store was opened" in refused.value.message
