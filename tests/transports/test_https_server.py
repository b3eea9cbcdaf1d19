"""The https transport called with the SDK's streamable HTTP client: its app in this process (fast
tier), and a real `vmware-pilot mcp --transport https` process (slow tier).

One server for the module (self-signed certificate made here, tokens and a roles file in its own
pilot home); tokens are added, changed and revoked while it runs, as an operator would.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import socket
import ssl
import subprocess
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp

from tests.support import asgi
from tests.support.server_proc import PILOT, PilotProcess, clean_env, make_cert, start_server
from vmware_pilot.app import build_app
from vmware_pilot.config import Settings
from vmware_pilot.domain.actor import Actor
from vmware_pilot.server import TOOL_NAMES
from vmware_pilot.transports.client import PilotClient, connect_http
from vmware_pilot.transports.http import HttpOptions, _tls_context, build_http_app
from vmware_pilot.transports.roles import RoleBook
from vmware_pilot.transports.tokens import TokenStore

READS = ["review_workflow", "get_workflow_status", "list_workflows", "get_skill_catalog"]
INCIDENT = {"alert_entity": "web-01", "alert_name": "High CPU"}
ROLES = """roles:
  operator:
    approve: others
    tools: "*"
"""


@dataclass
class Team:
    """The team's tokens in the server's pilot home, and how to reach the server."""

    home: Path
    secrets: dict[str, str]

    @property
    def tokens(self) -> TokenStore:
        return TokenStore(self.home / ".vmware" / "tokens.json")

    @property
    def origin(self) -> str:
        """The server's own origin."""
        raise NotImplementedError

    def connect(self, token: str, **headers: str) -> AbstractAsyncContextManager[PilotClient]:
        raise NotImplementedError

    async def send(
        self, method: str, path: str, headers: dict[str, str], content: bytes | None
    ) -> httpx.Response:
        raise NotImplementedError

    def client(self, name: str, **headers: str) -> AbstractAsyncContextManager[PilotClient]:
        return self.connect(self.secrets[name], **headers)

    async def raw(self, method: str, path: str = "/mcp", **headers: str) -> httpx.Response:
        return await self.send(
            method,
            path,
            {"content-type": "application/json", "accept": "application/json, text/event-stream"} | headers,
            b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}' if method == "POST" else None,
        )


@dataclass
class ServedTeam(Team):
    """A real `vmware-pilot mcp --transport https` process (slow tier)."""

    server: PilotProcess

    @property
    def origin(self) -> str:
        return f"https://localhost:{self.server.port}"

    def connect(self, token: str, **headers: str) -> AbstractAsyncContextManager[PilotClient]:
        return connect_http(self.server.url, token, verify=self.server.verify(), headers=headers)

    async def send(
        self, method: str, path: str, headers: dict[str, str], content: bytes | None
    ) -> httpx.Response:
        async with httpx.AsyncClient(verify=self.server.verify(), timeout=30) as http:
            return await http.request(method, self.server.base + path, headers=headers, content=content)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PILOT), *args],
            check=False,
            env=clean_env(self.home),
            capture_output=True,
            text=True,
            timeout=60,
        )


@dataclass
class InProcessTeam(Team):
    """The https transport's app in this process (its lifespan running), reached through httpx's
    ASGI transport as https://localhost:8443 (the fast tier)."""

    asgi: ASGIApp

    @property
    def origin(self) -> str:
        return BASE

    def connect(self, token: str, **headers: str) -> AbstractAsyncContextManager[PilotClient]:
        return asgi.mcp_session(self.asgi, BASE, token, **headers)

    async def send(
        self, method: str, path: str, headers: dict[str, str], content: bytes | None
    ) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.asgi)
        async with httpx.AsyncClient(transport=transport, base_url=BASE, timeout=30) as http:
            return await http.request(method, path, headers=headers, content=content)


BASE = "https://localhost:8443"


def _team_home(home: Path) -> dict[str, str]:
    """A pilot home under ``home`` with the roles file and the team's tokens; their secrets."""
    pilot_home = home / ".vmware"
    pilot_home.mkdir(mode=0o700)
    roles = pilot_home / "roles.yaml"
    roles.write_text(ROLES)
    roles.chmod(0o600)
    store = TokenStore(pilot_home / "tokens.json")
    return {
        "alice": store.create("alice", "admin"),
        "rita": store.create("rita", "reader"),
        "carol": store.create("carol", "operator"),
        "dave": store.create("dave", "operator"),
        "erin": store.create("erin", "operator"),
    }


