"""Raw lines into the stdio server (in this process, and a real `vmware-pilot mcp` process in the slow
tier): every bad line is answered and serving goes on."""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import stdio
from tests.support.server_proc import PILOT, clean_env
from tests.support.stdio import INIT, RawStdio, serve_files
from vmware_pilot.limits import MAX_REQUEST_BYTES
from vmware_pilot.transports.stdio import INVALID_REQUEST, PARSE_ERROR, _PipeChannel, answer_line, line_id


@pytest.fixture(scope="module", params=["in_process", pytest.param("entry_point", marks=pytest.mark.slow)])
def raw(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    """One server for the module (in this process, or a real `vmware-pilot mcp` in the slow tier):
    each test also checks it still serves after the last one."""
    with getattr(stdio, request.param)(tmp_path_factory.mktemp("stdio")) as server:
        server.initialize()
        yield server


def _error(reply: dict[str, Any], request_id: int | None, code: int) -> str:
    assert reply["id"] == request_id, reply
    assert reply["error"]["code"] == code, reply
    message = reply["error"]["message"]
    assert isinstance(message, str) and len(message) <= 600
    return message


def test_a_line_that_is_not_json_gets_a_parse_error_and_serving_goes_on(raw: RawStdio) -> None:
    raw.send(b"this is not json\n")
    assert "Parse error" in _error(raw.reply(), None, PARSE_ERROR)
    raw.send(b'{"jsonrpc": "2.0", "id": 3, "method": \n')
    _error(raw.reply(), 3, PARSE_ERROR)  # the id it does carry, so its sender is not left waiting
    raw.alive(4)


def test_json_nested_too_deeply_gets_an_invalid_request_with_its_id(raw: RawStdio) -> None:
    deep = "[" * 300 + "]" * 300
    raw.send(f'{{"jsonrpc":"2.0","id":5,"method":"ping","params":{{"x":{deep}}}}}\n'.encode())
    assert "nested too deeply" in _error(raw.reply(), 5, INVALID_REQUEST)
    raw.send(("[" * 5000 + "]" * 5000 + "\n").encode())
    _error(raw.reply(), None, PARSE_ERROR)
    raw.alive(6)


def test_a_lone_surrogate_gets_an_invalid_request_with_its_id(raw: RawStdio) -> None:
    call = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_workflow_status","arguments":{"workflow_id":"\\ud800"}}}'
    raw.send(call.encode() + b"\n")
    assert "surrogate" in _error(raw.reply(), 7, INVALID_REQUEST)
    raw.alive(8)


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":9}', 9),
        (b'{"jsonrpc":"1.0","id":10,"method":"ping"}', 10),
        (b'{"id":11,"method":7}', 11),
        (b"[]", None),
        (b"42", None),
        (b'"ping"', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping","params":3}', None),
    ],
)
def test_a_message_that_is_not_json_rpc_gets_an_invalid_request(
    raw: RawStdio, line: bytes, request_id: int | None
) -> None:
    raw.send(line + b"\n")
    assert "JSON-RPC" in _error(raw.reply(), request_id, INVALID_REQUEST)
    raw.alive(12)


def test_a_line_over_the_limit_is_refused_with_its_id_and_serving_goes_on(raw: RawStdio) -> None:
    head = b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"design_workflow","arguments":{"goal":"'
    raw.send(head + b"g" * (2 * MAX_REQUEST_BYTES) + b'"}}}\n')
    message = _error(raw.reply(), 13, INVALID_REQUEST)
    assert str(MAX_REQUEST_BYTES) in message
    raw.alive(14)
    # Nothing of the long line was taken as a message: no draft was designed.
    listed = raw.request(15, "tools/call", {"name": "list_workflows", "arguments": {}})
    assert json.loads(listed["result"]["content"][0]["text"])["active_workflows"] == []


def test_a_request_just_under_the_limit_is_read_and_answered_as_a_tool_result(raw: RawStdio) -> None:
    words = ("word " * 12_000)[:60_000]
    arguments = {"workflow_id": "wf-x", **{f"pad{i}": words for i in range(16)}}
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 16,
            "method": "tools/call",
            "params": {"name": "get_workflow_status", "arguments": arguments},
        }
    ).encode()
    assert MAX_REQUEST_BYTES - 100_000 < len(line) < MAX_REQUEST_BYTES
    raw.send(line + b"\n")
    answer = raw.reply()
    assert answer["id"] == 16 and answer["result"]["isError"] is True
    assert answer["result"]["structuredContent"]["field"].startswith("pad")


