"""The web console: approval gates and workflows in a browser, under ``/console`` of the network
transport (same port and TLS). Pages are rendered on the server; see ``routes``."""

from __future__ import annotations

from vmware_pilot.transports.console.routes import mount_console

__all__ = ["mount_console"]
