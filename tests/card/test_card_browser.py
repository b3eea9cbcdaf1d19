"""The approval card in real Chromium, in a sandboxed frame of a page playing the MCP Apps host:
it shows a real gate Pilot's service reached (verdict and summary, the changes, who asked and why,
the approvals, the time left) from the status result, and from a run result by asking the host for
the status; it links to the console's gate page (through ``ui/open-link``) or names the CLI; it
has no control that decides; an inventory name carrying markup is shown as text."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Frame, Page, sync_playwright

from tests.support.browser import AXE, CHROMIUM, CHROMIUM_ARGS, install
from tests.support.card_host import HOST_PAGE, WHY, GateResults, reach_gate, tool_result
from vmware_pilot.card import card_html
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor

pytestmark = pytest.mark.slow

CONSOLE = "https://pilot.example.com"
HOSTILE_VM = "<script>window.parent.pwned=1</script><img src=x onerror=alert(1)>web-01"
ALICE = Actor("alice", kind="token")
BOB = Actor("bob", kind="token")
EVERYTHING = {"openLinks": {}, "serverTools": {}}


@pytest.fixture
def gate_results(settings: Settings) -> GateResults:
    return asyncio.run(reach_gate(settings, HOSTILE_VM, ALICE, BOB))


@pytest.fixture
def page(gate_results: GateResults) -> Iterator[Page]:
    """Chromium's page, opened after the gate is reached: Playwright's sync API keeps an event loop
    running on this thread while it is open, and the service's calls need one of their own."""
    install()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def show(
    page: Page,
    result: dict[str, Any],
    status: dict[str, Any],
    console: str = CONSOLE,
    caps: Any = None,
    theme: str = "light",
) -> Frame:
    """The card in the host page, handed ``result`` (a tools/call of the status answers
    ``status``), the host offering ``caps`` in its ``theme``."""
    page.set_content(HOST_PAGE)
    caps = EVERYTHING if caps is None else caps
    args = [card_html(console), tool_result(result), tool_result(status), caps, theme]
    page.evaluate("args => window.hostSetup(...args)", args)
    frame = page.frame_locator("#card")
    frame.locator("#time-left").wait_for()
    handle = page.query_selector("#card")
    assert handle is not None
    content = handle.content_frame()
    assert content is not None
    return content


