"""The approval console in a real browser (Debian's chromium through Playwright) against a
dispatching Pilot on the lab: the vCenter simulator and the real companion skills."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.console.browser import axe_violations, shoot, sign_in
from tests.console.conftest import Team, at_gate, run
from tests.lab.harness import TARGET, Lab, call_companion, power_state
from vmware_pilot.transports.client import connect_http

pytestmark = [pytest.mark.lab, pytest.mark.slow]

WAIT_MS = 90_000


def gate(**options: Any) -> dict[str, Any]:
    params = {"message": "Power off the VM for maintenance?", **options}
    return {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": params}


def info(vm: str) -> dict[str, Any]:
    return {
        "action": "look",
        "skill": "monitor",
        "tool": "get_vm_info",
        "params": {"vm_name": vm, "target": TARGET},
    }


def power_off(vm: str) -> dict[str, Any]:
    return {
        "action": f"off_{vm}",
        "skill": "aiops",
        "tool": "power_off_vm",
        "params": {"vm_name": vm, "force": True, "confirm": True, "target": TARGET},
        "rollback_tool": "power_on_vm",
        "rollback_params": {"vm_name": vm, "target": TARGET},
    }


def status(team: Team, workflow_id: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with connect_http(team.server.url, team.tokens["bob"]) as client:
            return (await client.call("get_workflow_status", {"workflow_id": workflow_id})).payload

    return run(go())


def ensure_on(lab: Lab, vm: str) -> None:
    async def go() -> None:
        if await power_state(lab, vm) != "poweredOn":
            answer = await call_companion(lab, "aiops", "power_on_vm", {"vm_name": vm, "target": TARGET})
            assert not answer.is_error, answer.text

    run(go())


def new_page(browser: Browser) -> tuple[BrowserContext, Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    return context, context.new_page()


def test_sign_in_see_the_gate_with_live_state_and_preview_then_approve_and_watch_the_run(
    browser: Browser, team: Team, lab: Lab
) -> None:
    vm = "DC0_H0_VM0"
    ensure_on(lab, vm)
    wid = at_gate(team, "bob", [info(vm), gate(), power_off(vm)])
    context, page = new_page(browser)
    try:
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        expect(page.locator(".who")).to_contain_text("Signed in as token:alice")
        release = page.locator("section.release")
        expect(release).to_contain_text("aiops.power_off_vm")
        expect(release.locator("dl.params")).to_contain_text('"DC0_H0_VM0"')
        expect(release.locator("dl.params")).to_contain_text("force")
        expect(release.locator(".now")).to_contain_text(
            f"Now: {vm}: poweredOn, 1 vCPU, 32 MB, host DC0_H0, snapshot lab-base → power_off_vm"
        )
        expect(release.locator(".preview")).to_contain_text("hard_power_off")
        # The power-off is the workflow's last step: no rollback can run after it (engine.gateview).
        expect(release.locator(".undo")).to_contain_text("No rollback will undo this step")
        expect(page.locator(".evidence")).to_contain_text(f"name={vm}")
        shoot(page, "gate")
        assert axe_violations(page) == []
        page.set_viewport_size({"width": 390, "height": 844})
        shoot(page, "gate-phone")
        assert axe_violations(page) == []
        page.set_viewport_size({"width": 1100, "height": 900})

        page.get_by_role("button", name="Approve as token:alice").click()
        page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=approved")
        # The page follows the run over server-sent events until it ends.
        expect(page.locator("#wf-state")).to_have_text("completed", timeout=WAIT_MS)
        expect(page.locator('[data-step-status="2"]')).to_have_text("success")
        shoot(page, "approved-run")
        assert axe_violations(page) == []
    finally:
        context.close()
    assert run(power_state(lab, vm)) == "poweredOff"
    done = status(team, wid)
    assert [(a["approver"], a["channel"]) for a in done["gates"][0]["approvals"]] == [
        ("token:alice", "console")
    ]
    inspected = [e for e in done["audit_log"] if e["action"] == "gate_inspected"]
    assert any(e["actor"] == "token:alice" and f"{vm}: poweredOn" in e["detail"] for e in inspected)


def test_reject_with_a_reason(browser: Browser, team: Team, lab: Lab) -> None:
    vm = "DC0_H0_VM1"
    ensure_on(lab, vm)
    wid = at_gate(team, "bob", [gate(), power_off(vm)])
    context, page = new_page(browser)
    try:
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        page.get_by_label("Reason to reject").fill("wrong maintenance window")
        page.get_by_role("button", name="Reject and cancel the workflow").click()
        page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=rejected")
        expect(page.locator("#wf-state")).to_have_text("cancelled")
        expect(page.locator("main")).to_contain_text("wrong maintenance window")
        shoot(page, "rejected")
    finally:
        context.close()
    rejected = [e for e in status(team, wid)["audit_log"] if e["action"] == "rejected"]
    assert rejected and "wrong maintenance window" in rejected[0]["detail"]
    assert run(power_state(lab, vm)) == "poweredOn"


def test_four_eyes_refusals_are_shown_on_the_page(browser: Browser, team: Team, lab: Lab) -> None:
    vm = "DC0_C0_RP0_VM0"
    ensure_on(lab, vm)
    wid = at_gate(team, "olga", [gate(approvals_required=2), power_off(vm)])
    context, page = new_page(browser)
    try:
        # olga's role approves only what someone else created: the page says so and refuses.
        sign_in(page, team.base, team.tokens["olga"], f"/console/workflows/{wid}/gate")
        expect(page.locator(".decide .alert")).to_contain_text("you created")
        page.get_by_role("button", name="Approve as token:olga").click()
        expect(page.locator("#gate-error")).to_contain_text("Refused: Role 'operator' approves only")
        context.clear_cookies()

        # alice approves once (1 of 2); approving again as the same person is refused.
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        page.get_by_role("button", name="Approve as token:alice").click()
        page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=approved")
        page.goto(f"{team.base}/console/workflows/{wid}/gate")
        expect(page.locator("#approvals")).to_contain_text("1 of 2 required (token:alice)")
        page.get_by_role("button", name="Approve as token:alice").click()
        expect(page.locator("#gate-error")).to_contain_text("token:alice already approved this gate")
        shoot(page, "four-eyes")
    finally:
        context.close()
    assert status(team, wid)["state"] == "awaiting_approval"
    assert run(power_state(lab, vm)) == "poweredOn"


def test_a_forged_post_without_the_csrf_token_is_refused_and_headers_protect_the_pages(
    browser: Browser, team: Team
) -> None:
    wid = at_gate(team, "bob", [gate(), {"action": "look", **info("DC0_H0_VM0")}])
    context, page = new_page(browser)
    try:
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        response = page.request.get(f"{team.base}/console/workflows/{wid}/gate")
        csp = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert response.headers["cache-control"] == "no-store"
        (cookie,) = [c for c in context.cookies() if c["name"] == "pilot_console"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["expires"] > time.time()
        digest = page.locator("#digest").inner_text()
        forged = page.request.post(f"{team.base}/console/workflows/{wid}/approve", form={"digest": digest})
        assert forged.status == 403 and "CSRF" in forged.text()
        wrong = page.request.post(
            f"{team.base}/console/workflows/{wid}/approve", form={"digest": digest, "csrf": "guess"}
        )
        assert wrong.status == 403
    finally:
        context.close()
    assert status(team, wid)["state"] == "awaiting_approval"


def test_an_expired_session_is_sent_back_to_sign_in(browser: Browser, short_sessions: Team) -> None:
    context, page = new_page(browser)
    try:
        sign_in(page, short_sessions.base, short_sessions.tokens["alice"])
        expect(page.locator("h1")).to_have_text("Workflows")
        assert axe_violations(page) == []
        time.sleep(4)  # the session lasts three seconds
        page.goto(f"{short_sessions.base}/console/workflows")
        expect(page.locator("h1")).to_have_text("Sign in")
        expect(page.locator(".notice")).to_have_text("Your session expired: sign in again.")
        shoot(page, "expired")
        assert axe_violations(page) == []
    finally:
        context.close()


def test_a_submitted_decision_stops_following_so_no_reload_can_cancel_its_answer(
    browser: Browser, team: Team, lab: Lab
) -> None:
    """The approval's own change reaches the gate page's event stream while the form's answer is
    on its way; a reload then would cancel the navigation to the answer. Submitting closes it."""
    wid = at_gate(team, "bob", [gate(), info("DC0_H0_VM0")])
    context, page = new_page(browser)
    try:
        page.add_init_script(
            "(() => { const Real = window.EventSource; window.__sources = [];"
            " window.EventSource = function (url) { const s = new Real(url);"
            " window.__sources.push(s); return s; }; })();"
        )
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        page.wait_for_function("window.__sources.length > 0 && window.__sources[0].readyState === 1")
        # Hold the form's navigation back so the page stays to be asked.
        page.evaluate("document.addEventListener('submit', (e) => e.preventDefault())")
        page.get_by_role("button", name="Approve as token:alice").click()
        assert page.evaluate("window.__sources.map((s) => s.readyState)") == [2]
    finally:
        context.close()
    assert status(team, wid)["state"] == "awaiting_approval"


def test_a_gate_predicted_to_fail_says_so_first_and_approving_anyway_takes_the_box_and_a_reason(
    browser: Browser, team: Team, lab: Lab
) -> None:
    vm = "DC0_C0_RP0_VM1"  # on, and runs no VMware Tools: aiops refuses a graceful power-off
    ensure_on(lab, vm)
    graceful = {**power_off(vm), "params": {"vm_name": vm, "force": False, "confirm": True, "target": TARGET}}
    power_on = {
        "action": "on",
        "skill": "aiops",
        "tool": "power_on_vm",
        "params": {"vm_name": vm, "target": TARGET},
    }
    wid = at_gate(team, "bob", [gate(), graceful, power_on])
    context, page = new_page(browser)
    try:
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        verdict = page.locator("#prediction")
        expect(verdict).to_contain_text("Prediction: FAILS")
        expect(verdict).to_contain_text(
            "FAILS at step 1 (aiops.power_off_vm): aiops refuses it: VMware Tools"
        )
        expect(page.locator("#rel-2").locator("xpath=..").locator(".alert")).to_have_count(0)
        assert axe_violations(page) == []
        shoot(page, "gate-predicted-failure")
        approve = page.get_by_role("button", name="Approve despite the predicted failure, as token:alice")
        page.get_by_label("Why approve anyway (recorded with the approval)").fill("checking aiops refuses")
        approve.click()  # the box is not ticked: the browser keeps the form
        expect(page).to_have_url(f"{team.base}/console/workflows/{wid}/gate")
        page.get_by_label("I know Pilot predicts this run fails at step 1, and approve anyway").check()
        approve.click()
        page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=approved")
        expect(page.locator("#wf-state")).to_have_text("failed", timeout=WAIT_MS)
    finally:
        context.close()
    done = status(team, wid)
    (approval,) = done["gates"][0]["approvals"]
    assert approval["acknowledged_failure"] == "checking aiops refuses"
    assert run(power_state(lab, vm)) == "poweredOn"
