"""Driving Debian's chromium with Playwright for Python: the browser, sign-in, screenshots, axe.

``scripts/console-setup.sh`` installs chromium (apt) and axe-core (npm, pinned) first; Playwright
is pointed at ``/usr/bin/chromium`` and never downloads a browser of its own. Screenshots go to
``tests/console/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Final

from playwright.sync_api import Page

__all__ = [
    "ARTIFACTS",
    "AXE",
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "SETUP",
    "axe_violations",
    "install",
    "shoot",
    "sign_in",
]

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "tests" / "console"  # its node_modules and artifacts
SETUP: Final = REPO / "scripts" / "console-setup.sh"
CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
AXE: Final = HERE / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS: Final = HERE / "artifacts"


def install() -> None:
    """Run the (idempotent) setup script; raise with its output when it fails."""
    done = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{SETUP.name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def sign_in(page: Page, base: str, token: str, path: str = "/console/workflows") -> None:
    """Open ``path``; on the sign-in form it leads to, sign in with ``token``."""
    page.goto(base + path)
    page.get_by_label("Your Pilot token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}{path}*")


def shoot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def axe_violations(page: Page, impacts: tuple[str, ...] = ("serious", "critical")) -> list[dict[str, Any]]:
    """axe-core's violations of ``impacts`` on the page as it is now (injected from the npm package)."""
    # Evaluated through the DevTools protocol: the page's CSP (no inline script) stays in force.
    page.evaluate(AXE.read_text() + "\n;undefined")
    result = page.evaluate("async () => JSON.stringify(await axe.run(document))")
    violations: list[dict[str, Any]] = json.loads(result)["violations"]
    found = [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in violations
        if v.get("impact") in impacts
    ]
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "axe.log").open("a").write(page.url + " " + json.dumps(violations)[:20000] + "\n")
    return found
