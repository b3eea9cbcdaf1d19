"""The console over HTTP against a real `vmware-pilot mcp --transport http` process (no browser):
sign-in refusals, where sign-in may lead, sign-out, roles, a plan changed under the page, events."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.support.console_team import GATE, VM_OF, Team, at_gate, fresh_off, make_pilot_home, run
from tests.support.server_proc import start_server
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.transports.client import connect_http

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def handback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    folder = tmp_path_factory.mktemp("console-http")
    home, tokens = make_pilot_home(folder, {"alice": "admin", "bob": "admin", "rita": "reader"})
    with start_server(folder, ["--transport", "http"], env={"VMWARE_PILOT_HOME": str(home)}) as server:
        yield Team(server, tokens, home)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


@contextmanager
def signed_in(team: Team, who: str, next_path: str = "") -> Iterator[httpx.Client]:
    with httpx.Client(base_url=team.base, follow_redirects=False) as client:
        form = client.get("/console/login")
        data: dict[str, Any] = {"csrf": csrf_of(form.text), "token": team.tokens[who], "next": next_path}
        answer = client.post("/console/login", data=data)
        assert answer.status_code == 303, answer.text
        yield client


def test_sign_in_refuses_a_bad_token_and_a_form_not_from_the_console(handback: Team) -> None:
    with httpx.Client(base_url=handback.base) as client:
        form = client.get("/console/login")
        bad = client.post("/console/login", data={"csrf": csrf_of(form.text), "token": "vpt_not-a-token"})
        assert bad.status_code == 401 and "That token is not valid." in bad.text
        client.cookies.clear()
        forged = client.post("/console/login", data={"csrf": "x", "token": handback.tokens["alice"]})
        assert forged.status_code == 403 and "pilot_console" not in forged.cookies
        assert (
            client.get("/console/workflows", follow_redirects=False)
            .headers["location"]
            .startswith("/console/login?next=/console/workflows")
        )


def test_sign_in_leads_only_to_console_pages_and_sign_out_ends_the_session(handback: Team) -> None:
    for target, expected in (
        ("https://evil.example/", "/console/workflows"),
        ("/console/workflows?state=x", "/console/workflows?state=x"),
    ):
        client = httpx.Client(base_url=handback.base, follow_redirects=False)
        form = client.get("/console/login")
        data = {"csrf": csrf_of(form.text), "token": handback.tokens["alice"], "next": target}
        assert client.post("/console/login", data=data).headers["location"] == expected
        client.close()
    with signed_in(handback, "alice") as client:
        page = client.get("/console/workflows")
        assert page.status_code == 200 and "Signed in as" in page.text
        assert client.post("/console/logout", data={}).status_code == 403, "sign-out needs the CSRF token too"
        assert client.post("/console/logout", data={"csrf": csrf_of(page.text)}).status_code == 303
        assert client.get("/console/workflows").status_code == 303


def test_a_role_that_may_not_approve_is_told_so_and_refused(handback: Team) -> None:
    wid = at_gate(handback)
    with signed_in(handback, "rita") as client:
        page = client.get(f"/console/workflows/{wid}/gate")
        assert "Role &#39;reader&#39; may not call approve" in page.text
        assert 'id="approve"' not in page.text  # told why in place of the button
        digest = re.search(r'id="digest">([^<]+)<', page.text)
        assert digest
        refused = client.post(
            f"/console/workflows/{wid}/approve", data={"csrf": csrf_of(page.text), "digest": digest.group(1)}
        )
        assert refused.status_code == 403 and "Refused: Role" in refused.text


def test_an_approval_of_a_plan_that_changed_after_the_page_was_shown_is_refused_with_the_new_plan(
    handback: Team,
) -> None:
    wid = at_gate(handback)
    with signed_in(handback, "alice") as client:
        page = client.get(f"/console/workflows/{wid}/gate")
        digest = re.search(r'name="digest" value="([^"]+)"', page.text)
        assert digest and VM_OF[wid] in page.text and "Current state not known" in page.text
        app = build_app(Settings(home=handback.pilot_home))
        try:
            wf = app.store.workflows.load(wid)
            wf.steps[1].params["vm_name"] = "db-01"
            app.store.workflows.save(wf)
        finally:
            app.close()
        refused = client.post(
            f"/console/workflows/{wid}/approve", data={"csrf": csrf_of(page.text), "digest": digest.group(1)}
        )
        assert refused.status_code == 409
        assert "changed after they were" in refused.text and "db-01" in refused.text
        assert "cannot be approved" in refused.text


def test_live_events_need_a_session_and_report_the_state(handback: Team) -> None:
    wid = at_gate(handback)
    with httpx.Client(base_url=handback.base) as anonymous:
        assert anonymous.get(f"/console/workflows/{wid}/events").status_code == 401
    with (
        signed_in(handback, "alice") as client,
        client.stream("GET", f"/console/workflows/{wid}/events") as events,
    ):
        assert events.headers["content-type"].startswith("text/event-stream")
        for line in events.iter_lines():
            if line.startswith("data: "):
                assert '"state": "awaiting_approval"' in line
                break


def test_an_approval_without_dispatch_leaves_the_released_steps_to_the_agent(handback: Team) -> None:
    wid = at_gate(handback)  # bob's agent created and ran it
    with signed_in(handback, "alice") as client:
        page = client.get(f"/console/workflows/{wid}/gate")
        digest = re.search(r'name="digest" value="([^"]+)"', page.text)
        assert digest
        answer = client.post(
            f"/console/workflows/{wid}/approve", data={"csrf": csrf_of(page.text), "digest": digest.group(1)}
        )
        assert answer.status_code == 303
        # The approval is recorded after the answer; until then the page says it is being recorded.
        for _ in range(200):
            shown = " ".join(client.get(answer.headers["location"]).text.split())
            if "Recording your approval" not in shown:
                break
            time.sleep(0.05)
        assert "Your approval was recorded" in shown
        assert "handed to the agent that runs this workflow (token:bob), not to you" in shown
        assert "next run_workflow returns them in pending_dispatch" in shown
        with client.stream("GET", f"/console/workflows/{wid}/events") as events:
            for line in events.iter_lines():
                if line.startswith("data: ") and '"state": "pending"' in line:
                    break

    async def agent_runs_again() -> dict[str, Any]:
        async with connect_http(handback.server.url, handback.tokens["bob"]) as agent:
            return dict((await agent.call("run_workflow", {"workflow_id": wid})).payload)

    out = run(agent_runs_again())
    assert [p["index"] for p in out["pending_dispatch"]] == [1]
    assert out["pending_dispatch"][0]["params"] == {"vm_name": VM_OF[wid], "confirm": True}


def test_a_form_shown_for_one_gate_is_refused_once_another_gate_waits_naming_it(handback: Team) -> None:
    second = {**GATE, "params": {"message": "Second: on?"}}
    off = fresh_off()
    on = {**off, "action": "on", "tool": "power_on_vm", "rollback_tool": "power_off_vm"}

    async def at_first_gate() -> str:
        async with connect_http(handback.server.url, handback.tokens["bob"]) as agent:
            made = await agent.call(
                "create_workflow", {"name": "two-gates", "description": "t", "steps": [GATE, off, second, on]}
            )
            wid = str(made.payload["workflow_id"])
            await agent.call("run_workflow", {"workflow_id": wid})
            return wid

    async def bob_approves_the_first(wid: str) -> None:
        async with connect_http(handback.server.url, handback.tokens["bob"]) as agent:
            out = await agent.call("approve", {"workflow_id": wid, "gate_step": 0})
            assert out.payload["pending_gate"]["index"] == 2, out.payload

    wid = run(at_first_gate())
    with signed_in(handback, "alice") as client:
        page = client.get(f"/console/workflows/{wid}/gate")
        digest = re.search(r'name="digest" value="([^"]+)"', page.text)
        assert digest and 'name="gate_step" value="0"' in page.text
        run(bob_approves_the_first(wid))
        refused = client.post(
            f"/console/workflows/{wid}/approve",
            data={"csrf": csrf_of(page.text), "digest": digest.group(1), "gate_step": "0"},
        )
        assert refused.status_code == 409
        shown = " ".join(refused.text.split())
        assert "it is not the gate waiting for approval" in shown and "gate at step 2" in shown, shown[:3000]
