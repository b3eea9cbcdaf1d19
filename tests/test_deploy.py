"""The deployment files: Dockerfile, compose.yaml and the systemd unit say what they should, and
their commands are this program's real commands and options. Where a Docker daemon answers, the
image is built and its healthcheck run; elsewhere the files are checked only."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from vmware_pilot.cli.commands import load_command
from vmware_pilot.cli.index import COMMANDS
from vmware_pilot.config import Settings

REPO = Path(__file__).resolve().parents[1]


def _instructions(text: str) -> list[tuple[str, str]]:
    """Dockerfile instructions (continuation lines joined, comments dropped) as (KEYWORD, rest)."""
    joined = text.replace("\\\n", " ")
    out = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def _check_pilot_command(argv: list[str]) -> None:
    """``argv`` (after the program) is a command of ours with options it has and values it takes."""
    assert argv[0] in COMMANDS, argv
    command = load_command(argv[0])
    context = command.make_context(argv[0], argv[1:], resilient_parsing=False)
    assert context.params["transport"] in ("https", "http"), context.params


def _scripts() -> set[str]:
    return set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])


def test_the_dockerfile_runs_as_a_user_and_checks_livez() -> None:
    steps = _instructions((REPO / "Dockerfile").read_text())
    last_from = max(i for i, (k, _) in enumerate(steps) if k == "FROM")
    final = steps[last_from:]
    users = [rest for k, rest in final if k == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0"), users
    health = [rest for k, rest in final if k == "HEALTHCHECK"]
    assert len(health) == 1 and "/livez" in health[0]
    assert any(k == "ARG" and rest.startswith("COMPANIONS") for k, rest in final)
    cmd = next(rest for k, rest in reversed(final) if k == "CMD")
    argv = yaml.safe_load(cmd)  # the JSON (exec) form
    assert argv[0] in _scripts()
    _check_pilot_command(argv[1:])
    port = argv[argv.index("--port") + 1]
    assert f"127.0.0.1:{port}/livez" in health[0]
    assert any(k == "EXPOSE" and rest == port for k, rest in final)
    copied = [rest.split()[-2] for k, rest in steps if k == "COPY" and "--from" not in rest]
    for source in copied:
        assert (REPO / source).exists(), source


def test_compose_has_postgresql_and_two_replicas_behind_one_address() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    assert services["db"]["image"].startswith("postgres:")
    replicas = [s for name, s in services.items() if name.startswith("pilot-")]
    assert len(replicas) == 2
    urls = {r["environment"]["VMWARE_PILOT_DATABASE_URL"] for r in replicas}
    assert len(urls) == 1 and "@db:5432/" in urls.pop()  # one database, the db service
    known = set(Settings.env_names().values())
    for replica in replicas:
        assert set(replica["environment"]) <= known, set(replica["environment"]) - known
        assert replica["depends_on"]["db"]["condition"] == "service_healthy"
    published = [(n, p) for n, s in services.items() for p in s.get("ports", [])]
    assert [n for n, _ in published] == ["proxy"]  # the one address
    nginx = compose["configs"]["nginx"]["content"]
    assert "server pilot-1:8443" in nginx and "server pilot-2:8443" in nginx


def test_the_systemd_unit_starts_a_real_command() -> None:
    unit = (REPO / "deploy" / "vmware-pilot.service").read_text()
    sections = {line.strip("[]") for line in unit.splitlines() if line.startswith("[")}
    assert {"Unit", "Service", "Install"} <= sections
    values: dict[str, list[str]] = {}
    for line in unit.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            values.setdefault(key.strip(), []).append(value.strip())
    assert values["User"] != ["root"]
    argv = shlex.split(values["ExecStart"][0])
    assert argv[0].startswith("/") and Path(argv[0]).name in _scripts()
    _check_pilot_command(argv[1:])
    known = set(Settings.env_names().values())
    for assignment in values["Environment"]:
        assert assignment.partition("=")[0] in known, assignment


def test_a_wrong_option_in_a_unit_would_be_caught() -> None:
    import pytest

    with pytest.raises(Exception, match="No such option: --no-such-option"):
        _check_pilot_command(["mcp", "--transport", "https", "--no-such-option"])


def test_the_image_builds_and_becomes_healthy_where_docker_answers(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, check=False).returncode != 0:
        return  # no daemon here: the file checks above are what can be checked
    built = subprocess.run(
        [docker, "build", "-q", "-t", "vmware-pilot-test:latest", str(REPO)],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    user = subprocess.run(
        [docker, "run", "--rm", "--entrypoint", "id", "vmware-pilot-test:latest", "-u"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert user.stdout.strip() == "10001"


@pytest.mark.slow
def test_the_images_command_serves_and_its_healthcheck_passes(tmp_path: Path) -> None:
    """The Dockerfile's CMD run here (certificate from deploy/make-cert.py, port 0), and its
    HEALTHCHECK command run against it."""
    import re
    import sys

    from tests.support.server_proc import PILOT, clean_env, start_server

    steps = _instructions((REPO / "Dockerfile").read_text())
    argv: list[str] = yaml.safe_load(next(rest for k, rest in reversed(steps) if k == "CMD"))
    health = next(rest for k, rest in steps if k == "HEALTHCHECK")
    check: list[str] = yaml.safe_load(health[health.index("CMD") + 3 :])
    tls = tmp_path / "tls"
    subprocess.run(
        [sys.executable, str(REPO / "deploy" / "make-cert.py"), str(tls), "localhost", "127.0.0.1"],
        check=True,
    )
    args = [a.replace("/etc/vmware-pilot/tls", str(tls)) for a in argv[2:]]
    port_at = args.index("--port")
    del args[port_at : port_at + 2]
    subprocess.run(
        [str(PILOT), "token", "create", "alice"], env=clean_env(tmp_path), check=True, capture_output=True
    )
    with start_server(tmp_path, args) as server:
        probe = [check[0].replace("python", sys.executable), *check[1:]]
        probe[-1] = re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{server.port}", probe[-1])
        assert subprocess.run(probe, check=False, timeout=60).returncode == 0
