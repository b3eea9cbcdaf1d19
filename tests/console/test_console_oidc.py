"""Console sign-in at a real OpenID Provider (oidc-provider on loopback): the authorization code
flow with PKCE, state and nonce, over HTTP (the refusals) and in chromium (the person's path).

The provider registers the confidential client ``pilot-console`` with this Pilot's callback, so
the test picks Pilot's port before starting either. Its ID tokens hold only the subject: the
console reads the name and groups from the userinfo endpoint.
"""

from __future__ import annotations

import asyncio
import functools
import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.support.console_locking import Sent, serving, while_locked, write_begins
from tests.support.console_team import make_pilot_home, run
from tests.support.oidc_provider import Person, Provider, free_port, new_key
from tests.support.server_proc import PilotProcess, start_server
from vmware_pilot.config import Settings
from vmware_pilot.transports.client import connect_http
from vmware_pilot.transports.console.oidc import CALLBACK_PATH, OidcLogin, OidcRefused
from vmware_pilot.transports.jwks import IssuerKeys

pytestmark = pytest.mark.slow

PEOPLE = [
    Person("alice", "alice-secret", "Alice Example", ("vmware-operators",)),
    Person("bob", "bob-secret", "Bob Builder", ("vmware-operators",)),
    Person("zed", "zed-secret", "Zed Nobody", ("unrelated",)),
]
ROLES = "roles:\n  operator:\n    approve: others\n    tools: '*'\ngroups:\n  vmware-operators: operator\n"
GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "go?"}}


@pytest.fixture(scope="module")
def port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory, port: int) -> Iterator[Provider]:
    op = Provider(tmp_path_factory.mktemp("oidc"), PEOPLE, [new_key("k1")])
    op.console_redirect = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
    op.start()
    yield op
    op.stop()


@pytest.fixture(scope="module")
def pilot(tmp_path_factory: pytest.TempPathFactory, provider: Provider, port: int) -> Iterator[PilotProcess]:
    home = tmp_path_factory.mktemp("pilot")
    (home / ".vmware").mkdir(mode=0o700)
    (home / ".vmware" / "roles.yaml").write_text(ROLES)
    (home / ".vmware" / "roles.yaml").chmod(0o600)
    env = {
        "VMWARE_PILOT_OAUTH_ISSUER": provider.issuer,
        "VMWARE_PILOT_CONSOLE_OIDC_CLIENT_ID": "pilot-console",
        "VMWARE_PILOT_CONSOLE_OIDC_CLIENT_SECRET": "console-secret",
        "VMWARE_PILOT_CONSOLE_OIDC_SCOPES": "openid profile groups",
    }
    with start_server(home, ["--transport", "http"], env=env, port=port) as proc:
        yield proc
    assert "console-secret" not in proc.stderr()


def _to_callback(http: httpx.Client, pilot: PilotProcess, login: str, start: str = "") -> str:
    """Start a sign-in (at ``start``, by default ``pilot``'s base) and play the person at the
    provider: the callback URL it sends back (to ``pilot``, the one the provider knows)."""
    response = http.get(f"{start or pilot.base}/console/oidc/start")
    assert response.status_code == 303, response.text
    for _ in range(20):
        location = response.headers.get("location", "")
        if location.startswith(pilot.base + CALLBACK_PATH):
            return location
        if response.is_redirect:
            response = http.get(urljoin(str(response.url), location))
            continue
        assert response.status_code == 200, response.text
        action = re.search(r'<form[^>]*action="([^"]+)"', response.text)
        prompt = re.search(r'name="prompt" value="(\w+)"', response.text)
        assert action and prompt, response.text
        form = {"prompt": prompt.group(1)}
        if prompt.group(1) == "login":
            form |= {"login": login, "password": "any"}
        response = http.post(urljoin(str(response.url), html.unescape(action.group(1))), data=form)
    raise AssertionError("the provider never sent the browser back to the console")


def _replay(callback: str, start: str) -> httpx.Response:
    """The callback again, from a client holding only the pre-login cookie ``start``."""
    with httpx.Client(timeout=30, cookies={"pilot_console_oidc": start}) as again:
        return again.get(callback)


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def _with(url: str, **changes: str) -> str:
    return url.split("?", maxsplit=1)[0] + "?" + urlencode({**_query(url), **changes})