@pytest.fixture(scope="module")
def served_team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedTeam]:
    home = tmp_path_factory.mktemp("https")
    secrets = _team_home(home)
    cert, key = make_cert(home)
    args = [
        "--transport",
        "https",
        "--cert",
        str(cert),
        "--key",
        str(key),
        "--public-name",
        "localhost,127.0.0.1",
    ]
    with start_server(home, args, ca=cert) as server:
        yield ServedTeam(home, secrets, server)
        assert server.stop() == 0, server.stderr()
    # Pilot's own failures are logged as ERROR by vmware_pilot loggers (with a correlation id).
    assert "ERROR vmware_pilot" not in server.stderr(), server.stderr()


@pytest.fixture(params=["in_process", pytest.param("entry_point", marks=pytest.mark.slow)])
async def team(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Team]:
    """The team's server: in this process (fast tier), or the module's real https process (slow)."""
    if request.param == "entry_point":
        yield request.getfixturevalue("served_team")
        return
    secrets = _team_home(tmp_path)
    pilot_home = tmp_path / ".vmware"
    app = build_app(Settings(home=pilot_home))
    try:
        tokens = TokenStore(pilot_home / "tokens.json")
        options = HttpOptions("https", public_names=("localhost", "127.0.0.1"))
        served = build_http_app(app, options, 8443, tokens, RoleBook(pilot_home / "roles.yaml", TOOL_NAMES))
        async with asgi.lifespan(served):
            yield InProcessTeam(tmp_path, secrets, served)
    finally:
        app.close()


def _refused_by_server(exc: BaseException) -> bool:
    """Whether an exception (group) raised by the SDK client holds the server's refusal of an HTTP
    request (the 2.x client reports a non-2xx answer as an ``MCPError`` without its status)."""
    if isinstance(exc, MCPError):
        return exc.error.message == "Server returned an error response"
    if isinstance(exc, BaseExceptionGroup):
        return any(_refused_by_server(e) for e in exc.exceptions)
    return False


async def _refused(team: Team, token: str) -> list[int]:
    """The HTTP status refusing ``token`` when the SDK's client cannot connect with it (the status
    of its first request, ``initialize``, sent again as it sends it); [] when it connects."""
    try:
        with anyio.fail_after(30):
            async with team.connect(token):
                pass
    except BaseException as exc:
        assert _refused_by_server(exc), exc
        initialize = await team.raw("POST", authorization=f"Bearer {token}")
        return [initialize.status_code]
    return []


async def _incident_at_gate(client: PilotClient) -> str:
    created = await client.call(
        "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
    )
    assert not created.is_error, created.payload
    workflow_id = str(created.payload["workflow_id"])
    ran = await client.call("run_workflow", {"workflow_id": workflow_id})
    assert ran.payload["state"] == "awaiting_approval", ran.payload
    return workflow_id


async def _approve(client: PilotClient, workflow_id: str, **extra: Any) -> dict[str, Any]:
    reply = await client.call(
        "approve", {"workflow_id": workflow_id, "acknowledge_not_executed": True, **extra}
    )
    return reply.payload


# --- HTTP surface ---------------------------------------------------------------------------
async def test_healthz_answers_without_a_token_and_says_nothing_else(team: Team) -> None:
    response = await team.raw("GET", "/healthz", host="anything.example")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert "server" not in response.headers
    head = await team.raw("HEAD", "/healthz")
    assert head.status_code == 200 and head.content == b""


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_mcp_without_a_token_is_401_with_a_bearer_challenge(team: Team, method: str) -> None:
    response = await team.raw(method)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"] == "invalid_token"


