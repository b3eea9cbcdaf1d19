"""A private PostgreSQL 15 server for the test session, and a fresh database per test.

A test's database is a copy of a template the real migrations built once per server (per xdist
worker), unless the test is marked ``empty_database`` (tests of the migrations themselves).

The server is the Debian build (``/usr/lib/postgresql/15/bin``, installed by scripts/pg-setup.sh).
Its data folder and socket live in a temporary folder owned by an unprivileged user (PostgreSQL
refuses to run as root: when the tests run as root, the folder is handed to the user named by
``VMWARE_PILOT_TEST_PG_USER``, default ``postgres``). It listens on a free loopback port and
trusts local connections; durability is off (fsync) because the data is thrown away.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.pool import NullPool

from vmware_pilot.config import Settings
from vmware_pilot.store.sql import open_store

BIN = Path(os.environ.get("VMWARE_PILOT_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "pilot_test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One running postgres: ``url(db)`` for a database on it, ``new_database()`` for a fresh one."""

    def __init__(self) -> None:
        if not (BIN / "pg_ctl").exists():
            raise RuntimeError(
                f"PostgreSQL 15 is not installed ({BIN}/pg_ctl missing): run scripts/pg-setup.sh "
                "(scripts/test.sh does) or set VMWARE_PILOT_TEST_PG_BIN"
            )
        self.root = Path(tempfile.mkdtemp(prefix="pilot-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._runas: list[str] = []
        self._admin: Engine | None = None
        self._options = ""
        self._template: str | None = None
        if os.geteuid() == 0:
            user = os.environ.get("VMWARE_PILOT_TEST_PG_USER", "postgres")
            entry = pwd.getpwnam(user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._runas = ["runuser", "-u", user, "--"]
        self.root.chmod(0o700)

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self._runas, *args], capture_output=True, text=True, check=False, cwd=self.root
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def start(self) -> None:
        self._run(
            str(BIN / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8",
            "--no-sync", "--locale=C",
        )  # fmt: skip
        self._options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run(
            str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60",
            "-o", self._options, "start",
        )  # fmt: skip
        self._admin = create_engine(self.url("postgres"), poolclass=NullPool, isolation_level="AUTOCOMMIT")

    def halt(self) -> None:
        """Stop the server, keeping its data (``resume`` starts it again on the same port)."""
        self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        self._run(
            str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60",
            "-o", self._options, "start",
        )  # fmt: skip

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.dispose()
        if (self.data / "postmaster.pid").exists():
            self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @contextlib.contextmanager
    def admin(self) -> Iterator[Connection]:
        assert self._admin is not None, "server not started"
        with self._admin.connect() as conn:
            yield conn

    def new_database(self, *, migrated: bool = False) -> str:
        """Create a database and name it: empty (from template0: nothing a test left behind), or
        ``migrated`` (a copy of the session's template, which the real migrations built once)."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        template = self._migrated_template() if migrated else "template0"
        with self.admin() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY'))
        return name

    def _migrated_template(self) -> str:
        """The database at the latest schema, made on first use by opening a store on an empty
        database as vmware-pilot does (``open_store`` runs every migration); copying it spares each
        test the migrations. Nothing else ever connects to it, so it stays as the migrations left it."""
        if self._template is None:
            name = self.new_database()
            home = Path(tempfile.mkdtemp(prefix="pilot-template-home-"))
            try:
                open_store(Settings(home=home, database_url=self.url(name))).close()
            finally:
                shutil.rmtree(home, ignore_errors=True)
            self._template = name
        return self._template

    def drop_database(self, name: str) -> None:
        with self.admin() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
