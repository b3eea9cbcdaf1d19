"""Holding SQLite's write lock on a Pilot's database while a request waits for it (see
test_store_lock.py): the lock, a request written in full on its own connection, the check, and a
real HTTP server run on a thread of the test's process, so the test sees when its store asks for
the lock (``write_begins``) instead of guessing."""

from __future__ import annotations

import select
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import uvicorn
from sqlalchemy import event

from vmware_pilot.app import PilotApp, build_app
from vmware_pilot.cli.network import role_book, token_store
from vmware_pilot.config import Settings
from vmware_pilot.transports.http import HttpOptions, build_http_app, public_base
from vmware_pilot.transports.jwks import IssuerKeys
from vmware_pilot.transports.oauth import JwtVerifier, OAuthConfig

__all__ = ["Answer", "InProcess", "Sent", "serving", "while_locked", "write_begins", "write_lock"]


class Server(Protocol):
    """A listening Pilot."""

    @property
    def port(self) -> int: ...

    @property
    def base(self) -> str: ...


@dataclass
class InProcess:
    app: PilotApp
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"


@contextmanager
def serving(settings: Settings) -> Iterator[InProcess]:
    """``vmware-pilot mcp --transport http``'s app for ``settings``, served by uvicorn on a socket
    of its own from a thread of this process (stopped when the block ends)."""
    app = build_app(settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = int(sock.getsockname()[1])
    options = HttpOptions("http").validated()
    # With an issuer, OAuth access tokens and the console's OIDC sign-in too (keys fetched when used).
    oauth = OAuthConfig.from_settings(settings, f"{public_base(options, port, settings.public_url)}/mcp")
    jwt = JwtVerifier(oauth, IssuerKeys(oauth.issuer)) if oauth is not None else None
    asgi = build_http_app(app, options, port, token_store(settings, app.store), role_book(settings), jwt)
    config = uvicorn.Config(asgi, ws="none", lifespan="on", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "the server stopped while starting"
            time.sleep(0.01)
        yield InProcess(app, port)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
        app.close()


@contextmanager
def write_begins(app: PilotApp) -> Iterator[threading.Event]:
    """Set once ``app``'s store starts a write transaction (asks for the write lock)."""
    asking = threading.Event()

    def before(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.strip().upper() == "BEGIN IMMEDIATE":
            asking.set()

    event.listen(app.store.database.engine, "before_cursor_execute", before)
    try:
        yield asking
    finally:
        event.remove(app.store.database.engine, "before_cursor_execute", before)


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
        self, server: Server, path: str, body: bytes, headers: dict[str, str], method: str = "POST"
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
    server: Server, db: Path, send: Callable[[], Sent], asking: threading.Event, *, waits: bool = True
) -> Answer:
    """Send a write to ``server`` while its database ``db`` is locked; once it asks for the lock
    (``asking``, from ``write_begins``), check that unrelated reads are answered (and, when
    ``waits``, that the write itself is still waiting); release the lock and return the write's
    answer."""
    with write_lock(db), httpx.Client(base_url=server.base, timeout=120) as http:
        pending = send()
        # A guard against a hang only: the write asks for the lock promptly.
        assert asking.wait(60), "the write never asked for the database's write lock"
        for _ in range(3):
            assert http.get("/healthz").status_code == 200
            if waits:
                assert not pending.answered(), (
                    "the write was answered while the database was locked: it ran on the event loop and gave up"
                )
    return pending.answer()