async def test_a_wrong_token_or_one_outside_the_authorization_header_is_401(team: Team) -> None:
    assert (await team.raw("POST", authorization="Bearer vpt_not-a-real-token")).status_code == 401
    assert (await team.raw("POST", authorization=f"Basic {team.secrets['alice']}")).status_code == 401
    assert (await team.raw("POST", f"/mcp?access_token={team.secrets['alice']}")).status_code == 401
    assert (await team.raw("POST", cookie=f"token={team.secrets['alice']}")).status_code == 401
    assert await _refused(team, "vpt_not-a-real-token") == [401]


async def test_a_host_the_server_is_not_named_by_is_421_even_with_a_valid_token(team: Team) -> None:
    response = await team.raw("POST", host="evil.example", authorization=f"Bearer {team.secrets['alice']}")
    assert response.status_code == 421
    assert (await team.raw("POST", host="evil.example")).status_code == 421


async def test_a_foreign_origin_is_403_and_the_servers_own_origin_is_accepted(team: Team) -> None:
    bearer = f"Bearer {team.secrets['alice']}"
    response = await team.raw("POST", origin="https://evil.example", authorization=bearer)
    assert response.status_code == 403
    async with team.client("alice", Origin=team.origin) as client:
        assert not (await client.call("list_workflows")).is_error


