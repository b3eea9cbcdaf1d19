"""A real HTTP receiver on a loopback port (stdlib http.server in a thread) for notification tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]

    @property
    def event(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data


@dataclass
class Receiver:
    """Answers each POST with the next status in ``statuses`` (then 204).

    With ``hold``, every request that arrives before ``hold`` is set gets no answer at all."""

    statuses: list[int] = field(default_factory=list)
    hold: threading.Event | None = None
    received: list[Received] = field(default_factory=list)
    attempts: int = 0
    keys: list[str] = field(default_factory=list)  # the Idempotency-Key of every attempt
    arrived: threading.Condition = field(default_factory=threading.Condition)
    url: str = ""
    location: str = ""  # sent with a 3xx status as the Location to go to
    other_requests: list[str] = field(default_factory=list)  # "<method> <path>" of every non-POST

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """Block until ``count`` requests were accepted (2xx); the test fails on timeout."""
        with self.arrived:
            ok = self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
        assert ok, f"only {len(self.received)} of {count} notification(s) arrived"
        return list(self.received)

    def wait_attempts(self, count: int, timeout: float = 20.0) -> None:
        with self.arrived:
            ok = self.arrived.wait_for(lambda: self.attempts >= count, timeout)
        assert ok, f"only {self.attempts} of {count} attempt(s) arrived"


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.arrived:
                receiver.attempts += 1
                receiver.keys.append(self.headers.get("Idempotency-Key", ""))
                status = receiver.statuses.pop(0) if receiver.statuses else 204
                receiver.arrived.notify_all()
            if receiver.hold is not None and not receiver.hold.is_set():
                receiver.hold.wait(30)
                return  # never answered: the connection closes without a response
            self.send_response(status)
            if 300 <= status < 400 and receiver.location:
                self.send_header("Location", receiver.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            if 200 <= status < 300:
                with receiver.arrived:
                    receiver.received.append(Received(body, dict(self.headers.items())))
                    receiver.arrived.notify_all()

        def do_GET(self) -> None:  # what a followed redirect of a POST becomes: answered 200
            with receiver.arrived:
                receiver.other_requests.append(f"{self.command} {self.path}")
                receiver.arrived.notify_all()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_PUT = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve(receiver: Receiver) -> Iterator[Receiver]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/pilot"
    try:
        yield receiver
    finally:
        if receiver.hold is not None:
            receiver.hold.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
