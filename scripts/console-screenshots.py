"""Regenerate the console screenshots in docs/: the gate, the inbox and a failed run.

    .venv/bin/python scripts/console-screenshots.py

Starts the lab (the vCenter simulator and the real companion skills; build it first with
``bash scripts/lab/setup.sh``) and a dispatching ``vmware-pilot mcp --transport http`` on it, in a
throw-away folder, makes a few workflows (one waiting at a gate, one failed half-way, one rolled
back, one rejected, one whose gate expired), and photographs three pages in Debian's chromium
(``scripts/console-setup.sh`` installs it and axe-core): ``docs/console-gate.png``,
``docs/console-inbox.png`` and ``docs/console-failed.png``. Everything it starts is stopped at the
end; the real home folder is not touched.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from playwright.sync_api import Page, sync_playwright  # noqa: E402

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, install, sign_in  # noqa: E402
from tests.support.console_team import Team, lab_pilot, make_pilot_home, run  # noqa: E402
from tests.support.lab_harness import TARGET, call_companion, power_state, running_lab  # noqa: E402
from vmware_pilot.transports.client import connect_http  # noqa: E402

DOCS = REPO / "docs"
VIEW = {"width": 1100, "height": 900}
WAIT_MS = 90_000


def gate(message: str, **options: Any) -> dict[str, Any]:
    return {
        "action": "require_approval",
        "skill": "pilot",
        "tool": "approve",
        "params": {"message": message, **options},
    }


def info(vm: str) -> dict[str, Any]:
    return {
        "action": "look",
        "skill": "monitor",
        "tool": "get_vm_info",
        "params": {"vm_name": vm, "target": TARGET},
    }


def power_off(vm: str, force: bool = True) -> dict[str, Any]:
    return {
        "action": f"off_{vm}",
        "skill": "aiops",
        "tool": "power_off_vm",
        "params": {"vm_name": vm, "force": force, "confirm": True, "target": TARGET},
        "rollback_tool": "power_on_vm",
        "rollback_params": {"vm_name": vm, "target": TARGET},
    }


def made(team: Team, who: str, name: str, description: str, steps: list[dict[str, Any]]) -> str:
    async def go() -> str:
        async with connect_http(team.server.url, team.tokens[who]) as client:
            answer = await client.call(
                "create_workflow", {"name": name, "description": description, "steps": steps}
            )
            wid = str(answer.payload["workflow_id"])
            ran = await client.call("run_workflow", {"workflow_id": wid})
            assert ran.payload["state"] == "awaiting_approval", ran.payload
            return wid

    return run(go())


def approve_despite(page: Page, team: Team, wid: str) -> None:
    page.goto(f"{team.base}/console/workflows/{wid}/gate")
    page.get_by_label("I know Pilot predicts this run fails", exact=False).check()
    page.get_by_label("Why approve anyway (recorded with the approval)").fill(
        "trying the guest shutdown first"
    )
    page.get_by_role("button", name="Approve despite the predicted failure, as token:alice").click()
    page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=approved")
    page.locator('#wf-state[data-state="failed"]').wait_for(timeout=WAIT_MS)


def main() -> None:
    install()
    with tempfile.TemporaryDirectory(prefix="console-shots-") as scratch:
        folder = Path(scratch)
        (folder / "lab").mkdir()
        with running_lab(folder / "lab") as lab:

            async def on(vm: str) -> None:
                if await power_state(lab, vm) != "poweredOn":
                    await call_companion(lab, "aiops", "power_on_vm", {"vm_name": vm, "target": TARGET})

            for vm in ("DC0_H0_VM0", "DC0_H0_VM1", "DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1"):
                run(on(vm))
            home, tokens = make_pilot_home(folder, {"alice": "admin", "bob": "admin", "olga": "operator"})
            with lab_pilot(lab, folder, home, tokens) as team, sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
                )
                context = browser.new_context(viewport=VIEW)
                page = context.new_page()
                sign_in(page, team.base, team.tokens["alice"])

                # A rejected one, an expired one, a failed one and one rolled back, for the inbox.
                rejected = made(
                    team,
                    "olga",
                    "resize-db",
                    "More memory for db-07, CHG0012290",
                    [gate("Resize?"), info("DC0_H0_VM1")],
                )
                page.goto(f"{team.base}/console/workflows/{rejected}/gate")
                page.get_by_label("Reason to reject", exact=False).fill("wrong maintenance window")
                page.get_by_role("button", name="Reject and cancel the workflow").click()
                made(
                    team,
                    "olga",
                    "snapshot-web",
                    "Snapshot before the release, CHG0012301",
                    [gate("Snapshot?", expires_in_minutes=0.01), info("DC0_H0_VM1")],
                )
                rolled = made(
                    team,
                    "bob",
                    "restart-app-tier",
                    "Restart the app tier, INC0042",
                    [
                        gate("Power-cycle the app tier?"),
                        power_off("DC0_C0_RP0_VM0"),
                        power_off("DC0_C0_RP0_VM1", force=False),
                    ],
                )
                approve_despite(page, team, rolled)
                page.goto(f"{team.base}/console/workflows/{rolled}/rollback")
                page.get_by_label("I have read what would be undone", exact=False).check()
                page.get_by_role("button", name=f"Roll back {rolled}").click()
                page.locator("#ending.banner-rolled_back").wait_for(timeout=WAIT_MS)
                failed = made(
                    team,
                    "bob",
                    "patch-web-tier",
                    "Kernel patch of the web tier, CHG0012345",
                    [
                        gate("Power off the web tier for patching?"),
                        power_off("DC0_H0_VM1"),
                        power_off("DC0_C0_RP0_VM1", force=False),
                    ],
                )
                approve_despite(page, team, failed)
                waiting = made(
                    team,
                    "bob",
                    "patch-web-01",
                    "Kernel patch of web-01 in tonight's window, CHG0012346",
                    [
                        info("DC0_H0_VM0"),
                        gate(
                            "Power off DC0_H0_VM0 for the kernel patch?",
                            expires_in_minutes=240,
                            approvals_required=2,
                        ),
                        power_off("DC0_H0_VM0"),
                    ],
                )
                time.sleep(1)  # the snapshot gate's 0.6 s expiry has passed

                page.goto(f"{team.base}/console/workflows/{waiting}/gate")
                page.locator("#summary").wait_for()
                page.screenshot(path=str(DOCS / "console-gate.png"), full_page=True)
                page.goto(f"{team.base}/console/workflows")
                page.screenshot(path=str(DOCS / "console-inbox.png"), full_page=True)
                page.goto(f"{team.base}/console/workflows/{failed}")
                page.locator("#ending").wait_for()
                page.screenshot(path=str(DOCS / "console-failed.png"), full_page=True)
                context.close()
                browser.close()
                # Leave the lab as it was found.
                for vm in ("DC0_H0_VM1", "DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1"):
                    run(on(vm))
    for name in ("console-gate.png", "console-inbox.png", "console-failed.png"):
        print(DOCS / name)


if __name__ == "__main__":
    main()