def _handshake(team: ServedTeam, oldest: ssl.TLSVersion, newest: ssl.TLSVersion) -> str:
    """The TLS version a client offering only ``oldest``..``newest`` gets (raises when refused)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=str(team.server.ca))
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # this client would accept anything the server offers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # setting TLS 1.0/1.1 is deprecated
        context.minimum_version, context.maximum_version = oldest, newest
    with (
        socket.create_connection(("127.0.0.1", team.server.port), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return str(tls.version())


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost, made in this process."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def _memory_handshake(
    server: ssl.SSLContext, ca: Path, oldest: ssl.TLSVersion, newest: ssl.TLSVersion
) -> str:
    """The TLS version a client offering only ``oldest``..``newest`` gets from a server with the
    ``server`` context, over in-memory buffers (raises when refused)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=str(ca))
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version, context.maximum_version = oldest, newest
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(to_client, to_server, server_hostname="localhost")
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    serving = server.wrap_bio(server_in, server_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for side, end in (("client", client), ("server", serving)):
            if not done[side]:
                with contextlib.suppress(ssl.SSLWantReadError):
                    end.do_handshake()
                    done[side] = True
        server_in.write(to_server.read())
        to_client.write(server_out.read())
        if all(done.values()):
            return str(client.version())
    raise AssertionError("the handshake did not finish")


def test_tls_is_1_2_or_later_in_process(tmp_path: Path) -> None:
    """The server's TLS context (what uvicorn serves with) refuses TLS 1.0/1.1 and offers 1.2 and 1.3."""
    cert, key = _self_signed(tmp_path)
    server = _tls_context(cert, key)(None, None)  # type: ignore[arg-type]
    with pytest.raises(ssl.SSLError) as refused:
        _memory_handshake(server, cert, ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1)
    assert "NO_PROTOCOLS_AVAILABLE" not in str(refused.value)  # the server refused, not the client
    assert _memory_handshake(server, cert, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    assert _memory_handshake(server, cert, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3) == "TLSv1.3"


@pytest.mark.slow  # in this process: test_tls_is_1_2_or_later_in_process
def test_tls_is_1_2_or_later_and_older_clients_are_refused_by_the_server(served_team: ServedTeam) -> None:
    team = served_team
    with pytest.raises(ssl.SSLError) as refused:
        _handshake(team, ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1)
    # The server hung up: the client did offer TLS 1.0/1.1 (it did not refuse on its own).
    assert "NO_PROTOCOLS_AVAILABLE" not in str(refused.value)
    assert _handshake(team, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    assert _handshake(team, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3) == "TLSv1.3"


# --- identity and roles ---------------------------------------------------------------------
async def test_an_admin_sees_all_13_tools_and_is_recorded_as_the_creator(team: Team) -> None:
    async with team.client("alice") as client:
        assert client.server_name == "vmware-pilot"
        tools = await client.session.list_tools()
        assert [t.name for t in tools.tools] == list(TOOL_NAMES)
        workflow_id = await _incident_at_gate(client)
        status = (await client.call("get_workflow_status", {"workflow_id": workflow_id})).payload
    assert status["created_by"] == "token:alice"
    assert {e["actor"] for e in status["audit_log"]} == {"token:alice"}


async def test_a_reader_sees_only_the_four_read_tools_and_cannot_approve(team: Team) -> None:
    async with team.client("alice") as admin:
        workflow_id = await _incident_at_gate(admin)
    async with team.client("rita") as reader:
        tools = await reader.session.list_tools()
        assert [t.name for t in tools.tools] == READS
        refused = await reader.call("approve", {"workflow_id": workflow_id, "acknowledge_not_executed": True})
        assert refused.is_error
        assert "Role 'reader' may not call approve" in refused.payload["error"]
        assert refused.payload["hint"]
        created = await reader.call(
            "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
        )
        assert created.is_error and "may not call create_workflow_from_template" in created.payload["error"]
        status = await reader.call("get_workflow_status", {"workflow_id": workflow_id})
    assert not status.is_error
    assert status.payload["state"] == "awaiting_approval" and status.payload["approved_by"] == ""


async def test_four_eyes_refuses_the_creator_and_lets_a_colleague_approve(team: Team) -> None:
    async with team.client("carol") as carol:
        workflow_id = await _incident_at_gate(carol)
        own = await _approve(carol, workflow_id)
        assert "you created" in own["error"] and own["role"] == "operator"
        assert "Have someone whose role allows approving" in own["hint"]
    async with team.client("dave") as dave:
        approved = await _approve(dave, workflow_id)
    assert "error" not in approved, approved
    assert approved["approved_by"] == "token:dave"
    actors = [(e["action"], e["actor"]) for e in approved["audit_log"]]
    assert actors[:2] == [("workflow_created", "token:carol"), ("run_started", "token:carol")]
    assert ("awaiting_approval", "token:carol") in actors and ("approved", "token:dave") in actors


async def test_four_eyes_refuses_whoever_edited_the_draft(team: Team) -> None:
    gate = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "ok?"}}
    read = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines", "params": {}}
    async with team.client("carol") as carol:
        draft = (await carol.call("design_workflow", {"goal": "inventory"})).payload["workflow_id"]
    async with team.client("dave") as dave:
        edited = await dave.call(
            "update_draft", {"workflow_id": draft, "name": "inventory", "steps": [read, gate, read]}
        )
        assert not edited.is_error, edited.payload
        confirmed = await dave.call("confirm_draft", {"workflow_id": draft})
        assert not confirmed.is_error, confirmed.payload
    async with team.client("erin") as erin:
        ran = await erin.call("run_workflow", {"workflow_id": draft})
        assert ran.payload["state"] == "awaiting_approval", ran.payload
    async with team.client("dave") as dave:
        refused = await _approve(dave, draft)
        assert "you edited" in refused["error"]
    async with team.client("erin") as erin:
        approved = await _approve(erin, draft)
    assert approved["approved_by"] == "token:erin", approved
    assert approved["created_by"] == "token:carol" and approved["authors"] == ["token:dave"]


async def test_an_approver_naming_someone_else_is_refused_and_the_callers_own_name_accepted(
    team: Team,
) -> None:
    async with team.client("alice") as alice:
        first, second = await _incident_at_gate(alice), await _incident_at_gate(alice)
        other = await _approve(alice, first, approver="dave")
        assert "differs from the authenticated caller 'token:alice'" in other["error"]
        assert (await alice.call("get_workflow_status", {"workflow_id": first})).payload["approved_by"] == ""
        assert (await _approve(alice, first, approver="alice"))["approved_by"] == "token:alice"
        assert (await _approve(alice, second, approver="token:alice"))["approved_by"] == "token:alice"


@pytest.mark.slow
async def test_the_operator_cli_approves_on_the_servers_store_while_it_runs(served_team: ServedTeam) -> None:
    team = served_team
    """The host's operator CLI is a door of its own: the OS account, outside the token roles.

    Two CLI processes open and close the store while the server keeps it open: the server must
    still see their writes (it keeps its SQLite locks, so neither CLI removes the WAL it reads)."""
    async with team.client("carol") as carol:
        workflow_id = await _incident_at_gate(carol)
        listed = team.cli("workflows", "--json")
        assert workflow_id in {w["id"] for w in json.loads(listed.stdout)["workflows"]}, listed.stderr
        approved = team.cli("approve", workflow_id, "--ack-not-executed", "--yes", "--json")
        assert approved.returncode == 0, approved.stderr
        status = (await carol.call("get_workflow_status", {"workflow_id": workflow_id})).payload
    me = Actor.os_user().name
    assert json.loads(approved.stdout)["approved_by"] == me
    assert status["state"] == "pending" and status["approved_by"] == me, "the server sees the CLI's write"
    assert [(a["approver"], a["channel"]) for a in status["gates"][0]["approvals"]] == [(me, "cli")]
    assert status["created_by"] == "token:carol"


# --- changes while the server runs ------------------------------------------------------------
@pytest.mark.slow
async def test_a_token_revoked_while_the_server_runs_is_refused_on_its_next_request(
    served_team: ServedTeam,
) -> None:
    team = served_team
    team.secrets["temp"] = team.tokens.create("temp", "admin")
    async with team.client("alice"):
        pass  # another caller's session is unaffected below
    with pytest.raises(BaseException) as raised:
        with anyio.fail_after(30):
            async with team.client("temp") as temp:
                assert not (await temp.call("list_workflows")).is_error
                revoked = team.cli("token", "revoke", "temp")
                assert revoked.returncode == 0, revoked.stderr
                await temp.call("list_workflows")
    assert _refused_by_server(raised.value)
    assert await _refused(team, team.secrets["temp"]) == [401]
    async with team.client("alice") as alice:
        assert not (await alice.call("list_workflows")).is_error


@pytest.mark.slow
async def test_a_new_token_and_a_role_change_apply_without_a_restart(served_team: ServedTeam) -> None:
    team = served_team
    created = team.cli("token", "create", "newcomer", "--role", "reader")
    assert created.returncode == 0, created.stderr
    team.secrets["newcomer"] = created.stdout.strip()
    async with team.client("newcomer") as client:
        assert [t.name for t in (await client.session.list_tools()).tools] == READS
        changed = team.cli("token", "set-role", "newcomer", "admin")
        assert changed.returncode == 0, changed.stderr
        assert [t.name for t in (await client.session.list_tools()).tools] == list(TOOL_NAMES)
        reply = await client.call(
            "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
        )
    assert not reply.is_error and reply.payload["state"] == "pending"


async def test_a_role_that_disappears_from_the_roles_file_refuses_its_callers_with_the_reason(
    team: Team,
) -> None:
    team.secrets["gina"] = team.tokens.create("gina", "auditor")
    roles = team.home / ".vmware" / "roles.yaml"
    async with team.client("gina") as gina:
        assert (await gina.session.list_tools()).tools == []
        refused = await gina.call("list_workflows")
        assert refused.is_error and "Role 'auditor' is not defined" in refused.payload["error"]
        roles.write_text(ROLES + "  auditor:\n    approve: none\n    tools: read\n")
        try:
            assert [t.name for t in (await gina.session.list_tools()).tools] == READS
            assert not (await gina.call("list_workflows")).is_error
        finally:
            roles.write_text(ROLES)


async def test_a_literal_secret_is_handed_out_only_to_the_token_that_created_the_workflow(
    team: Team,
) -> None:
    secret = "s3cr3t-of-alice"
    step = {
        "action": "list",
        "skill": "aiops",
        "tool": "list_virtual_machines",
        "params": {"vc_password": secret},
    }
    async with team.client("alice") as alice, team.client("carol") as carol:
        created = await alice.call("create_workflow", {"name": "n", "description": "d", "steps": [step]})
        workflow_id = created.payload["workflow_id"]
        refused = await carol.call("run_workflow", {"workflow_id": workflow_id})
        assert refused.is_error and secret not in json.dumps(refused.payload)
        assert '{"$env"' in refused.payload["hint"]
        handed = await alice.call("run_workflow", {"workflow_id": workflow_id})
        assert handed.payload["pending_dispatch"][0]["params"] == {"vc_password": secret}
        # ...and the steps handed to alice are not handed to carol afterwards either.
        again = await carol.call("run_workflow", {"workflow_id": workflow_id})
        assert again.is_error and again.payload["handed_to"] == "token:alice"
        assert secret not in json.dumps(again.payload)
