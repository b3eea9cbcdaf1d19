"""Fixtures of the console's browser tests: chromium, a dispatching Pilot on the lab, tokens
(the helpers they use: tests/support/console_team.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.lab.conftest import lab
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, install
from tests.support.console_team import Team, lab_pilot, make_pilot_home
from tests.support.lab_harness import Lab
from tests.support.server_proc import start_server

__all__ = ["browser", "lab", "short_sessions", "team"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One browser per test module: Playwright's sync API runs an event loop on this thread for as
    long as it is open, and every asyncio test that follows in the session would find it running."""
    install()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def team(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    """A `vmware-pilot mcp --transport http --dispatch` on the lab; alice and bob are admins,
    olga an operator (approves only others' workflows)."""
    folder = tmp_path_factory.mktemp("console")
    home, tokens = make_pilot_home(folder, {"alice": "admin", "bob": "admin", "olga": "operator"})
    with lab_pilot(lab, folder, home, tokens) as made:
        yield made


@pytest.fixture(scope="module")
def short_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    """A Pilot whose console sessions last three seconds (no dispatch)."""
    folder = tmp_path_factory.mktemp("console-short")
    home, tokens = make_pilot_home(folder, {"alice": "admin"})
    env = {"VMWARE_PILOT_HOME": str(home), "VMWARE_PILOT_CONSOLE_SESSION_MINUTES": json.dumps(0.05)}
    with start_server(folder, ["--transport", "http"], env=env) as server:
        yield Team(server, tokens, home)
