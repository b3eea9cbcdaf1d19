"""Holding SQLite's write lock on a Pilot's database while a request waits for it (see
test_store_lock.py): the lock, a request written in full on its own connection, the check."""

from __future__ import annotations

import select
import socket
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.transports.server_proc import PilotProcess

__all__ = ["Answer", "Sent", "while_locked", "write_lock"]


@contextmanager
def write_lock(db: Path) -> Iterator[None]:
    """SQLite's write lock on the database ``db``, held by another connection."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class Sent:
    """One HTTP request written in full on a connection of its own; its answer is read later."""

    def __init__(
        self, server: PilotProcess, path: str, body: bytes, headers: dict[str, str], method: str = "POST"
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=120)
        fields = {
            "host": f"127.0.0.1:{server.port}",
            "connection": "close",
            "content-length": str(len(body)),
            **headers,
        }
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
        self.data = b""
        self.sock.sendall(head.encode() + body)

    def _drain(self, wait: bool) -> None:
        """Read what has arrived; with ``wait``, everything until the server closes."""
        while wait or select.select([self.sock], [], [], 0)[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                return
            self.data += chunk

    def answered(self) -> bool:
        """Whether the answer has come, looked at without waiting: for a tool call, the JSON-RPC
        response in its event stream (whose headers come at once); for a form, anything at all."""
        self._drain(wait=False)
        if b"text/event-stream" in self.data.partition(b"\r\n\r\n")[0]:
            return b'"result"' in self.data or b'"error"' in self.data
        return bool(self.data)

    def answer(self) -> Answer:
        """The whole answer (the server closes the connection after it: ``connection: close``)."""
        with self.sock:
            self._drain(wait=True)
        head, _, body = self.data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for name, _, value in (line.partition(":") for line in lines[1:]):
            key = name.strip().lower()
            headers[key] = f"{headers[key]}\n{value.strip()}" if key in headers else value.strip()
        if headers.get("transfer-encoding") == "chunked":
            body = _unchunked(body)
        return Answer(int(lines[0].split()[1]), headers, body)


def _unchunked(data: bytes) -> bytes:
    out = b""
    while data:
        size, _, rest = data.partition(b"\r\n")
        length = int(size.split(b";")[0], 16)
        if length == 0:
            break
        out += rest[:length]
        data = rest[length + 2 :]
    return out


def while_locked(
    server: PilotProcess, db: Path, send: Callable[[], Sent], *, waits: bool = True, reads: int = 20
) -> Answer:
    """Send a write to ``server`` while its database ``db`` is locked, check that ``reads``
    unrelated reads in turn are answered meanwhile (and, when ``waits``, that the write itself is
    still waiting), release the lock, and return the write's answer. A write that first talks to
    another server (an identity provider) needs more reads to be sure it has reached the lock."""
    with write_lock(db), httpx.Client(base_url=server.base, timeout=120) as http:
        pending = send()
        for _ in range(reads):
            assert http.get("/healthz").status_code == 200
            if waits:
                assert not pending.answered(), (
                    "the write was answered while the database was locked: it ran on the event loop and gave up"
                )
    return pending.answer()
