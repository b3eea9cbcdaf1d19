"""A private PostgreSQL 15 server for the test session, and a fresh database per test.

A test's database is a copy of a template the real migrations built once per server (per xdist
worker), unless the test is marked ``empty_database`` (tests of the migrations themselves). A
copy costs more than most tests (CREATE DATABASE copies the catalogs), so a test's database is
handed on to the next test when only its rows changed: ``release_database`` empties its tables
and compares everything else (tables, columns, indexes, triggers and whether they are enabled,
functions, privileges, settings, the schema_meta and workflow_counts rows) with the template;
anything different and the database is dropped instead.

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
from sqlalchemy.exc import SQLAlchemyError
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
        self._template_print: str | None = None
        self._spare: list[str] = []  # emptied copies of the template, for the next tests
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
        ``migrated`` (a copy of the session's template, which the real migrations built once; or
        one a test released, emptied and found identical to the template otherwise)."""
        if migrated and self._spare:
            return self._spare.pop()
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

    def release_database(self, name: str) -> None:
        """A migrated database a test is done with: emptied and kept for the next test when it
        is the template but for its rows, else dropped."""
        try:
            if self._empty(name):
                self._spare.append(name)
                return
        except SQLAlchemyError:
            pass  # e.g. a table the test dropped: a fresh copy next time
        self.drop_database(name)

    def _empty(self, name: str) -> bool:
        """Empty ``name``'s tables (as the template has them) and say whether it is now the
        template (module docstring)."""
        with self.admin() as conn:  # what the test left connected (a stopped server's pool…)
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                    "WHERE datname = :db AND pid <> pg_backend_pid()"
                ),
                {"db": name},
            )
        engine = create_engine(self.url(name), poolclass=NullPool)
        try:
            with engine.begin() as conn:
                tables = list(
                    conn.execute(
                        text(
                            "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public' "
                            "AND tablename NOT IN ('schema_meta', 'workflow_counts')"
                        )
                    ).scalars()
                )
                conn.execute(text("SET LOCAL session_replication_role = replica"))  # append-only triggers
                conn.execute(text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY"))
                conn.execute(text("UPDATE workflow_counts SET value = 0"))
            with engine.connect() as conn:
                found = _fingerprint(conn)
        finally:
            engine.dispose()
        if self._template_print is None:
            assert self._template is not None
            template = create_engine(self.url(self._template), poolclass=NullPool)
            try:
                with template.connect() as conn:
                    self._template_print = _fingerprint(conn)
            finally:
                template.dispose()
        return found == self._template_print


# Everything of a database but its rows (and the rows of the two tables a test may edit that
# emptying does not reset), as one text to compare with the template's.
_FINGERPRINT = """
SELECT string_agg(x, E'\n' ORDER BY x) FROM (
    SELECT 'rel ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '')
        || ' ' || c.relrowsecurity FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
    UNION ALL SELECT 'col ' || a.attrelid::regclass || '.' || a.attname || ' '
        || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' '
        || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL SELECT 'idx ' || pg_get_indexdef(i.indexrelid) FROM pg_index i
        JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public'
    UNION ALL SELECT 'con ' || conrelid::regclass || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace
    UNION ALL SELECT 'trg ' || tgrelid::regclass || '.' || tgname || ' ' || tgenabled::text FROM pg_trigger
        WHERE NOT tgisinternal
    UNION ALL SELECT 'fn ' || n.nspname || '.' || p.proname || ' ' || md5(p.prosrc) || ' '
        || coalesce(p.proacl::text, '') FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
    UNION ALL SELECT 'ns ' || nspname || ' ' || coalesce(nspacl::text, '') FROM pg_namespace
    UNION ALL SELECT 'ext ' || extname FROM pg_extension
    UNION ALL SELECT 'db ' || coalesce(datacl::text, '') || ' ' || datallowconn FROM pg_database
        WHERE datname = current_database()
    UNION ALL SELECT 'set ' || setrole || ' ' || setconfig::text FROM pg_db_role_setting
        WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL SELECT 'meta ' || key || '=' || value FROM schema_meta
    UNION ALL SELECT 'count ' || name || '=' || value FROM workflow_counts
) found(x)
"""


def _fingerprint(conn: Connection) -> str:
    return str(conn.execute(text(_FINGERPRINT)).scalar_one())