def test_blank_lines_are_ignored(raw: RawStdio) -> None:
    raw.send(b"\n  \n\r\n")
    raw.alive(17)


_LONG = "g" * 50_000


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"', 7),
        ('  { "method" : "x", "id" : "abc", "params": [', "abc"),
        ('{"method":"x","params":{"id":3,"b":"', None),
        ('{"jsonrpc":"2.0","id":true', None),
        ("[1,2", None),
        ('{"jsonrpc":"2.0","i', None),
        # The id last, after a long params, as the MCP SDKs write it.
        (f'{{"method":"x","params":{{"a":"{_LONG}"}},"jsonrpc":"2.0","id":42}}', 42),
        (f'{{"method":"x","params":{{"a":"{_LONG}"}},"id":"r-1"}}\r\n', "r-1"),
        (f'{{"method":"x","params":{{"a":"{_LONG}"}},"id":7,"jsonrpc":"2.0"}}', 7),
        (f'{{"method":"x","params":{{"a":"{_LONG}"}},"id":-7,"x":{{"y":["}}",{{"id":1,"z":"\\\\"}}]}}}}', -7),
        # An "id" inside a string or a nested object is not the request's.
        (f'{{"method":"x","params":{{"a":"{_LONG}\\"id\\": 5}}"}},"id":9}}', 9),
        (f'{{"method":"x","params":{{"a":"{_LONG}","id":5}}}}', None),
        (f'{{"method":"x","params":{{"a":"{_LONG}\\"}},\\"id\\":5}}"}}}}', None),
        # Ids JSON-RPC does not allow are no id.
        (f'{{"method":"x","params":{{"a":"{_LONG}"}},"id":{{}}}}', None),
        (f'{{"method":"x","params":{{"a":"{_LONG}"}},"id":[1]}}', None),
        (f'{{"method":"x","params":{{"a":"{_LONG}"}},"id":1.5}}', None),
        (f'{{"method":"x","params":{{"a":"{_LONG}"}},"id":null}}', None),
        ('{"id":{},"method":"x","params":{"a":"', None),
        ("{}", None),
        ('"id":5}', None),
    ],
)
def test_the_id_of_a_line_is_read_from_its_ends(line: str, expected: object) -> None:
    data = line.encode()
    assert line_id(data[:16384], data[-16384:]) == expected


@pytest.mark.parametrize("bad_id", ["{}", "[1]", "1.5", "true", "null", "1e400"])
def test_a_request_whose_id_is_no_id_is_answered_with_a_null_id(bad_id: str) -> None:
    answer = answer_line(f'{{"jsonrpc":"2.0","method":"tools/list","id":{bad_id}}}'.encode())
    assert isinstance(answer, str)
    assert _error(json.loads(answer), None, INVALID_REQUEST) == (
        "Invalid Request: the id of a request must be a string or an integer"
    )


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_a_request_nested_deeply_is_answered_with_its_id_wherever_it_stands(depth: int) -> None:
    deep = "[" * depth + "]" * depth
    for line, request_id in (
        (f'{{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{{"x":{deep}}}}}', 21),
        (f'{{"method":"tools/call","params":{{"x":{deep}}},"jsonrpc":"2.0","id":22}}', 22),
    ):
        answer = answer_line(line.encode())
        assert isinstance(answer, str)
        assert "nested too deeply" in _error(json.loads(answer), request_id, PARSE_ERROR)


def _script(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


REQUESTS = _script(
    INIT,
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "list_workflows", "arguments": {}},
    },
)


def _answers(stdout: bytes) -> dict[object, dict[str, Any]]:
    return {m["id"]: m for m in map(json.loads, stdout.splitlines()) if "id" in m}


