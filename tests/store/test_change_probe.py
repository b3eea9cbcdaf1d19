"""The store's cheap reads behind subscriptions and completions: versions and id prefixes."""

from __future__ import annotations

from tests.support.store_helpers import sample_workflow
from vmware_pilot.store.sql import SqlStore


def test_versions_move_with_every_save_and_skip_unknown_ids(store: SqlStore) -> None:
    wf = sample_workflow()
    store.workflows.create(wf)
    before = store.workflows.versions([wf.id, "wf-missing"])
    assert list(before) == [wf.id]
    wf = store.workflows.load(wf.id)
    wf.log("note", "something happened", "alice")
    store.workflows.save(wf)
    assert store.workflows.versions([wf.id])[wf.id] > before[wf.id]
    assert store.workflows.versions([]) == {}


def test_workflow_ids_match_a_literal_prefix_newest_first(store: SqlStore) -> None:
    created = []
    for _ in range(3):
        wf = sample_workflow()
        store.workflows.create(wf)
        created.append(wf.id)
    assert store.workflows.workflow_ids("wf-") == list(reversed(created))
    assert store.workflows.workflow_ids(created[0]) == [created[0]]
    assert store.workflows.workflow_ids("wf-", limit=2) == list(reversed(created))[:2]
    # LIKE wildcards in what was typed are taken literally.
    assert store.workflows.workflow_ids("wf%") == [] and store.workflows.workflow_ids("w_-") == []
