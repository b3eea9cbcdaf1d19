"""A real OpenID Provider for tests: the npm package oidc-provider (tests/oidc/provider.mjs) on loopback.

The test makes the provider's RSA signing keys (so it can also sign tokens the provider would
never issue, for the refusal cases) and its clients: each client stands for a person, with a
name and groups that its JWT access tokens carry. ``restart`` brings the provider back on the
same port (the same issuer) with another key set, which is how a key rotation looks from outside.
The process is stopped by pid.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

__all__ = ["OIDC_DIR", "Person", "Provider", "SigningKey", "free_port", "new_key"]

OIDC_DIR = Path(__file__).resolve().parents[1] / "oidc"
_SETUP = Path(__file__).resolve().parents[2] / "scripts" / "oidc-setup.sh"


@dataclass(frozen=True)
class Person:
    id: str
    secret: str
    name: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey

    def jwk(self) -> dict[str, Any]:
        data: dict[str, Any] = RSAAlgorithm.to_jwk(self.private, as_dict=True)
        return {**data, "kid": self.kid, "alg": "RS256", "use": "sig"}


def new_key(kid: str) -> SigningKey:
    return SigningKey(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Provider:
    folder: Path
    people: list[Person]
    keys: list[SigningKey]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    console_redirect: str = ""  # registers the console client "pilot-console" (provider.mjs)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        # Installs from the lock file when node_modules is missing or older than it; else a no-op.
        subprocess.run(["bash", str(_SETUP)], check=True, capture_output=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        jwks, clients = self.folder / "jwks.json", self.folder / "clients.json"
        jwks.write_text(json.dumps({"keys": [k.jwk() for k in self.keys]}))
        clients.write_text(json.dumps([{**p.__dict__, "groups": list(p.groups)} for p in self.people]))
        log = self.folder / f"provider-{time.monotonic_ns()}.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                ["node", str(OIDC_DIR / "provider.mjs"), str(self.port), str(jwks), str(clients)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=OIDC_DIR,
                env={**os.environ, "CONSOLE_REDIRECT": self.console_redirect}
                if self.console_redirect
                else None,
            )
        deadline = time.monotonic() + timeout
        while f"ready {self.issuer}" not in log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"oidc-provider did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.process = None

    def restart(self, keys: list[SigningKey]) -> None:
        self.stop()
        self.keys = keys
        self.start()

    def person(self, pid: str) -> Person:
        return next(p for p in self.people if p.id == pid)

    def token(self, pid: str, resource: str, scope: str = "") -> str:
        """An access token the provider issues to ``pid`` (client_credentials) for ``resource``."""
        person = self.person(pid)
        data = {"grant_type": "client_credentials", "resource": resource}
        if scope:
            data["scope"] = scope
        response = httpx.post(f"{self.issuer}/token", data=data, auth=(person.id, person.secret), timeout=30)
        response.raise_for_status()
        token: str = response.json()["access_token"]
        return token

    def sign(self, claims: dict[str, Any], key: SigningKey | None = None, kid: str | None = None) -> str:
        """A token signed here: by default with the provider's current signing key and its kid."""
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": self.issuer, "iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, key.private, algorithm="RS256", headers={"kid": kid or key.kid})