def _all_answered(stdout: bytes) -> None:
    answers = _answers(stdout)
    assert answers[1]["result"]["isError"] is False
    assert [m["error"]["code"] for m in map(json.loads, stdout.splitlines()) if "error" in m] == [PARSE_ERROR]


def test_requests_from_a_file_are_all_answered_in_process(tmp_path: Path) -> None:
    """stdin a regular file (no pipe for the event loop to watch): the threaded reader serves it."""
    requests, answers = tmp_path / "requests.jsonl", tmp_path / "answers.jsonl"
    requests.write_bytes(REQUESTS + b"not json\n")
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        serve_files(tmp_path, stdin, stdout)
    _all_answered(answers.read_bytes())


@pytest.mark.slow
def test_requests_from_a_file_are_all_answered(tmp_path: Path) -> None:
    """The same, in a real `vmware-pilot mcp` process."""
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(REQUESTS + b"not json\n")
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [str(PILOT), "mcp"],
            check=False,
            stdin=stdin,
            capture_output=True,
            env=clean_env(tmp_path),
            timeout=60,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    _all_answered(done.stdout)


def test_the_server_leaves_its_pipes_in_blocking_mode_in_process(tmp_path: Path) -> None:
    """The event loop reads and writes the pipes without blocking while it serves, and puts them
    back in blocking mode when stdin ends."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    os.write(stdin_write, REQUESTS)
    os.close(stdin_write)
    with (
        os.fdopen(stdin_read, "rb", buffering=0) as stdin,
        os.fdopen(stdout_write, "wb", buffering=0) as stdout,
        os.fdopen(stdout_read, "rb") as out,
    ):
        serve_files(tmp_path, stdin, stdout)
        assert os.get_blocking(stdin_read) and os.get_blocking(stdout_write)
        stdout.close()
        answers = _answers(out.read())
        assert answers[1]["result"]["isError"] is False


@pytest.mark.slow
def test_the_server_leaves_its_pipes_in_blocking_mode(tmp_path: Path) -> None:
    """The event loop reads and writes the pipes without blocking while it serves; a process
    sharing them afterwards (a shell, the next command in a pipeline) finds them as they were."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        process = subprocess.Popen(
            [str(PILOT), "mcp"],
            stdin=stdin_read,
            stdout=stdout_write,
            stderr=subprocess.DEVNULL,
            env=clean_env(tmp_path),
        )
        os.write(stdin_write, REQUESTS)
        os.close(stdin_write)
        stdin_write = -1
        os.close(stdout_write)
        stdout_write = -1
        with os.fdopen(os.dup(stdout_read), "rb") as out:
            answers = _answers(out.read())
        assert process.wait(timeout=60) == 0
        assert answers[1]["result"]["isError"] is False
        # stdin_read is the very open file the server read from: its mode is shared with ours.
        assert os.get_blocking(stdin_read)
    finally:
        for fd in (stdin_read, stdin_write, stdout_read, stdout_write):
            if fd >= 0:
                os.close(fd)


@pytest.mark.parametrize("seed", range(20))
async def test_the_pipe_reader_splits_lines_as_a_file_does(seed: int) -> None:
    """``_PipeChannel.readline(limit)`` returns what ``BinaryIO.readline(limit)`` returns, however
    the bytes arrive in chunks."""
    rng = random.Random(seed)
    data = b"".join(
        rng.choice([b"", b"x" * rng.randrange(1, 40), b"\n", b"{}\n", b"y" * rng.randrange(40, 120) + b"\n"])
        for _ in range(60)
    )
    reader = asyncio.StreamReader()
    at = 0
    while at < len(data):
        size = rng.randrange(1, 50)
        reader.feed_data(data[at : at + size])
        at += size
    reader.feed_eof()
    channel = _PipeChannel(reader, None, ())  # type: ignore[arg-type]
    expected = io.BytesIO(data)
    limits = [rng.choice([8, 33, 64, 1000]) for _ in range(400)]
    got = [await channel.readline(limit) for limit in limits]
    assert got == [expected.readline(limit) for limit in limits]
