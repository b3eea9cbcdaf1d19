"""The approval console in a real browser (Debian's chromium through Playwright) against a
dispatching Pilot on the lab: the vCenter simulator and the real companion skills."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.support.browser import axe_violations, shoot, sign_in
from tests.support.console_team import Team, at_gate, cancelled, run
from tests.support.lab_harness import TARGET, Lab, call_companion, power_state
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
        expect(page.locator(".evidence")).to_contain_text(f"name: {vm}")
        expect(page.locator(".evidence")).not_to_contain_text("truncated")
        shoot(page, "gate")
        assert axe_violations(page) == []
        page.set_viewport_size({"width": 390, "height": 844})
        shoot(page, "gate-phone")
        assert axe_violations(page) == []
        page.set_viewport_size({"width": 1100, "height": 900})

        page.get_by_role("button", name="Approve as token:alice").click()
        page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=approved")
        # The page follows the run over server-sent events until it ends.
        expect(page.locator("#wf-state")).to_have_attribute("data-state", "completed", timeout=WAIT_MS)
        expect(page.locator("#ending")).to_contain_text("Completed")
        expect(page.locator("#notice")).to_have_count(0)  # no stale "approval recorded" banner
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
    # The gate was shown to bob's run, then to alice (twice, with its live reads each time): the
    # same reading is one audit event, not one per look.
    inspected = [e for e in done["audit_log"] if e["action"] == "gate_inspected"]
    assert len(inspected) == 1 and f"{vm}: poweredOn" in inspected[0]["detail"]


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
        expect(page.locator("#wf-state")).to_have_attribute("data-state", "cancelled")
        expect(page.locator("#ending")).to_contain_text(
            "rejected the gate at step 0: wrong maintenance window"
        )
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
        # olga's role approves only what someone else created: no Approve, the reason in its place.
        sign_in(page, team.base, team.tokens["olga"], f"/console/workflows/{wid}/gate")
        expect(page.locator("#why-not")).to_contain_text("you created")
        expect(page.get_by_role("button", name="Approve as token:olga")).to_have_count(0)
        expect(page.get_by_role("button", name="Reject and cancel the workflow")).to_be_enabled()
        # A forged form is still refused by the server.
        csrf = page.locator("input[name=csrf]").first.get_attribute("value") or ""
        forged = page.request.post(
            f"{team.base}/console/workflows/{wid}/approve",
            form={"csrf": csrf, "digest": page.locator("#digest").inner_text(), "gate_step": "0"},
        )
        assert forged.status == 403 and "approves only" in forged.text()
        context.clear_cookies()

        # alice approves once (1 of 2): the page says how many more and who; no second Approve.
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        page.get_by_role("button", name="Approve as token:alice").click()
        page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=approved")
        expect(page.locator("#notice")).to_contain_text("1 more needed", timeout=WAIT_MS)
        expect(page.locator("#notice")).to_contain_text("approved so far by token:alice")
        expect(page.locator("main")).not_to_contain_text("follows the run")
        page.goto(f"{team.base}/console/workflows/{wid}/gate")
        expect(page.locator("#approvals")).to_have_text("1 more needed (1 of 2: approved by token:alice)")
        expect(page.get_by_role("button", name="Approve as token:alice")).to_have_count(0)
        expect(page.locator("#why-not")).to_contain_text("You already approved this gate")
        shoot(page, "four-eyes")
        assert axe_violations(page) == []
    finally:
        context.close()
    assert status(team, wid)["state"] == "awaiting_approval"
    assert run(power_state(lab, vm)) == "poweredOn"
    cancelled(team, wid)


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
        expect(page.locator("h1")).to_have_text("Inbox")
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
        verdict = page.locator("#verdict")
        expect(verdict).to_contain_text("Predicted to FAIL")
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
        expect(page.locator("#wf-state")).to_have_attribute("data-state", "failed", timeout=WAIT_MS)
    finally:
        context.close()
    done = status(team, wid)
    (approval,) = done["gates"][0]["approvals"]
    assert approval["acknowledged_failure"] == "checking aiops refuses"
    assert run(power_state(lab, vm)) == "poweredOn"


# --- issue 25: the decision screen ---------------------------------------------------------------
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1100, "height": 900}


def graceful_off(vm: str) -> dict[str, Any]:
    """A guest shutdown: aiops refuses it on a lab VM without VMware Tools."""
    return {**power_off(vm), "params": {"vm_name": vm, "force": False, "confirm": True, "target": TARGET}}


def contrast(first: str, second: str) -> float:
    """The WCAG contrast ratio of two CSS ``rgb(…)`` colours."""

    def luminance(css: str) -> float:
        parts = [float(p) / 255 for p in css[css.index("(") + 1 : css.index(")")].split(",")[:3]]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in parts]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def fits(page: Page) -> bool:
    """Nothing on the page is wider than the viewport (no cut-off column on a phone)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def checked_both_ways(page: Page, name: str) -> None:
    """axe finds nothing serious at desktop width and at 390 px; screenshots of both."""
    assert axe_violations(page) == [], page.url
    page.set_viewport_size(PHONE)
    assert fits(page), page.url
    assert axe_violations(page) == [], page.url
    shoot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


