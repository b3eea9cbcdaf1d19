"""Custom template rows and the catalog cache row (store/texts.py) on each backend: a template is
written only over the text its writer read, so two replicas saving one name cannot both win."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.errors import InvalidInput
from vmware_pilot.store.sql import SqlStore
from vmware_pilot.templates.custom import digest_of
from vmware_pilot.templates.registry import TemplateRegistry
from vmware_pilot.templates.steps import steps_from_dicts

GATE = {"action": "require_approval", "skill": "pilot", "tool": "approve", "params": {"message": "Go?"}}


def test_a_template_is_written_only_over_the_text_its_writer_read(store: SqlStore) -> None:
    assert store.templates.put_template("ops", "v1", None, "alice")
    assert not store.templates.put_template("ops", "other v1", None, "bob")  # it exists now
    assert store.templates.put_template("ops", "v2", "v1", "alice")
    assert not store.templates.put_template("ops", "v3", "v1", "bob")  # read before alice's v2
    assert store.templates.template_rows() == [("ops", "v2")]
    assert (
        store.templates.template_rows("ops") == [("ops", "v2")]
        and store.templates.template_rows("none") == []
    )
    assert not store.templates.delete_template("ops", "v1")
    assert store.templates.delete_template("ops", "v2")
    assert store.templates.template_rows() == []


def test_the_digests_of_the_templates_are_the_sha256_of_their_text(store: SqlStore) -> None:
    texts = {"ops": "name: ops # é, ✓, 𝄞\n", "web": "v1", "empty": ""}
    for name, body in texts.items():
        assert store.templates.put_template(name, body, None, "alice")
    assert store.templates.template_digests() == [(n, digest_of(texts[n])) for n in sorted(texts)]
    assert digest_of("v1") == hashlib.sha256(b"v1").hexdigest()
    assert store.templates.put_template("web", "v2", "v1", "alice")
    assert dict(store.templates.template_digests())["web"] == digest_of("v2")


def test_of_many_first_saves_of_one_name_at_once_exactly_one_wins(store: SqlStore) -> None:
    results: dict[int, bool] = {}
    start = threading.Barrier(6)

    def save(n: int) -> None:
        start.wait()
        results[n] = store.templates.put_template("ops", f"v{n}", None, f"writer{n}")

    threads = [threading.Thread(target=save, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [n for n, won in results.items() if won]
    assert len(results) == 6 and len(winners) == 1
    assert store.templates.template_rows() == [("ops", f"v{winners[0]}")]


def test_a_registry_refuses_a_save_when_the_row_changed_after_it_was_read(
    store: SqlStore, tmp_path: Path
) -> None:
    class Racing:
        """The store, with another replica's save landing between the read and the write."""

        def template_rows(self, name: str | None = None) -> list[tuple[str, str]]:
            return store.templates.template_rows(name)

        def template_digests(self) -> list[tuple[str, str]]:
            return store.templates.template_digests()

        def put_template(self, name: str, body: str, previous: str | None, by: str) -> bool:
            store.templates.put_template(name, body.replace("alice", "carol"), previous, "carol")
            return store.templates.put_template(name, body, previous, by)

        def delete_template(self, name: str, previous: str | None = None) -> bool:
            return store.templates.delete_template(name, previous)

    registry = TemplateRegistry(tmp_path / "unused", Catalog.curated(), rows=Racing())
    with pytest.raises(InvalidInput) as caught:
        registry.save_as_template("ops", "d", steps_from_dicts([GATE]), ["alice"], caller="alice")
    assert "changed by someone else" in caught.value.message and caught.value.hint
    assert "carol" in store.templates.template_rows("ops")[0][1]
    assert not (tmp_path / "unused").exists()


def test_a_failed_workflow_save_takes_the_template_row_back(store: SqlStore, tmp_path: Path) -> None:
    registry = TemplateRegistry(tmp_path, Catalog.curated(), rows=store.templates)
    registry.save_as_template("ops", "v1", steps_from_dicts([GATE]), ["alice"], caller="alice")
    before = store.templates.template_rows("ops")
    with pytest.raises(RuntimeError), registry.saving("ops", "v2", steps_from_dicts([GATE]), [], "alice"):
        raise RuntimeError("the workflow could not be stored")
    assert store.templates.template_rows("ops") == before
    with pytest.raises(RuntimeError), registry.saving("new", "n", steps_from_dicts([GATE]), [], "alice"):
        raise RuntimeError("the workflow could not be stored")
    assert store.templates.template_rows("new") == []


def test_the_catalog_cache_row_is_replaced_and_its_stamp_changes(store: SqlStore) -> None:
    assert store.catalog.catalog_cache() is None and store.catalog.catalog_stamp() is None
    store.catalog.put_catalog_cache('{"refreshed_at": "a"}')
    first = store.catalog.catalog_stamp()
    store.catalog.put_catalog_cache('{"refreshed_at": "b"}')
    row = store.catalog.catalog_cache()
    assert row is not None and row[0] == '{"refreshed_at": "b"}'
    assert first is not None and row[1] != first