def test_the_login_page_offers_the_organisation_and_a_person_signs_in(pilot: PilotProcess) -> None:
    with httpx.Client(timeout=30) as http:
        assert "Sign in with your organisation" in http.get(f"{pilot.base}/console/login").text
        callback = _to_callback(http, pilot, "alice")
        start = http.cookies.get("pilot_console_oidc")
        assert start, "the pre-login cookie was set"
        done = http.get(callback)
        assert done.status_code == 200 and "Welcome, Alice Example" in done.text, done.text
        assert 'http-equiv="refresh" content="0; url=/console/workflows"' in done.text
        page = http.get(f"{pilot.base}/console/workflows")
        assert "Signed in as <strong>Alice Example (oidc:alice)</strong>" in page.text
        # The same callback again, with the pre-login cookie the response deleted: used up.
        replayed = _replay(callback, start)
    assert replayed.status_code == 400 and "already used" in replayed.text
    assert "Traceback" not in replayed.text


def test_the_start_cookie_is_httponly_lax_and_scoped(pilot: PilotProcess) -> None:
    with httpx.Client(timeout=30) as http:
        response = http.get(f"{pilot.base}/console/oidc/start?next=/console/workflows?state=failed")
    cookie = response.headers["set-cookie"].lower()
    assert "pilot_console_oidc=" in cookie and "httponly" in cookie and "samesite=lax" in cookie
    assert "path=/console/oidc" in cookie
    query = _query(response.headers["location"])
    assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
    assert query["client_id"] == "pilot-console" and query["scope"] == "openid profile groups"
    assert query["redirect_uri"] == pilot.base + CALLBACK_PATH
    assert len(query["state"]) >= 43 and len(query["nonce"]) >= 43 and query["state"] != query["nonce"]


def test_a_signed_in_persons_role_is_read_from_their_groups_at_every_request(pilot: PilotProcess) -> None:
    roles = pilot.log.parent / ".vmware" / "roles.yaml"
    with httpx.Client(timeout=30) as http:
        assert http.get(_to_callback(http, pilot, "bob")).status_code == 200
        assert http.get(f"{pilot.base}/console/workflows").status_code == 200
        try:
            roles.write_text(ROLES.replace("vmware-operators: operator", "vmware-operators: ~"))
            refused = http.get(f"{pilot.base}/console/workflows", follow_redirects=False)
            assert refused.status_code == 403 and "None of your groups (vmware-operators)" in refused.text
        finally:
            roles.write_text(ROLES)
        assert http.get(f"{pilot.base}/console/workflows").status_code == 200


def test_a_tampered_state_is_refused_and_uses_up_the_attempt(pilot: PilotProcess) -> None:
    with httpx.Client(timeout=30) as http:
        callback = _to_callback(http, pilot, "alice")
        start = http.cookies.get("pilot_console_oidc")
        assert start
        tampered = http.get(_with(callback, state="forged"))
        after = _replay(callback, start)
        signed_in = http.get(f"{pilot.base}/console/workflows")
    assert tampered.status_code == 400 and "does not belong to this sign-in (state)" in tampered.text
    assert "Start again" in tampered.text
    assert after.status_code == 400 and "already used" in after.text
    assert signed_in.status_code == 303 and signed_in.headers["location"].startswith("/console/login")


def test_an_answer_naming_another_issuer_or_none_is_refused_before_it_is_read(
    pilot: PilotProcess, provider: Provider
) -> None:
    # RFC 9207: the provider names itself in its answer, and says so in its metadata.
    metadata = httpx.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=30).json()
    assert metadata["authorization_response_iss_parameter_supported"] is True
    with httpx.Client(timeout=30) as http:
        callback = _to_callback(http, pilot, "alice")
        assert _query(callback)["iss"] == provider.issuer
        start = http.cookies.get("pilot_console_oidc")
        assert start
        mixed_up = http.get(_with(callback, iss="http://127.0.0.1:9"))
        after = _replay(callback, start)  # the attempt was used up: the real answer is late
        callback = _to_callback(http, pilot, "alice")
        without_iss = {k: v for k, v in _query(callback).items() if k != "iss"}
        unnamed = http.get(callback.split("?", maxsplit=1)[0] + "?" + urlencode(without_iss))
        slashed = http.get(_with(_to_callback(http, pilot, "alice"), iss=provider.issuer + "/"))
        signed_in = http.get(f"{pilot.base}/console/workflows")
    assert (
        mixed_up.status_code == 400
        and f"another identity provider than {provider.issuer} (iss)" in mixed_up.text
    )
    assert after.status_code == 400 and "already used" in after.text
    assert unnamed.status_code == 400, unnamed.text
    assert "does not name its identity provider (iss)" in unnamed.text
    assert slashed.status_code == 400 and "another identity provider" in slashed.text  # a simple string
    assert signed_in.status_code == 303 and signed_in.headers["location"].startswith("/console/login")


