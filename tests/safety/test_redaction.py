from __future__ import annotations

import pytest

from vmware_pilot.safety.redaction import (
    MASK,
    has_masked_shape,
    is_secret_key,
    is_secret_ref,
    key_tokens,
    redact,
    redact_identity,
    redact_text,
)

MASKED_KEYS = [
    "db_password",
    "apiToken",
    "privateKey",
    "x-auth-token",
    "vc_secret",
    "password",
    "token",
    "passwd",
    "pwd",
    "api_key",
    "APIKey",
    "apikey",
    "access_key",
    "ssh_key",
    "clientSecret",
    "Authorization",
    "bearer",
    "kubeconfig",
    "credentials",
    "OAuthToken",
    "password2",
    "X-Api-Key",
    "passwords",
    "db_passwords",
    "pwds",
    "sshKeys",
    "creds",
    "cred",
    "db_creds",
]

KEPT_KEYS = [
    "password_count",
    "token_ttl",
    "auth_mode",
    "passwordCount",
    "secret_name",
    "api_key_id",
    "kubeconfig_path",
    "token_url",
    "author",
    "authors",
    "key",
    "monkey",
    "tokenizer",
    "vm_name",
    "passthrough",
    "",
]


@pytest.mark.parametrize("key", MASKED_KEYS)
def test_secret_keys_are_recognised_by_token(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: "s3cr3t-value"}) == {key: MASK}


@pytest.mark.parametrize("key", KEPT_KEYS)
def test_descriptive_and_unrelated_keys_are_kept(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: "visible-value"}) == {key: "visible-value"}


def test_key_tokens_split_camel_case_acronyms_and_separators() -> None:
    assert key_tokens("x-auth-token") == ["x", "auth", "token"]
    assert key_tokens("APIKey") == ["api", "key"]
    assert key_tokens("dbPassword_2") == ["db", "password", "2"]


def test_redact_walks_nested_dicts_and_lists_and_masks_whole_structured_values() -> None:
    original = {
        "vm": "web-01",
        "connection": {"host": "vc", "password": "hunter2", "nested": [{"apiToken": "abc"}]},
        "credentials": {"user": "root", "pass": "x"},
        "count": 3,
    }
    out = redact(original)
    assert out == {
        "vm": "web-01",
        "connection": {"host": "vc", "password": MASK, "nested": [{"apiToken": MASK}]},
        "credentials": MASK,
        "count": 3,
    }
    # A deep copy: the live object keeps its secrets for dispatch.
    assert original["connection"]["password"] == "hunter2"  # type: ignore[index]


def test_secret_reference_empty_value_and_flags_are_kept() -> None:
    value = {"password": {"$env": "VC_PASSWORD"}, "token": "", "secret": None, "auth": True}
    assert redact(value) == value
    assert is_secret_ref({"$env": "X"})
    assert not is_secret_ref({"$env": "X", "other": 1})
    assert not is_secret_ref({"$env": 3})


def test_redact_scrub_text_also_masks_secrets_inside_strings() -> None:
    value = {"error": "login failed for password=hunter2", "items": ["token: abc123"]}
    assert redact(value, scrub_text=False) == value
    assert redact(value) == {
        "error": f"login failed for password={MASK}",
        "items": [f"token: {MASK}"],
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2 user=bob", f"password={MASK} user=bob"),
        ('{"db_password": "s3cr3t", "name": "x"}', f'{{"db_password": "{MASK}", "name": "x"}}'),
        ("{'apiToken': 'abc123', 'n': 1}", f"{{'apiToken': '{MASK}', 'n': 1}}"),
        ("Authorization: Bearer eyJhbGciOi.xyz", f"Authorization: Bearer {MASK}"),
        ("sent Bearer abcdef123456 to vc", f"sent Bearer {MASK} to vc"),
        ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {MASK}"),
        ('curl -H "x-auth-token: abcd1234" https://a', f'curl -H "x-auth-token: {MASK}" https://a'),
        ("GET https://admin:pa55@vc.local/sdk failed", f"GET https://admin:{MASK}@vc.local/sdk failed"),
        ("?token_ttl=3600&token=abc&x=1", f"?token_ttl=3600&token={MASK}&x=1"),
        ("login failed: password=vc-pass-9", f"login failed: password={MASK}"),
        ("note=password:abc", f"note=password:{MASK}"),
        ("creds: [admin, pw-1]", f"creds: {MASK}"),
        ("--creds=[admin,pw-1] -v", f"--creds={MASK} -v"),
        ("redis://:pw-2@cache.local:6379/0", f"redis://:{MASK}@cache.local:6379/0"),
        ("cache at rediss://:pw-3@c.local/1 down", f"cache at rediss://:{MASK}@c.local/1 down"),
    ],
)
def test_redact_text_masks_secret_shapes(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Step 3: create_vm → success",
        "Basic configuration failed",
        "the bearer of news",
        "password_count=3 auth_mode=sso token_ttl=60",
        "tags: [web, db] credit: [1, 2]",
        "redis://cache.local:6379/0",
        "Approved by alice",
        f"password={MASK}",
        "",
    ],
)
def test_redact_text_keeps_ordinary_text(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (f"mysql --password={MASK} -e 'select 1'", True),
        (f"curl -H 'Authorization: Bearer {MASK}' https://a", True),
        (f"https://admin:{MASK}@vc.local/sdk", True),
        (f"the value {MASK} is shown as is", False),
        ("password=hunter2", False),
        ("", False),
    ],
)
def test_a_masked_secret_shape_is_recognised_in_text(text: str, masked: bool) -> None:
    assert has_masked_shape(text) is masked


def test_identities_are_names_not_secrets() -> None:
    # A token caller's label under a key naming callers stays as written; elsewhere `token:x` is
    # still a secret shape, and a secret shape under an identity key is still masked.
    value = {
        "approved_by": "token:alice, token:bob",
        "created_by": "token:alice",
        "authors": ["token:carol", "dave"],
        "actor": "Alice Example (oidc:a1)",
        "approver": "password=hunter2",
        "rejected_by": "token:ghp_abc:rest",
        "detail": "token:alice",
        "params": {"password": "hunter2", "note": "Bearer abcdefgh12345"},
    }
    assert redact(value) == {
        **value,
        "approver": f"password={MASK}",
        "rejected_by": f"token:{MASK}",
        "detail": f"token:{MASK}",
        "params": {"password": MASK, "note": f"Bearer {MASK}"},
    }
    assert redact_identity("token:alice sent Bearer abcdefghijkl") == f"token:alice sent Bearer {MASK}"
