"""Masking secrets before anything is persisted or logged: by key tokens, and in free text.

A key is secret when one of its lower-case tokens (camelCase and non-alphanumerics split; two
adjacent tokens also tried joined, so ``api_key`` reads as ``apikey``) names a secret, unless its
last token says the value only describes the secret (``password_count``, ``token_ttl``,
``auth_mode``). A secret reference such as ``{"$env": "VC_PASSWORD"}`` holds no secret and is kept.

Identities are names, not secrets: under a key that names a caller (``created_by``, ``approved_by``,
``actor``, …) a token caller's label ``token:<name>`` is kept as written (it would otherwise read
as a ``token: value`` pair); the rest of such a value is scrubbed like any text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

__all__ = [
    "IDENTITY_KEYS",
    "MASK",
    "SECRET_REF_KEYS",
    "has_masked_shape",
    "is_secret_key",
    "is_secret_ref",
    "key_tokens",
    "redact",
    "redact_identity",
    "redact_text",
]

MASK = "***"

# Keys of a one-entry dict that points at a secret instead of holding it.
SECRET_REF_KEYS = frozenset({"$env"})

_SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "tokens",
        "apikey",
        "apikeys",
        "auth",
        "cred",
        "credential",
        "credentials",
        "bearer",
        "authorization",
        "kubeconfig",
        "privatekey",
        "accesskey",
        "authkey",
        "sshkey",
        "signingkey",
        "encryptionkey",
        "cookie",
    }
)

# A last token that makes the value a description of the secret, not the secret itself.
_DESCRIPTIVE_LAST = frozenset(
    {
        "count",
        "type",
        "mode",
        "url",
        "uri",
        "endpoint",
        "name",
        "names",
        "id",
        "ids",
        "expiry",
        "expires",
        "expiration",
        "ttl",
        "age",
        "path",
        "file",
        "dir",
        "hint",
        "required",
        "enabled",
        "policy",
        "length",
        "len",
        "format",
        "kind",
        "version",
        "provider",
        "source",
        "method",
        "scheme",
        "at",
        "user",
        "username",
    }
)

_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def key_tokens(key: str) -> list[str]:
    """Lower-case tokens of a key: ``x-auth-token`` → x, auth, token; ``APIKey`` → api, key."""
    return [t.lower() for t in _TOKEN.findall(key)]


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """True when the value under ``key`` must be masked at rest (memoized: every save asks it of
    the same few keys)."""
    tokens = key_tokens(key)
    if not tokens:
        return False
    if len(tokens) > 1 and tokens[-1] in _DESCRIPTIVE_LAST:
        return False
    if any(_names_secret(t) for t in tokens):
        return True
    return any(_names_secret(a + b) for a, b in pairwise(tokens))


def _names_secret(word: str) -> bool:
    # Plurals name secrets too: ``passwords``, ``pwds``, ``sshKeys``.
    return word in _SECRET_WORDS or (word.endswith("s") and word[:-1] in _SECRET_WORDS)


def is_secret_ref(value: object) -> bool:
    """True for ``{"$env": "NAME"}``: a pointer resolved at dispatch time, never the secret."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return False
    ((key, name),) = value.items()
    return key in SECRET_REF_KEYS and isinstance(name, str)


# Keys whose values name callers (a label, or several joined by ", "), never hold secrets.
IDENTITY_KEYS = frozenset(
    {
        "created_by",
        "approved_by",
        "rejected_by",
        "cancelled_by",
        "requested_by",
        "requested_via",
        "approver",
        "actor",
        "authors",
        "run_by",
    }
)
# A static token caller's label: ``token:`` and a token name (transports/tokens.py's names).
_TOKEN_LABEL = re.compile(r"(?<![\w:.\-])token:[A-Za-z0-9][A-Za-z0-9._\-]{0,63}+(?![\w.\-:=@/])")


def redact_identity(text: str) -> str:
    """``text`` naming callers: every ``token:<name>`` label kept, everything else scrubbed."""
    parts: list[str] = []
    pos = 0
    for found in _TOKEN_LABEL.finditer(text):
        parts += (redact_text(text[pos : found.start()]), found[0])
        pos = found.end()
    parts.append(redact_text(text[pos:]))
    return "".join(parts)


def _identity(value: Any) -> Any:
    if isinstance(value, str):
        return redact_identity(value)
    if isinstance(value, list | tuple):
        return [redact_identity(v) if isinstance(v, str) else redact(v) for v in value]
    return redact(value)


