"""`vmware-pilot templates import` and `export` through the entry point: secrets in any shape stay
out of the database and out of exported files, and an export never changes a folder it did not
create."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from sqlalchemy import text
from typer.testing import CliRunner

from tests.support.backends import Database
from vmware_pilot.cli.main import app as cli
from vmware_pilot.config import Settings

runner = CliRunner()
READ = {"action": "list", "skill": "aiops", "tool": "list_virtual_machines"}
SECRETS = ("hunter2", "abcdefgh12345678", "s3cr3t-pw", "tok-9876543210", "Pa55w0rd!")
LEAKY = {
    "default.yaml": {  # a secret parameter's default
        "name": "by_default",
        "parameters": {"admin_password": {"type": "string", "default": "hunter2"}},
        "steps": [{**READ, "params": {"password": "{{admin_password}}"}}],
    },
    "bearer.yaml": {  # a credential in a text under a harmless key
        "name": "bearer",
        "steps": [{**READ, "params": {"cmd": "curl -H 'Authorization: Bearer abcdefgh12345678' x"}}],
    },
    "pair.yaml": {  # a password=… pair in the description and in a parameter's default
        "name": "pair",
        "description": "logs in with password=s3cr3t-pw",
        "parameters": {"opts": {"type": "string", "default": "user=ops token=tok-9876543210"}},
        "steps": [{**READ, "params": {"note": "{{opts}}"}}],
    },
    "url.yaml": {  # a URL's user:password@
        "name": "url",
        "steps": [{**READ, "params": {"target": "https://ops:Pa55w0rd!@vc.example.com/sdk"}}],
    },
}
CLEAN = {
    "name": "clean",
    "description": "password={{pw}} is filled in at use",
    "parameters": {"pw": {"type": "string", "required": True}, "mode": {"type": "string", "default": "soft"}},
    "steps": [{**READ, "params": {"password": "{{pw}}", "token": {"$env": "VC_TOKEN"}, "auth": "***"}}],
}


@pytest.fixture
def shared(database: Database, pilot_home: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("VMWARE_PILOT_DATABASE_URL", database.raw_url)
    return Settings(home=pilot_home, database_url=database.raw_url)


def _write(folder: Path, files: dict[str, dict[str, object]]) -> None:
    folder.mkdir(exist_ok=True)
    for name, doc in files.items():
        (folder / name).write_text(yaml.safe_dump(doc, sort_keys=False))


def test_import_into_the_database_refuses_a_secret_in_any_shape(
    shared: Settings, database: Database, tmp_path: Path
) -> None:
    _write(tmp_path / "given", {**LEAKY, "clean.yaml": CLEAN})
    result = runner.invoke(cli, ["templates", "import", str(tmp_path / "given"), "--json"])
    assert result.exit_code == 1, result.output
    report = {r["file"]: r for r in json.loads(result.stdout)["templates"]}
    assert report["clean.yaml"]["outcome"] == "added"
    for file in LEAKY:
        assert "secret in clear" in report[file]["error"], report[file]
    assert "parameters.admin_password.default" in report["default.yaml"]["error"]
    assert "description" in report["pair.yaml"]["error"]
    stored = database.stored_bytes()
    for secret in SECRETS:
        assert secret.encode() not in stored and secret not in result.output


def test_export_from_the_database_masks_every_secret_and_imports_back(
    shared: Settings, database: Database, tmp_path: Path
) -> None:
    assert runner.invoke(cli, ["templates"]).exit_code == 0  # the schema exists
    with database.raw() as conn:  # rows written behind Pilot's back, as an older version could
        for doc in [*LEAKY.values(), CLEAN]:
            conn.execute(
                text("INSERT INTO custom_templates VALUES (:n, :b, '2026-01-01', 'someone')"),
                {"n": doc["name"], "b": yaml.safe_dump(doc, sort_keys=False)},
            )
    out = tmp_path / "out"
    result = runner.invoke(cli, ["templates", "export", str(out)])
    assert result.exit_code == 0, result.output
    written = {p.name: p.read_text() for p in out.iterdir()}
    assert sorted(written) == ["bearer.yaml", "by_default.yaml", "clean.yaml", "pair.yaml", "url.yaml"]
    for name, body in written.items():
        for secret in SECRETS:
            assert secret not in body, (name, secret)
    assert written["clean.yaml"] == yaml.safe_dump(CLEAN, sort_keys=False)  # nothing to mask: as stored
    masked = yaml.safe_load(written["by_default.yaml"])
    assert masked["parameters"]["admin_password"]["default"] == "***"
    assert masked["steps"][0]["params"]["password"] == "{{admin_password}}"  # a placeholder is kept
    assert "Bearer ***" in written["bearer.yaml"] and "ops:***@vc.example.com" in written["url.yaml"]

    again = runner.invoke(cli, ["templates", "import", str(out), "--json"])
    assert again.exit_code == 0, again.output
    assert {r["name"]: r["outcome"] for r in json.loads(again.stdout)["templates"]} == {
        "bearer": "replaced",
        "by_default": "replaced",
        "clean": "unchanged",
        "pair": "replaced",
        "url": "replaced",
    }
    stored = database.stored_bytes()
    for secret in SECRETS:
        assert secret.encode() not in stored


@pytest.fixture
def one_template(settings: Settings, tmp_path: Path) -> None:
    _write(tmp_path / "given", {"clean.yaml": CLEAN})
    assert runner.invoke(cli, ["templates", "import", str(tmp_path / "given")]).exit_code == 0


def test_export_creates_a_missing_folder_private(one_template: None, tmp_path: Path) -> None:
    out = tmp_path / "new" / "out"
    result = runner.invoke(cli, ["templates", "export", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in out.iterdir()] == ["clean.yaml"]
    assert (out / "clean.yaml").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o755])
def test_export_into_an_existing_empty_folder_leaves_its_mode_alone(
    one_template: None, tmp_path: Path, mode: int
) -> None:
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(mode)
    result = runner.invoke(cli, ["templates", "export", str(out)])
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o7777 == mode
    assert (out / "clean.yaml").stat().st_mode & 0o777 == 0o600


def test_export_refuses_a_folder_that_is_not_empty_in_one_line_and_touches_nothing(
    one_template: None, tmp_path: Path
) -> None:
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o777)
    (out / "clean.yaml").write_text("someone else's file\n")
    result = runner.invoke(cli, ["templates", "export", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"error: {out} is not empty; nothing was exported (give a new or empty folder)"
    ]
    assert (out / "clean.yaml").read_text() == "someone else's file\n"
    assert [p.name for p in out.iterdir()] == ["clean.yaml"]
    assert out.stat().st_mode & 0o777 == 0o777


def test_export_to_a_file_is_a_usage_error(one_template: None, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("")
    result = runner.invoke(cli, ["templates", "export", str(target)])
    assert result.exit_code == 2 and "is not a folder" in result.stderr
