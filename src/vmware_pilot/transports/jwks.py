"""The signing keys of an OAuth issuer: its OpenID discovery document, then its JWKS, cached.

The keys are fetched on first use and kept. A token naming a key id the cache does not hold makes
the cache fetch the JWKS again (that is how a key rotation is picked up), but at most once per
``min_refresh`` seconds, so a stream of tokens with made-up key ids cannot turn Pilot into a
flood against the identity provider. Keys older than ``max_age`` are fetched again on the next
lookup; when that fails the old keys keep working and the failure is logged.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt

from vmware_pilot.errors import PilotError

__all__ = ["IssuerKeys", "IssuerUnreachable", "discovery_url"]

_log = logging.getLogger("vmware_pilot.oauth")

_MAX_DOCUMENT = 1 << 20  # a discovery document or key set larger than this is not one
_TIMEOUT = 10.0


class IssuerUnreachable(PilotError):
    """The issuer's discovery document or key set cannot be fetched or is not usable."""


def discovery_url(issuer: str) -> str:
    """OpenID Connect Discovery: ``<issuer>/.well-known/openid-configuration``."""
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


def _secure_enough(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme == "https":
        return True
    host = parts.hostname or ""
    try:
        return parts.scheme == "http" and (host == "localhost" or ipaddress.ip_address(host).is_loopback)
    except ValueError:
        return False


class IssuerKeys:
    """The verification keys of ``issuer``, by key id."""

    def __init__(
        self,
        issuer: str,
        *,
        min_refresh: float = 30.0,
        max_age: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self.min_refresh = min_refresh
        self.max_age = max_age
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._unnamed: list[jwt.PyJWK] = []
        self._fetched_at: float | None = None
        self._tried_at: float | None = None
        self._jwks_uri = ""
        self.metadata: dict[str, Any] = {}  # the issuer's discovery document, once fetched
        self._lock = asyncio.Lock()
        self.fetches = 0  # how many times the key set was fetched

    async def load(self) -> None:
        """Fetch the discovery document and the key set now; raises ``IssuerUnreachable``."""
        async with self._lock:
            await self._fetch()

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key with id ``kid`` (None: the only key, if the set has exactly one), or None."""
        found = self._lookup(kid)
        # A known key while its set is merely old: no request waits for a refresh under way.
        if found is not None and (not self._stale() or self._lock.locked()):
            return found
        async with self._lock:
            found = self._lookup(kid)
            if (found is None or self._stale()) and self._may_fetch():
                try:
                    await self._fetch()
                except IssuerUnreachable as exc:
                    _log.warning("OAuth keys not refreshed (%s); %s", exc.message, exc.hint)
                found = self._lookup(kid)
        return found

    @property
    def held(self) -> bool:
        """Whether any signing key has been fetched (the readiness check asks)."""
        return bool(self._keys or self._unnamed)

    def key_ids(self) -> list[str]:
        """The ids of the keys held now, sorted."""
        return sorted(self._keys)

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            everything = [*self._keys.values(), *self._unnamed]
            return everything[0] if len(everything) == 1 else None
        return self._keys.get(kid)

    def _stale(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= self.max_age

    def _may_fetch(self) -> bool:
        return self._tried_at is None or self._clock() - self._tried_at >= self.min_refresh

    async def _fetch(self) -> None:
        self._tried_at = self._clock()
        async with httpx.AsyncClient(timeout=_TIMEOUT, follow_redirects=False) as client:
            if not self._jwks_uri:
                metadata = await self._get_json(client, discovery_url(self.issuer))
                self._jwks_uri = self._jwks_uri_from(metadata)
                self.metadata = metadata
            document = await self._get_json(client, self._jwks_uri)
        keys, unnamed = self._parse(document)
        self._keys, self._unnamed = keys, unnamed
        self._fetched_at = self._clock()
        self.fetches += 1
        _log.info("OAuth signing keys of %s: %s", self.issuer, ", ".join(keys) or "(no key ids)")

    def _jwks_uri_from(self, document: dict[str, Any]) -> str:
        if document.get("issuer") != self.issuer:
            raise IssuerUnreachable(
                f"the discovery document of {self.issuer} names issuer {document.get('issuer')!r}",
                hint="Set VMWARE_PILOT_OAUTH_ISSUER to exactly the issuer the document names "
                "(a trailing slash counts).",
            )
        uri = document.get("jwks_uri")
        if not isinstance(uri, str) or not _secure_enough(uri):
            raise IssuerUnreachable(
                f"the discovery document of {self.issuer} has no https jwks_uri (got {uri!r})",
                hint="Check the identity provider's configuration.",
            )
        return uri

    async def _get_json(self, client: httpx.AsyncClient, url: str) -> dict[str, Any]:
        try:
            async with client.stream("GET", url, headers={"accept": "application/json"}) as response:
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_DOCUMENT:
                        raise IssuerUnreachable(f"{url} answered more than 1 MiB", hint="Check the URL.")
                status = response.status_code
        except httpx.HTTPError as exc:
            raise IssuerUnreachable(
                f"cannot fetch {url} ({type(exc).__name__}: {exc})",
                hint="Check VMWARE_PILOT_OAUTH_ISSUER and that this host reaches the identity provider "
                "(a private CA goes in SSL_CERT_FILE).",
            ) from None
        if status != 200:
            raise IssuerUnreachable(f"{url} answered HTTP {status}", hint="Check VMWARE_PILOT_OAUTH_ISSUER.")
        try:
            document = json.loads(body)
        except ValueError:  # also undecodable bytes
            document = None
        if not isinstance(document, dict):
            raise IssuerUnreachable(f"{url} did not answer a JSON object", hint="Check the URL.")
        return document

    def _parse(self, document: dict[str, Any]) -> tuple[dict[str, jwt.PyJWK], list[jwt.PyJWK]]:
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise IssuerUnreachable(f"{self._jwks_uri} is not a JWK set", hint="Check the provider.")
        keys: dict[str, jwt.PyJWK] = {}
        unnamed: list[jwt.PyJWK] = []
        for entry in entries:
            # Only public keys for signatures: a shared secret in a published set would let anyone sign.
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
                continue
            try:
                key = jwt.PyJWK(entry)
            except jwt.PyJWTError as exc:  # e.g. an algorithm this build cannot verify: skip that key
                _log.info("skipped a key of %s: %s", self.issuer, exc)
                continue
            if key.key_id:
                keys[key.key_id] = key
            else:
                unnamed.append(key)
        if not keys and not unnamed:
            raise IssuerUnreachable(
                f"{self._jwks_uri} holds no usable signing key", hint="Check the provider."
            )
        return keys, unnamed