def test_the_gate_starts_with_who_asked_why_the_verdict_and_the_time_left(
    browser: Browser, team: Team, lab: Lab
) -> None:
    vm = "DC0_H0_VM0"
    ensure_on(lab, vm)

    async def made() -> str:
        async with connect_http(team.server.url, team.tokens["bob"]) as client:
            steps = [gate(expires_in_minutes=120), power_off(vm)]
            answer = await client.call(
                "create_workflow",
                {"name": "patch-web", "description": "Kernel patch, ticket CHG0012345", "steps": steps},
            )
            wid = str(answer.payload["workflow_id"])
            await client.call("run_workflow", {"workflow_id": wid})
            return wid

    wid = run(made())
    context, page = new_page(browser)
    try:
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        summary = page.locator("#summary")
        # The summary is the first thing in the page after the title.
        first = page.evaluate("document.querySelector('main h2').id")
        assert first == "summary-h"
        # bob asked, through the MCP client that created it (its clientInfo name).
        expect(summary.locator("#requester")).to_have_text(re.compile(r"^token:bob \(through \S+\)$"))
        expect(summary.locator("#why")).to_contain_text("Kernel patch, ticket CHG0012345")
        expect(summary.locator("#verdict")).to_contain_text("Predicted to succeed")
        expect(summary.locator("#changes")).to_contain_text("poweredOn → poweredOff")
        expect(summary.locator("#approvals")).to_have_text("1 more needed (0 of 1)")
        expect(summary.locator("#countdown")).to_have_text(re.compile(r"^1 h (59|58) min left$"))
        # The skill's words to its agent are not shown to the person.
        expect(page.locator("main")).not_to_contain_text("with the user")
        expect(page.locator("main")).not_to_contain_text("Skill's preview")
        expect(page.locator("section.release .undo")).to_contain_text(
            "No rollback will undo this step: it is the workflow's last"
        )
        checked_both_ways(page, "decision-summary")
    finally:
        context.close()
    cancelled(team, wid)


def test_an_expired_gate_offers_no_decision_and_the_inbox_lists_it_as_expired(
    browser: Browser, team: Team, lab: Lab
) -> None:
    vm = "DC0_H0_VM1"
    wid = at_gate(team, "bob", [gate(expires_in_minutes=0.005), info(vm)])
    for _ in range(100):  # 0.3 s of expiry on the database's clock
        if status(team, wid)["gates"][0]["expired"]:
            break
        time.sleep(0.1)
    context, page = new_page(browser)
    try:
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        expect(page.locator("#expired-note")).to_contain_text("Expired")
        expect(page.locator("#countdown")).to_have_text("expired")
        expect(page.get_by_role("button", name=re.compile("^Approve"))).to_have_count(0)
        expect(page.locator("#why-not")).to_contain_text("expired")
        expect(page.get_by_role("button", name="Reject and cancel the workflow")).to_be_visible()
        checked_both_ways(page, "expired-gate")

        page.goto(f"{team.base}/console/workflows?q={wid}")
        (row,) = page.locator("ul.inbox li.row").all()
        expect(row.locator(".badge")).to_have_text("⌛ Expired")
        expect(row.get_by_role("link", name=re.compile("^Decide"))).to_have_count(0)
    finally:
        context.close()