def _mask(value: Any) -> Any:
    # Nothing to hide in an empty value, a flag or a reference; masking them would only lose data.
    if value is None or value == "" or isinstance(value, bool) or is_secret_ref(value):
        return value
    return MASK


def redact(value: Any, *, scrub_text: bool = True) -> Any:
    """A deep copy of ``value`` with every value under a secret key replaced by ``***`` and every
    string passed through ``redact_text``: a ``user:pass@`` URL, a ``Bearer`` credential or a
    ``password=…`` pair is masked under any key, in params, goals and descriptions alike.

    ``scrub_text=False`` masks by key only (for a caller that must keep texts exactly).
    """
    if isinstance(value, Mapping):
        return {
            k: _mask(v)
            if is_secret_key(str(k))
            else _identity(v)
            if scrub_text and k in IDENTITY_KEYS
            else redact(v, scrub_text=scrub_text)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, scrub_text=scrub_text) for v in value]
    if scrub_text and isinstance(value, str):
        return redact_text(value)
    return value


def has_masked_shape(text: str) -> bool:
    """True when a secret shape in ``text`` holds the mask (``password=***``): a stored text whose
    secret was lost, which must not be sent anywhere as if it were the value."""
    if MASK not in text:
        return False
    probe = text.replace(MASK, _PROBE)
    return redact_text(probe) != probe


# Stands in for the mask where a credential may stand: long and base64-like, as a Bearer one is.
_PROBE = "Xmasked0secret0Xmasked"


# Every pattern below is linear on any input: each unbounded repeat is possessive (``*+``, ``++``)
# and a repeat that could start inside a run of its own characters is pinned to the run's start
# by a look-behind, so a scan never re-reads a run from each of its positions.

# A free-standing credential after an HTTP auth scheme (the Basic one must look like base64:
# some digit, ``+``, ``/`` or ``=`` after its leading letters).
_AUTH_SCHEME = re.compile(r"\b((?i:bearer)|Basic(?=\s++[A-Za-z]*+[0-9+/=]))(\s++)[A-Za-z0-9\-._~+/=]{8,}+")
# ``scheme://user:password@`` (the user may be empty: ``redis://:password@host``); digits, ``+``, ``.`` and ``-`` before the scheme's first letter are
# kept (``9http://`` still names ``http``).
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?P<lead>[0-9+.\-]*+)"
    r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*+://[^\s/:@]*+:)(?P<secret>[^\s/@]++)@"
)
# A key and its separator. The key is a whole run of key characters, less any leading digits,
# dots or dashes (``9password=`` names ``password``); a quoted key is closed by the same quote.
_KEY = re.compile(
    r"""(?P<q>["']?)(?<![\w.\-])(?:[^\W_A-Za-z]|[.\-])*+(?P<key>[A-Za-z_][\w.\-]*+)(?P=q)"""
    r"""\s*+[:=]\s*+""",
)
# The value after a secret key: an optional auth scheme, then a quoted string, a one-line list
# (``creds: [user, pw]``) or a bare word.
_VALUE = re.compile(
    r"""(?P<scheme>(?i:Bearer|Basic|Token)\s++)?"""
    r"""(?P<val>"(?:[^"\\]++|\\.)*+"|'(?:[^'\\]++|\\.)*+'|\[[^\[\]\n]*+\]|[^\s,;&'"{}\[\]()<>]++)""",
)


def _mask_key_values(text: str) -> str:
    # Scan by hand: a harmless key must not swallow a secret pair inside its value
    # ("failed: password=x"), so the value is read only after a secret key, and the scan moves
    # past a value only when it masked it. Each character is read a bounded number of times.
    parts: list[str] = []
    pos = 0
    while (match := _KEY.search(text, pos)) is not None:
        value = _VALUE.match(text, match.end()) if is_secret_key(match["key"]) else None
        if value is None:
            parts.append(text[pos : match.end("key")])
            pos = match.end("key")
            continue
        val = value["val"]
        quote = val[0] if val[0] in "\"'" else ""
        parts.append(text[pos : value.start("val")])
        parts.append(f"{quote}{MASK}{quote}")
        pos = value.end("val")
    parts.append(text[pos:])
    return "".join(parts)


def redact_text(text: str) -> str:
    """``text`` with secrets in ``key=value``, ``"key": "value"``, ``Bearer x`` and URL shapes masked.

    Linear in the length of ``text`` (it runs on whatever a caller or a skill sends).
    """
    if not text:
        return text
    out = _AUTH_SCHEME.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    out = _URL_USERINFO.sub(lambda m: f"{m['lead']}{m['head']}{MASK}@", out)
    return _mask_key_values(out)