def test_a_callback_without_the_start_cookie_is_refused(pilot: PilotProcess) -> None:
    with httpx.Client(timeout=30) as http:
        callback = _to_callback(http, pilot, "alice")
    with httpx.Client(timeout=30) as other:  # another browser: the code alone signs nobody in
        refused = other.get(callback)
        assert refused.status_code == 400 and "did not start it" in refused.text
        assert "pilot_console=" not in refused.headers.get("set-cookie", "").replace("pilot_console_oidc", "")


def test_the_providers_error_and_a_person_without_a_role_get_clear_pages(
    pilot: PilotProcess, provider: Provider
) -> None:
    with httpx.Client(timeout=30) as http:
        start = http.get(f"{pilot.base}/console/oidc/start")
        state = _query(start.headers["location"])["state"]
        denied = http.get(
            f"{pilot.base}{CALLBACK_PATH}?"
            + urlencode(
                {
                    "error": "access_denied",
                    "error_description": "<b>no</b>",
                    "state": state,
                    "iss": provider.issuer,
                }
            )
        )
        assert denied.status_code == 400
        assert "refused the sign-in: access_denied (&lt;b&gt;no&lt;/b&gt;)" in denied.text
        nobody = http.get(_to_callback(http, pilot, "zed"))
    assert nobody.status_code == 403 and "None of your groups (unrelated) gives a role" in nobody.text
    assert "Ask an administrator to map one of your groups" in nobody.text
    assert "pilot_console=" not in nobody.headers.get("set-cookie", "").replace("pilot_console_oidc", "")


def test_an_id_token_for_another_nonce_or_client_is_refused(provider: Provider) -> None:
    """The ID token checks, with tokens signed by the provider's own key (which it would never issue)."""
    login = OidcLogin(IssuerKeys(provider.issuer), "pilot-console", "", "openid", "groups", "http://x/cb")
    good = {"sub": "alice", "aud": "pilot-console", "nonce": "n1"}

    async def claims(token: str) -> dict[str, Any]:
        return await login._id_claims(token, "n1")

    assert asyncio.run(claims(provider.sign(good)))["sub"] == "alice"
    cases = {
        "another sign-in (nonce)": {**good, "nonce": "n2"},
        "InvalidAudienceError": {**good, "aud": "mcp-desktop"},
        "ExpiredSignatureError": {**good, "exp": 1000, "iat": 900},
        "MissingRequiredClaimError": {k: v for k, v in good.items() if k != "nonce"},
        "InvalidIssuerError": {**good, "iss": "http://127.0.0.1:9"},
    }
    for why, body in cases.items():
        with pytest.raises(OidcRefused, match=re.escape(why)):
            asyncio.run(claims(provider.sign(body)))
    with pytest.raises(OidcRefused, match="InvalidSignatureError"):
        asyncio.run(claims(provider.sign(good, key=new_key("k1"))))


def test_a_flood_of_sign_in_starts_leaves_a_sign_in_in_progress_alone(provider: Provider) -> None:
    login = OidcLogin(IssuerKeys(provider.issuer), "pilot-console", "", "openid", "groups", "http://x/cb")

    async def flood() -> tuple[str, int]:
        mine, _ = await login.start("/console/workflows", "10.0.0.1")
        for _ in range(10_001):  # from one address: it only ever replaces its own attempts
            await login.start("", "10.6.6.6")
        busy = 0
        for n in range(10_050):  # from everywhere: once full, new attempts are refused, none evicted
            try:
                await login.start("", f"10.7.{n // 250}.{n % 250}")
            except OidcRefused as exc:
                assert "Too many sign-ins" in exc.message
                busy += 1
        return mine, busy

    mine, busy = asyncio.run(flood())
    assert busy > 0
    # Still known: refused for its state, not as an unknown attempt.
    with pytest.raises(OidcRefused, match=r"does not belong to this sign-in \(state\)"):
        asyncio.run(login.finish(mine, {"state": "forged", "code": "x"}))


