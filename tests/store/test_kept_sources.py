"""The one file-or-database seam (src/vmware_pilot/kept.py): each file side and each database side
keeps texts the same way, on each backend. A stamp is there while a text is kept, changes when the
text does and stays while it does not; what is read is what was put."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmware_pilot.app import CACHE_KEY, CatalogFile, DbCatalogCache
from vmware_pilot.catalog.registry import Catalog
from vmware_pilot.kept import TextSource
from vmware_pilot.policy.source import POLICY_KEY, PolicyFile, PolicySource, policy_rows
from vmware_pilot.store.sql import SqlStore
from vmware_pilot.templates.folder import TemplateFolder
from vmware_pilot.templates.registry import TemplateRegistry

POLICY_ONE = "deny:\n  - name: one\n    match: {tool: aiops.power_off_vm}\n    reason: facility team\n"
POLICY_TWO = POLICY_ONE.replace("one", "two")


def _templates(kind: str, store: SqlStore, tmp_path: Path) -> tuple[TextSource, str]:
    if kind == "folder":
        return TemplateFolder(tmp_path / "workflows"), "ops.yaml"
    return TemplateRegistry(tmp_path / "unused", Catalog.curated(), rows=store.templates).source, "ops"


@pytest.mark.parametrize("kind", ["folder", "database"])
def test_templates_are_kept_alike_in_a_folder_and_in_the_database(
    kind: str, store: SqlStore, tmp_path: Path
) -> None:
    source, key = _templates(kind, store, tmp_path)
    assert source.in_database is (kind == "database")
    assert source.stamps() == [] and source.read(key) is None
    assert source.put(key, "name: ops\n", None, "alice")
    [(stamped, first)] = source.stamps()
    assert stamped == key and first is not None
    assert source.read(key) == "name: ops\n" and source.read_many({key}) == {key: "name: ops\n"}
    assert source.stamps() == [(key, first)]  # unchanged text, unchanged stamp
    assert source.put(key, "name: ops # v2\n", "name: ops\n", "alice")
    [(_, second)] = source.stamps()
    assert second != first
    assert source.delete(key)
    assert source.stamps() == [] and source.read(key) is None and not source.delete(key)


def test_only_the_database_refuses_a_template_written_over_a_text_its_writer_did_not_read(
    store: SqlStore, tmp_path: Path
) -> None:
    rows, key = _templates("database", store, tmp_path)
    assert rows.put(key, "v1", None, "alice")
    assert not rows.put(key, "v2", "v0", "bob") and rows.read(key) == "v1"


def test_the_policy_is_kept_alike_in_its_file_and_in_the_database(store: SqlStore, tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    file, row = PolicyFile(path), policy_rows(store.policy)
    for source in (file, row):
        assert source.stamps() == [] and source.read(POLICY_KEY) is None
    path.write_text(POLICY_ONE, encoding="utf-8")
    assert row.put(POLICY_KEY, POLICY_ONE, None, "alice")
    for source in (file, row):
        [(key, stamp)] = source.stamps()
        assert key == POLICY_KEY and stamp is not None
        assert source.read(POLICY_KEY) == POLICY_ONE
    with pytest.raises(ValueError, match="the policy is a file here"):
        file.put(POLICY_KEY, POLICY_TWO, None, "alice")
    # The policy in force is the same one, read through either side.
    in_file, in_database = PolicySource(path), PolicySource(path, rows=store.policy)
    assert [r.name for r in in_file.current().deny] == [r.name for r in in_database.current().deny] == ["one"]
    in_database.put(POLICY_TWO, "alice")
    assert [r.name for r in in_database.current().deny] == ["two"] and in_database.text() == POLICY_TWO


def test_the_catalog_cache_is_kept_alike_in_its_file_and_in_the_database(
    store: SqlStore, tmp_path: Path
) -> None:
    path = tmp_path / "catalog.json"
    file, row = CatalogFile(path), DbCatalogCache(store.catalog).texts()
    body = '{"skills": {}}'
    for source in (file, row):
        assert source.stamps() == [] and source.read(CACHE_KEY) is None
    path.write_text(body, encoding="utf-8")
    assert row.put(CACHE_KEY, body, None, "refresh")
    for source in (file, row):
        [(key, stamp)] = source.stamps()
        assert key == CACHE_KEY and stamp is not None and source.read(CACHE_KEY) == body