def sent(page: Page, method: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = page.evaluate("() => window.fromCard")
    return [m for m in messages if m.get("method") == method]


def text(frame: Frame, selector: str) -> str:
    return " ".join(frame.locator(selector).inner_text().split())


def assert_the_decision_is_shown(frame: Frame, decision: dict[str, Any]) -> None:
    verdict_word = {
        "succeeds": "Predicted to succeed",
        "fails": "Predicted to FAIL",
        "unknown": "Outcome not known",
    }
    frame.locator("#verdict .verdict").wait_for()
    verdict = text(frame, "#verdict")
    assert verdict.startswith(verdict_word[decision["verdict"]])
    assert " ".join(decision["verdict_summary"].split()) in verdict
    changes = frame.locator("#changes li")
    assert changes.count() == min(len(decision["changes"]), 12)
    first = decision["changes"][0]
    assert first["object"] in changes.first.inner_text()
    assert f"(step {first['step']})" in changes.first.inner_text()
    assert text(frame, "#requester") == "token:alice"
    assert text(frame, "#why").startswith(WHY)
    assert text(frame, "#approvals") == "2 more needed (0 of 2)"
    left = text(frame, "#time-left")
    assert re.match(r"1 h \d+ min left ", left), left
    assert decision["expires_at"][:16].replace("T", " ") + " UTC" in left


def assert_no_decision_control(frame: Frame, page: Page) -> None:
    assert frame.locator("button, form, input, select, textarea, [role=button]").count() == 0
    assert page.evaluate("() => window.pwned") is None
    assert frame.evaluate("() => document.querySelectorAll('script').length") == 1  # the card's own
    assert frame.evaluate("() => document.querySelectorAll('img').length") == 0


def test_the_status_result_shows_the_gate_and_links_to_the_console_gate_page(
    page: Page, gate_results: GateResults
) -> None:
    status = gate_results.status
    frame = show(page, status, status)
    assert_the_decision_is_shown(frame, status["decision"])
    assert HOSTILE_VM in frame.locator("#changes").inner_text()  # the name, as text
    assert_no_decision_control(frame, page)
    assert [m["params"]["protocolVersion"] for m in sent(page, "ui/initialize")] == ["2026-01-26"]
    assert sent(page, "tools/call") == []  # the status carried the decision: nothing asked

    link = frame.locator("#console-link")
    gate_url = f"{CONSOLE}/console/workflows/{gate_results.workflow_id}/gate"
    assert link.get_attribute("href") == gate_url
    link.click()
    page.wait_for_function("() => window.fromCard.some(m => m.method === 'ui/open-link')")
    assert [m["params"] for m in sent(page, "ui/open-link")] == [{"url": gate_url}]
    assert sent(page, "ui/notifications/size-changed")


def test_a_run_result_at_the_gate_asks_the_host_for_the_status_and_shows_the_same(
    page: Page, gate_results: GateResults
) -> None:
    frame = show(page, gate_results.run, gate_results.status)
    assert_the_decision_is_shown(frame, gate_results.status["decision"])
    calls = sent(page, "tools/call")
    assert [c["params"] for c in calls] == [
        {"name": "get_workflow_status", "arguments": {"workflow_id": gate_results.workflow_id}}
    ]
    assert_no_decision_control(frame, page)


def test_an_approval_still_short_of_its_quorum_shows_who_approved_and_how_many_are_missing(
    page: Page, gate_results: GateResults
) -> None:
    frame = show(page, gate_results.approved, gate_results.status_approved)
    frame.locator("#verdict .verdict").wait_for()
    assert text(frame, "#approvals") == "1 more needed (1 of 2: approved by token:bob)"
    assert text(frame, "#requester") == "token:alice"
    assert [c["params"]["name"] for c in sent(page, "tools/call")] == ["get_workflow_status"]
    assert_no_decision_control(frame, page)


def test_without_a_console_the_card_names_the_cli_and_without_server_tools_says_where_the_verdict_is(
    page: Page, gate_results: GateResults
) -> None:
    wid = gate_results.workflow_id
    frame = show(page, gate_results.run, gate_results.status, console="", caps={})
    assert frame.locator("#console-link").count() == 0
    assert text(frame, "#decide") == (
        f"Decide at a terminal with Pilot: vmware-pilot approve {wid} or vmware-pilot reject {wid} --reason '…'"
    )
    assert "get_workflow_status or the console shows the prediction" in text(frame, "#verdict")
    assert text(frame, "#requester") == "token:alice" and text(frame, "#why") == WHY
    assert sent(page, "tools/call") == []
    assert_no_decision_control(frame, page)


def test_a_refusal_is_shown_as_the_refusal(page: Page) -> None:
    refusal = {"error": "Workflow 'wf-<b>x</b>' not found", "hint": "Call list_workflows."}
    page.set_content(HOST_PAGE)
    page.evaluate(
        "args => window.hostSetup(...args)", [card_html(CONSOLE), tool_result(refusal), {}, EVERYTHING]
    )
    frame = page.frame_locator("#card")
    frame.locator("#title").wait_for()
    assert frame.locator("#title").inner_text() == "Pilot refused"
    assert json.dumps(frame.locator(".refused").inner_text()) == json.dumps(refusal["error"])
    assert frame.locator("b").count() == 0


def test_the_card_passes_axe_in_the_hosts_light_and_dark_themes(
    page: Page, gate_results: GateResults
) -> None:
    for theme in ("light", "dark"):
        frame = show(page, gate_results.status, gate_results.status, theme=theme)
        frame.locator("#verdict .verdict").wait_for()
        assert frame.evaluate("() => getComputedStyle(document.documentElement).colorScheme") == theme
        # Injected through the DevTools protocol: the card's CSP (its own script only) stays in force.
        frame.evaluate(AXE.read_text() + "\n;undefined")
        found = json.loads(frame.evaluate("async () => JSON.stringify(await axe.run(document))"))
        serious = [
            (v["id"], [n["target"] for n in v["nodes"]][:3])
            for v in found["violations"]
            if v.get("impact") in ("serious", "critical")
        ]
        assert serious == [], theme