def test_the_sign_in_at_the_provider_waits_for_the_database_lock_off_the_event_loop(
    pilot: PilotProcess, provider: Provider, tmp_path: Path
) -> None:
    """The callback asks the provider first (code, ID token, userinfo), then opens the session: a
    Pilot on a thread of this process, so the lock is held until its store asks for it. It
    names the module's Pilot as its public URL, the redirect the provider knows; the test
    carries the callback to it."""
    home = tmp_path / ".vmware"
    home.mkdir(mode=0o700)
    (home / "roles.yaml").write_text(ROLES)
    (home / "roles.yaml").chmod(0o600)
    settings = Settings(
        home=home,
        oauth_issuer=provider.issuer,
        console_oidc_client_id="pilot-console",
        console_oidc_client_secret="console-secret",
        console_oidc_scopes="openid profile groups",
        public_url=pilot.base,
    )
    with serving(settings) as server, httpx.Client(timeout=30) as http:
        callback = _to_callback(http, pilot, "alice", start=server.base)
        cookie = {"cookie": f"pilot_console_oidc={http.cookies.get('pilot_console_oidc')}"}
        path = callback.removeprefix(pilot.base)
        with write_begins(server.app) as asking:
            send = functools.partial(Sent, server, path, b"", cookie, "GET")
            answer = while_locked(server, home / "pilot.db", send, asking)
    assert answer.status == 200 and b"Welcome, Alice Example" in answer.body, answer.body[:500]
    assert "pilot_console=" in answer.headers["set-cookie"]


async def _at_gate(pilot: PilotProcess, provider: Provider) -> str:
    token = provider.token("alice", pilot.url)
    async with connect_http(pilot.url, token, verify=False) as alice:
        created = await alice.call(
            "create_workflow", {"name": "four-eyes", "description": "t", "steps": [GATE]}
        )
        workflow_id = str(created.payload["workflow_id"])
        ran = await alice.call("run_workflow", {"workflow_id": workflow_id})
    assert ran.payload["state"] == "awaiting_approval", ran.payload
    return workflow_id


async def _status(pilot: PilotProcess, provider: Provider, workflow_id: str) -> dict[str, Any]:
    async with connect_http(pilot.url, provider.token("alice", pilot.url), verify=False) as alice:
        status: dict[str, Any] = (
            await alice.call("get_workflow_status", {"workflow_id": workflow_id})
        ).payload
    return status


def _sign_in_at_provider(page: Any, base: str, login: str, path: str) -> None:
    page.goto(base + path)
    page.get_by_role("link", name="Sign in with your organisation").click()
    page.locator('input[name="login"]').fill(login)
    page.locator('input[name="password"]').fill("any")
    page.locator('button[type="submit"]').click()
    page.wait_for_url(re.compile(r".*/interaction/.*"))
    page.locator('button[type="submit"]').click()  # the consent page
    page.wait_for_url(f"{base}{path}")


def test_in_the_browser_a_second_person_signs_in_at_the_provider_and_approves(
    browser: Browser, pilot: PilotProcess, provider: Provider
) -> None:
    workflow_id = run(_at_gate(pilot, provider))
    gate_path = f"/console/workflows/{workflow_id}/gate"
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    try:
        _sign_in_at_provider(page, pilot.base, "alice", gate_path)
        expect(page.locator(".who")).to_contain_text("Signed in as Alice Example (oidc:alice)")
        expect(page.locator("body")).to_contain_text("approves only")  # her own workflow: four eyes
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(f"{pilot.base}/console/login")
        page.goto(pilot.base + "/console/workflows")
        page.wait_for_url(re.compile(r".*/console/login.*"))
    finally:
        context.close()
    # Another browser: the provider's own session of alice stays in the first one.
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    try:
        _sign_in_at_provider(page, pilot.base, "bob", gate_path)
        expect(page.locator(".who")).to_contain_text("Signed in as Bob Builder (oidc:bob)")
        page.get_by_role("button", name="Approve as Bob Builder (oidc:bob)").click()
        page.wait_for_url(f"{pilot.base}/console/workflows/{workflow_id}?notice=approved")
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(f"{pilot.base}/console/login")
    finally:
        context.close()
    done = run(_status(pilot, provider, workflow_id))
    assert done["created_by"] == "Alice Example (oidc:alice)"
    assert [(a["approver"], a["channel"]) for a in done["gates"][0]["approvals"]] == [
        ("Bob Builder (oidc:bob)", "console")
    ]


def test_a_console_client_id_without_an_issuer_is_ignored_with_a_warning(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    folder = tmp_path_factory.mktemp("no-issuer")
    home, _ = make_pilot_home(folder, {"alice": "admin"})
    env = {"VMWARE_PILOT_HOME": str(home), "VMWARE_PILOT_CONSOLE_OIDC_CLIENT_ID": "pilot-console"}
    with start_server(folder, ["--transport", "http"], env=env) as server:
        page = httpx.get(f"{server.base}/console/login", timeout=30).text
        start = httpx.get(f"{server.base}/console/oidc/start", timeout=30)
    assert "Sign in with your organisation" not in page and start.status_code == 404
    assert "VMWARE_PILOT_CONSOLE_OIDC_CLIENT_ID is ignored" in server.stderr()
