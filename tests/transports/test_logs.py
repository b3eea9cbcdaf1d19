"""The server's log: JSON lines with the request's context, and the SDK's noise made quiet.

In-process for the formatter and the noise filter; a real `vmware-pilot mcp --transport http`
for a log written in JSON while a client is refused and disconnects.
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.support.mcp_client import INCIDENT
from tests.support.server_proc import PILOT, clean_env, start_server
from vmware_pilot import telemetry
from vmware_pilot.cli.logs import configure_logging
from vmware_pilot.transports.client import connect_http

KEYS = {"time", "level", "logger", "message", "workflow_id", "request_id", "caller", "source"}


class Err:
    """What the test wrote to stderr so far (the CLI's logging writes there)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.seen = ""

    def getvalue(self) -> str:
        self.seen += self.capsys.readouterr().err
        return self.seen


@pytest.fixture
def stream(capsys: pytest.CaptureFixture[str]) -> Iterator[Err]:
    """Root logging as the CLI configures it, into the captured stderr; put back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    # A network server built earlier in this process quiets these loggers (transports/http.py):
    # a process of its own starts from their defaults.
    sdk = [logging.getLogger(n) for n in ("mcp.server.streamable_http", "mcp.server.lowlevel.server")]
    levels = [logger.level for logger in sdk]
    for logger in sdk:
        logger.setLevel(logging.NOTSET)
    try:
        yield Err(capsys)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for logger, saved in zip(sdk, levels, strict=True):
            logger.setLevel(saved)


def _closed() -> BaseException:
    try:
        raise BaseExceptionGroup("in the task group", [anyio.ClosedResourceError()])
    except BaseExceptionGroup as exc:
        return exc


def test_json_lines_carry_the_context_of_the_request(stream: Err) -> None:
    configure_logging("INFO", "json")
    tokens = [
        telemetry.workflow_id.set("wf-1"),
        telemetry.request_id.set("7"),
        telemetry.caller.set("token:alice"),
    ]
    try:
        logging.getLogger("vmware_pilot.engine").warning("a %s line", "warning")
    finally:
        for var, token in zip(
            (telemetry.workflow_id, telemetry.request_id, telemetry.caller), tokens, strict=True
        ):
            var.reset(token)
    logging.getLogger("vmware_pilot.x").info("outside a request\nsecond line")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert set(first) == KEYS
    assert first["message"] == "a warning line" and first["level"] == "WARNING"
    assert (first["workflow_id"], first["request_id"], first["caller"]) == ("wf-1", "7", "token:alice")
    assert first["logger"] == "vmware_pilot.engine" and first["time"].endswith("+00:00")
    assert first["source"].startswith("test_logs:")
    assert second["message"] == "outside a request\nsecond line" and second["workflow_id"] == ""


def test_a_disconnect_traceback_from_the_sdk_becomes_one_debug_line(stream: Err) -> None:
    sdk = logging.getLogger("mcp.server.streamable_http")
    configure_logging("INFO", "text")
    sdk.error("Error in standalone SSE writer", exc_info=_closed())
    assert stream.getvalue() == ""  # at INFO: nothing at all
    configure_logging("DEBUG", "text")
    sdk.error("Error in standalone SSE writer", exc_info=_closed())
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert (
        " DEBUG mcp.server.streamable_http: Error in standalone SSE writer: ClosedResourceError" in lines[0]
    )
    # anything else the SDK reports keeps its level and traceback
    sdk.error("Error in standalone SSE writer", exc_info=ValueError("a real bug"))
    rest = stream.getvalue().splitlines()[1:]
    assert rest[0].split(" ")[2] == "ERROR" and "ValueError: a real bug" in rest[-1]


def test_a_cancelled_request_is_one_debug_line(stream: Err) -> None:
    configure_logging("INFO", "text")
    logging.getLogger("mcp.server.lowlevel.server").info(
        "Request %s cancelled - duplicate response suppressed", 4
    )
    assert stream.getvalue() == ""


@pytest.mark.slow
async def test_a_json_log_of_a_refusal_and_a_disconnect_has_no_traceback(tmp_path: Path) -> None:
    home = tmp_path
    (home / ".vmware").mkdir(mode=0o700)
    (home / ".vmware" / "roles.yaml").write_text("roles: {}\n")
    (home / ".vmware" / "roles.yaml").chmod(0o600)
    secrets = {}
    for name, role in (("alice", "admin"), ("rita", "reader")):
        done = subprocess.run(
            [str(PILOT), "token", "create", name, "--role", role], env=clean_env(home), cwd=home,
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        secrets[name] = done.stdout.strip()
    env = {"VMWARE_PILOT_LOG_FORMAT": "json"}
    with start_server(home, ["--transport", "http"], env=env) as server:
        async with connect_http(server.url, secrets["alice"]) as alice:
            created = await alice.call(
                "create_workflow_from_template", {"workflow_type": "incident_response", "params": INCIDENT}
            )
            workflow_id = str(created.payload["workflow_id"])
        async with connect_http(server.url, secrets["rita"]) as rita:
            refused = await rita.call("run_workflow", {"workflow_id": workflow_id})
            assert refused.is_error
        assert server.stop() == 0
    log = server.stderr()
    records = [json.loads(line) for line in log.splitlines()]  # every line is one JSON object
    assert all(set(r) >= KEYS for r in records)
    assert "listening on" in records[0]["message"]
    refusal = [r for r in records if "refused run_workflow" in r["message"]]
    assert len(refusal) == 1, records
    assert refusal[0]["caller"] == "token:rita" and refusal[0]["workflow_id"] == workflow_id
    assert refusal[0]["request_id"] and refusal[0]["level"] == "WARNING"
    assert "Traceback" not in log and not any(r["level"] == "ERROR" for r in records), log
