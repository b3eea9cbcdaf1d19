"""The token file: hashes only, private, atomic, re-read on change, fail closed when unsafe."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from vmware_pilot.errors import InvalidInput
from vmware_pilot.transports.tokens import SECRET_PREFIX, TokenStore, TokenStoreError, hash_secret


@pytest.fixture
def store(pilot_home: Path) -> TokenStore:
    return TokenStore(pilot_home / "tokens.json")


def test_create_returns_a_secret_that_verifies_and_is_never_written(store: TokenStore) -> None:
    secret = store.create("alice", "admin")
    assert secret.startswith(SECRET_PREFIX) and len(secret) > 40
    text = store.path.read_text()
    assert secret not in text and secret[len(SECRET_PREFIX) :] not in text
    assert hash_secret(secret) in text
    entry = store.verify(secret)
    assert entry is not None and (entry.name, entry.role) == ("alice", "admin")


def test_the_file_is_private_and_no_temporary_file_is_left(store: TokenStore) -> None:
    store.create("alice", "admin")
    store.create("bob", "reader")
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert not store.path.with_name("tokens.json.tmp").exists()
    assert [e["name"] for e in json.loads(store.path.read_text())["tokens"]] == ["alice", "bob"]


def test_wrong_empty_or_oversized_secrets_are_refused(store: TokenStore) -> None:
    secret = store.create("alice", "admin")
    assert store.verify(secret + "x") is None
    assert store.verify(secret[:-1]) is None
    assert store.verify("") is None
    assert store.verify("x" * 10_000) is None


def test_two_tokens_never_get_the_same_secret(store: TokenStore) -> None:
    assert store.create("alice", "admin") != store.create("bob", "admin")


def test_a_change_by_another_process_is_seen_on_the_next_verify(pilot_home: Path) -> None:
    server_side = TokenStore(pilot_home / "tokens.json")
    cli_side = TokenStore(pilot_home / "tokens.json")
    secret = cli_side.create("alice", "reader")
    assert server_side.verify(secret) is not None
    cli_side.set_role("alice", "admin")
    entry = server_side.verify(secret)
    assert entry is not None and entry.role == "admin"
    cli_side.revoke("alice")
    assert server_side.verify(secret) is None


def test_duplicate_and_invalid_names_are_refused_with_a_hint(store: TokenStore) -> None:
    store.create("alice", "admin")
    with pytest.raises(InvalidInput, match="already exists") as dup:
        store.create("alice", "reader")
    assert "revoke" in dup.value.hint
    with pytest.raises(InvalidInput, match="not valid"):
        store.create("token:alice", "admin")


def test_revoking_or_changing_an_unknown_token_is_refused(store: TokenStore) -> None:
    with pytest.raises(InvalidInput, match="no token named 'ghost'"):
        store.revoke("ghost")
    with pytest.raises(InvalidInput, match="no token named 'ghost'"):
        store.set_role("ghost", "admin")


def test_a_file_others_can_read_refuses_every_token(store: TokenStore) -> None:
    secret = store.create("alice", "admin")
    store.path.chmod(0o644)
    assert store.verify(secret) is None
    with pytest.raises(TokenStoreError, match="accessible to other users") as exc:
        store.entries()
    assert "chmod 600" in exc.value.hint
    store.path.chmod(0o600)
    assert store.verify(secret) is not None


def test_a_folder_others_can_write_refuses_every_token(store: TokenStore) -> None:
    secret = store.create("alice", "admin")
    store.path.parent.chmod(0o777)
    try:
        assert store.verify(secret) is None
        with pytest.raises(TokenStoreError, match="can be written by other users"):
            store.entries()
    finally:
        store.path.parent.chmod(0o700)


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        '{"format": 2, "tokens": []}',
        '{"format": 1, "tokens": [{"name": "a b", "role": "admin", "hash": "sha256:00"}]}',
        '{"format": 1, "tokens": [{"name": "alice", "role": "admin", "hash": "plain-secret"}]}',
    ],
)
def test_a_malformed_file_refuses_every_token_and_says_so(store: TokenStore, content: str) -> None:
    store.path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(store.path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, content.encode())
    os.close(fd)
    with pytest.raises(TokenStoreError) as exc:
        store.entries()
    assert exc.value.hint
    assert store.verify("anything") is None


def test_no_file_means_no_tokens(store: TokenStore) -> None:
    assert store.entries() == []
    assert store.verify("vpt_whatever") is None