def test_the_inbox_shows_waiting_gates_first_searches_and_fits_a_phone(
    browser: Browser, team: Team, lab: Lab
) -> None:
    vm = "DC0_C0_RP0_VM0"
    ensure_on(lab, vm)
    waiting = at_gate(team, "bob", [gate(expires_in_minutes=600), info(vm), power_off(vm)])
    context, page = new_page(browser)
    try:
        sign_in(page, team.base, team.tokens["alice"])
        rows = page.locator("ul.inbox li.row")
        states = rows.locator(".badge").all_inner_texts()
        waiting_rows = [i for i, s in enumerate(states) if s.endswith("Waiting for approval")]
        assert waiting_rows == list(range(len(waiting_rows))), states  # waiting first
        row = rows.filter(has_text=waiting)
        expect(row).to_contain_text("Asked by token:bob")
        expect(row).to_contain_text(f"Targets {vm}")
        expect(row).to_contain_text("Highest risk destructive")
        expect(row).to_contain_text(re.compile(r"Time left (9 h 59 min|10 h 0 min) left"))
        # Every state tells itself by words and an icon as well as colour.
        for badge in rows.locator(".badge").all():
            assert re.match(r"^\S+ \w", badge.inner_text()), badge.inner_text()
        shoot(page, "inbox")
        page.get_by_label("Search").fill(vm)
        page.get_by_role("button", name="Show").click()
        expect(rows.filter(has_text=waiting)).to_have_count(1)
        for text in rows.all_inner_texts():
            assert vm in text or "token:" in text
        page.set_viewport_size(PHONE)
        assert fits(page)
        decide = row.get_by_role("link", name=re.compile("^Decide"))
        box = decide.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"]
        assert axe_violations(page) == []
    finally:
        context.close()
    cancelled(team, waiting)


def test_a_failed_run_says_where_what_changed_and_offers_the_rollback_preview_and_rollback(
    browser: Browser, team: Team, lab: Lab
) -> None:
    changed, refused = "DC0_H0_VM1", "DC0_C0_RP0_VM1"
    ensure_on(lab, changed)
    ensure_on(lab, refused)
    wid = at_gate(team, "bob", [gate(), power_off(changed), graceful_off(refused)])
    context, page = new_page(browser)
    try:
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        page.get_by_label("I know Pilot predicts this run fails at step 2, and approve anyway").check()
        page.get_by_label("Why approve anyway (recorded with the approval)").fill("see the rollback")
        page.get_by_role("button", name="Approve despite the predicted failure, as token:alice").click()
        page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=approved")
        expect(page.locator("#wf-state")).to_have_attribute("data-state", "failed", timeout=WAIT_MS)
        ending = page.locator("#ending")
        expect(ending).to_contain_text("Failed at step 2 (aiops.power_off_vm)")
        expect(ending).to_contain_text("Already changed before it stopped: step 1 (aiops.power_off_vm)")
        expect(page.locator("#notice")).to_have_count(0)
        stored = status(team, wid)["steps"][2]["result"]
        error = " ".join(str(stored.get("error", stored)).split())
        shown = " ".join(page.locator("#error-text").inner_text().split())
        assert len(error) > 60 and error in shown  # the whole error, never cut off
        shoot(page, "failed")
        checked_both_ways(page, "failed")

        page.get_by_role("link", name="Preview a rollback").click()
        expect(page.locator("#would-undo")).to_contain_text(
            f"Step 1 (aiops.power_off_vm): Pilot would call aiops.power_on_vm on {changed}"
        )
        expect(page.locator("#cannot-undo")).to_be_visible()
        checked_both_ways(page, "rollback-preview")
        page.get_by_label(re.compile("I have read what would be undone")).check()
        page.get_by_role("button", name=f"Roll back {wid}").click()
        page.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=rollback")
        expect(page.locator("#ending")).to_contain_text("Rolled back", timeout=WAIT_MS)
        expect(page.get_by_role("link", name="Preview a rollback")).to_have_count(0)
        assert axe_violations(page) == []
    finally:
        context.close()
    assert run(power_state(lab, changed)) == "poweredOn"
    assert run(power_state(lab, refused)) == "poweredOn"


