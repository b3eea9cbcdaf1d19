"""Template files are hostile input: bounded loading, listed errors, no links out, no overwrites."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from tests.support.mcp_client import GATE, READ_STEP, Client, connect
from vmware_pilot.app import PilotApp
from vmware_pilot.domain.actor import Actor

ALIAS_BOMB = (
    "name: bomb\nsteps:\n  - skill: monitor\n    tool: get_alarms\n    params:\n"
    '      a: &a ["xxxxxxxxxx","xxxxxxxxxx","xxxxxxxxxx","xxxxxxxxxx","xxxxxxxxxx","xxxxxxxxxx"]\n'
    "      b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "      c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "      d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "      e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "      f: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
)
GOOD = "name: good\nsteps:\n  - {skill: monitor, tool: get_alarms}\n"


def folder(app: PilotApp) -> Path:
    path = app.settings.resolved_templates_dir
    path.mkdir(parents=True, exist_ok=True)
    return path


async def listing(client: Client) -> dict[str, dict[str, object]]:
    return {str(t["name"]): t for t in (await client.ok("list_workflows"))["templates"]}


def database_bytes(app: PilotApp) -> int:
    with sqlite3.connect(app.settings.home_path / "pilot.db") as conn:
        return int(conn.execute("SELECT coalesce(sum(length(document)), 0) FROM workflows").fetchone()[0])


async def test_an_alias_bomb_is_listed_as_broken_and_stores_nothing(
    client: Client, pilot_app: PilotApp
) -> None:
    assert len(ALIAS_BOMB) < 600
    (folder(pilot_app) / "bomb.yaml").write_text(ALIAS_BOMB)
    (folder(pilot_app) / "good.yaml").write_text(GOOD)
    templates = await listing(client)
    assert "aliases" in str(templates["bomb"]["error"]) and "error" not in templates["good"]
    out = await client.refused("create_workflow_from_template", workflow_type="bomb", params={})
    assert "aliases" in out["error"]
    assert database_bytes(pilot_app) == 0


async def test_a_deeply_nested_file_is_listed_with_its_error_and_the_listing_still_works(
    client: Client, pilot_app: PilotApp
) -> None:
    (folder(pilot_app) / "deep.yaml").write_text("name: deep\nsteps: " + "[" * 20000 + "]" * 20000 + "\n")
    (folder(pilot_app) / "good.yaml").write_text(GOOD)
    templates = await listing(client)
    assert "nesting deeper than" in str(templates["deep"]["error"])
    assert templates["good"]["steps"] == 1
    await client.ok("create_workflow_from_template", workflow_type="good", params={})


async def test_a_link_out_of_the_folder_is_never_followed_nor_quoted(
    client: Client, pilot_app: PilotApp, tmp_path: Path
) -> None:
    secret = tmp_path / "private.yaml"
    secret.write_text("name: leak\nsteps: [{skill: monitor, tool: get_alarms, params: {k: TOPSECRET}}]\n")
    broken_secret = tmp_path / "private2.txt"
    broken_secret.write_text("root:TOPSECRET2:0:0\n: : [\n")
    (folder(pilot_app) / "leak.yaml").symlink_to(secret)
    (folder(pilot_app) / "leak2.yaml").symlink_to(broken_secret)
    (folder(pilot_app) / "inside.yaml").symlink_to(folder(pilot_app) / "good.yml")
    (folder(pilot_app) / "good.yml").write_text(GOOD.replace("good", "linked"))
    reply = await client.ok("list_workflows")
    text = str(reply)
    assert "TOPSECRET" not in text
    by_file = {t.get("file"): t for t in reply["templates"]}
    for name in ("leak.yaml", "leak2.yaml"):
        assert "outside the templates folder" in str(by_file[name]["error"])
    assert "already defined in good.yml" in str(by_file["inside.yaml"]["error"]), "a link inside is read"
    out = await client.refused("create_workflow_from_template", workflow_type="leak", params={})
    assert "TOPSECRET" not in str(out)


async def test_a_broken_file_error_never_quotes_its_content(client: Client, pilot_app: PilotApp) -> None:
    (folder(pilot_app) / "bad.yaml").write_text(
        "name: bad\nsteps:\n  - {skill: x, tool: y, password: 'hunter2' oops}\n"
    )
    error = str((await listing(client))["bad"]["error"])
    assert "not valid YAML at line 3" in error and "hunter2" not in error


async def test_saving_over_someone_elses_template_is_refused_and_changes_nothing(
    pilot_app: PilotApp,
) -> None:
    async with connect(pilot_app, Actor("alice")) as alice:
        await alice.ok(
            "create_workflow", name="tidy", description="alice's", steps=[READ_STEP], save_as_template=True
        )
    path = folder(pilot_app) / "tidy.yaml"
    original = path.read_text()
    assert yaml.safe_load(original)["authors"] == ["alice"]
    async with connect(pilot_app, Actor("mallory")) as mallory:
        out = await mallory.refused(
            "create_workflow", name="tidy", description="mine", steps=[READ_STEP], save_as_template=True
        )
        assert "belongs to its authors (alice)" in out["error"] and "'tidy_2'" in out["hint"]
        wid = (await mallory.ok("design_workflow", goal="g"))["workflow_id"]
        await mallory.ok("update_draft", workflow_id=wid, name="tidy", steps=[READ_STEP])
        out = await mallory.refused("confirm_draft", workflow_id=wid, save_as_template=True)
        assert "belongs to its authors (alice)" in out["error"]
        assert (await mallory.status(wid))["state"] == "draft"
        active = (await mallory.ok("list_workflows"))["active_workflows"]
        assert [w["type"] for w in active] == ["tidy", "tidy"], "alice's workflow and mallory's draft only"
    assert path.read_text() == original


async def test_a_co_author_saving_again_keeps_every_author(pilot_app: PilotApp) -> None:
    async with connect(pilot_app, Actor("alice")) as alice:
        wid = (await alice.ok("design_workflow", goal="g"))["workflow_id"]
        await alice.ok("update_draft", workflow_id=wid, name="shared", steps=[READ_STEP])
    async with connect(pilot_app, Actor("bob")) as bob:
        await bob.ok("update_draft", workflow_id=wid, steps=[READ_STEP, GATE])
        await bob.ok("confirm_draft", workflow_id=wid, save_as_template=True)
    path = folder(pilot_app) / "shared.yaml"
    assert yaml.safe_load(path.read_text())["authors"] == ["alice", "bob"]
    async with connect(pilot_app, Actor("bob")) as bob:
        await bob.ok(
            "create_workflow", name="shared", description="v2", steps=[READ_STEP], save_as_template=True
        )
    doc = yaml.safe_load(path.read_text())
    assert (doc["description"], doc["authors"]) == ("v2", ["alice", "bob"])


def _refuse_writes(app: PilotApp, verb: str) -> sqlite3.Connection:
    """A database that refuses to store workflows (as a full disk or a broken file would)."""
    conn = sqlite3.connect(app.settings.home_path / "pilot.db", isolation_level=None)
    conn.execute(
        f"CREATE TRIGGER no_workflow_{verb.lower()} BEFORE {verb} ON workflows "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    )
    return conn


async def test_a_template_whose_workflow_is_not_stored_is_not_left_behind(
    client: Client, pilot_app: PilotApp
) -> None:
    conn = _refuse_writes(pilot_app, "INSERT")
    out = await client.refused(
        "create_workflow", name="orphan", description="d", steps=[READ_STEP], save_as_template=True
    )
    assert out["error"]
    assert not (folder(pilot_app) / "orphan.yaml").exists()
    assert [p.name for p in folder(pilot_app).iterdir()] == []
    conn.close()


@pytest.mark.parametrize("existing", [False, True])
async def test_a_confirm_that_is_not_stored_leaves_the_template_as_it_was(
    pilot_app: PilotApp, existing: bool
) -> None:
    async with connect(pilot_app, Actor("alice")) as alice:
        if existing:
            await alice.ok(
                "create_workflow", name="keep", description="v1", steps=[READ_STEP], save_as_template=True
            )
        before = (folder(pilot_app) / "keep.yaml").read_text() if existing else None
        wid = (await alice.ok("design_workflow", goal="g"))["workflow_id"]
        await alice.ok("update_draft", workflow_id=wid, name="keep", description="v2", steps=[READ_STEP])
        conn = _refuse_writes(pilot_app, "UPDATE")
        out = await alice.refused("confirm_draft", workflow_id=wid, save_as_template=True)
        conn.close()
        assert out["error"]
    path = folder(pilot_app) / "keep.yaml"
    assert (path.read_text() if path.exists() else None) == before
    assert sorted(p.name for p in folder(pilot_app).iterdir()) == (["keep.yaml"] if existing else [])


async def test_a_file_with_a_few_aliases_as_yaml_dump_writes_them_still_loads(
    client: Client, pilot_app: PilotApp
) -> None:
    params = {"vm_name": "web-01"}
    doc = {"name": "twice", "steps": [{"skill": "monitor", "tool": "get_vm_info", "params": params}] * 2}
    text = yaml.safe_dump(doc)
    assert "&id" in text and "*id" in text
    (folder(pilot_app) / "twice.yaml").write_text(text)
    created = await client.ok("create_workflow_from_template", workflow_type="twice", params={})
    assert len(created["steps"]) == 2