def test_live_updates_change_only_what_changed_without_a_reload_or_moving_focus(
    browser: Browser, team: Team, lab: Lab
) -> None:
    wid = at_gate(team, "bob", [gate(approvals_required=2), info("DC0_H0_VM0")])
    context, page = new_page(browser)
    other = browser.new_context(viewport=DESKTOP)
    try:
        sign_in(page, team.base, team.tokens["alice"], f"/console/workflows/{wid}/gate")
        page.evaluate("window.__same_page = true")
        back = page.get_by_role("link", name="The whole workflow, its steps and audit trail")
        back.focus()
        # olga (operator; bob created it) approves in her own browser.
        olga = other.new_page()
        sign_in(olga, team.base, team.tokens["olga"], f"/console/workflows/{wid}/gate")
        olga.get_by_role("button", name="Approve as token:olga").click()
        olga.wait_for_url(f"{team.base}/console/workflows/{wid}?notice=approved")
        expect(page.locator("#approvals")).to_contain_text("approved by token:olga", timeout=WAIT_MS)
        expect(page.locator("#live")).to_contain_text("Updated:")
        assert page.locator("#live").get_attribute("aria-live") == "polite"
        assert page.evaluate("window.__same_page === true")  # not reloaded
        assert page.evaluate("document.activeElement.textContent") == (
            "The whole workflow, its steps and audit trail"
        )
    finally:
        other.close()
        context.close()


def test_every_console_page_passes_axe_light_and_dark_and_the_focus_ring_stands_out(
    browser: Browser, team: Team, lab: Lab
) -> None:
    wid = at_gate(team, "bob", [info("DC0_H0_VM0"), gate(), info("DC0_H0_VM0")])
    pages = [
        "/console/workflows",
        f"/console/workflows/{wid}",
        f"/console/workflows/{wid}/gate",
        f"/console/workflows/{wid}/steps/0",
        f"/console/workflows/{wid}/cancel",
        f"/console/workflows/{wid}/rollback",
        "/console/workflows/wf-nope",
    ]
    for scheme in ("light", "dark"):
        context = browser.new_context(viewport=DESKTOP, color_scheme=scheme)
        page = context.new_page()
        try:
            page.goto(f"{team.base}/console/login")
            assert axe_violations(page) == [], f"login {scheme}"
            sign_in(page, team.base, team.tokens["alice"])
            for path in pages:
                page.goto(team.base + path)
                checked_both_ways(page, f"{scheme}{path.replace('/', '-')}")
            # The step result box scrolls with the keyboard: it takes focus and has a name.
            page.goto(f"{team.base}/console/workflows/{wid}/steps/0")
            box = page.locator("pre.json")
            assert box.get_attribute("tabindex") == "0" and box.get_attribute("aria-label")
            # The focus ring (keyboard focus) against the page behind it: at least 3:1.
            page.goto(f"{team.base}/console/workflows/{wid}/gate")
            page.locator("#approve").focus()
            page.keyboard.press("Shift+Tab")
            page.keyboard.press("Tab")
            ring = page.evaluate("getComputedStyle(document.activeElement).outlineColor")
            width = page.evaluate("getComputedStyle(document.activeElement).outlineWidth")
            behind = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert width == "3px" and contrast(ring, behind) >= 3.0, (scheme, ring, behind)
            shoot(page, f"gate-{scheme}")
        finally:
            context.close()
