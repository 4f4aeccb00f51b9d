"""A contrib store on PostgreSQL: every role of ``soulacy_store`` on one server, off by default.

Enable it with ``soulacy -p soulacy.contrib.postgres …`` or in config.yaml::

    plugins:
      enable: [soulacy.contrib.postgres]
    postgres:
      dsn: postgresql://soulacy@db.internal:5432/soulacy   # or SOULACY_POSTGRES__DSN
      # dsn_env: DATABASE_URL     # or: the variable that holds the DSN
      pool_size: 10               # connections (and worker threads) per process
      statement_timeout: 30s      # the server cancels a statement that takes longer
      connect_timeout: 10s

It then answers ``soulacy_store`` before the builtin SQLite store (``tryfirst``): history, runs
and attempts, tool records, proofs, checkpoints, plugin state, leases with fencing tokens,
cancellation requests and counters live in the database, shared by every process and host that
opens it (``PostgresStore.multi_process``); lease expiry is judged by the server's clock.
Migrations run when the store is first used, under an advisory lock (``soulacy store migrate``
runs them explicitly); ``soulacy store copy`` copies a SQLite workspace file (``soulacy.db``)
into a database that holds no Soulacy data yet (``_copy``). Needs ``pip install
'soulacy[postgres]'`` (psycopg 3 and psycopg-pool).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from soulacy.kernel import (
    CliCommand,
    CliContext,
    ConfigIssue,
    ConfigSection,
    Duration,
    Kernel,
    Location,
    PluginError,
    Settings,
    StashKey,
    UsageError,
    hookimpl,
    redact_text,
)

try:
    import psycopg
    import psycopg_pool  # noqa: F401  (the store's pool: checked here, with psycopg)
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise PluginError(
        "soulacy.contrib.postgres needs psycopg 3 and psycopg-pool:"
        " pip install 'soulacy[postgres]'"
        f" ({exc})"
    ) from exc

from ._copy import LEFT_OUT, CopyRefused, CopyReport, copy_sqlite
from ._schema import SCHEMA_VERSION
from ._store import PostgresStore

__all__ = [
    "ENV_DSN",
    "SCHEMA_VERSION",
    "CopyRefused",
    "CopyReport",
    "PostgresConfig",
    "PostgresStore",
    "copy_sqlite",
    "resolve_dsn",
]

SECTION = "postgres"
ENV_DSN = "SOULACY_POSTGRES__DSN"  # the kernel's override of postgres.dsn
MAX_POOL_SIZE = 1000


@attrs.frozen
class PostgresConfig:
    dsn: str | None = None
    dsn_env: str | None = None  # the name of an environment variable holding the DSN
    pool_size: int = 10
    statement_timeout: Duration = Duration(30)
    connect_timeout: Duration = Duration(10)


def resolve_dsn(config: PostgresConfig, environ: Mapping[str, str]) -> str | None:
    """The DSN: ``postgres.dsn`` (which ``SOULACY_POSTGRES__DSN`` overrides), else the variable
    ``postgres.dsn_env`` names; None when neither gives one."""
    if config.dsn:
        return config.dsn
    if config.dsn_env:
        return environ.get(config.dsn_env) or None
    return None


_store_key = StashKey[PostgresStore]("postgres_store")  # the kernel's store, in kernel.stash


def store_of(kernel: Kernel) -> PostgresStore:
    """The kernel's store: one per kernel (one pool), serving every store role."""
    store = kernel.stash.get(_store_key, None)
    if store is None:
        config: PostgresConfig = kernel.config.section(SECTION)
        dsn = resolve_dsn(config, kernel.environ)
        if dsn is None:  # validated when the kernel loaded: a DSN set only in a later edit
            raise PluginError(f"{SECTION}.dsn is not set ({_HOW_TO_SET})")
        store = PostgresStore(
            dsn,
            pool_size=config.pool_size,
            statement_timeout=config.statement_timeout.seconds,
            connect_timeout=config.connect_timeout.seconds,
            # A kernel of a read command (`soulacy runs`, `history` …) migrates and writes nothing.
            read_only=kernel.read_only,
        )
        store.start_soon = kernel.start_soon
        kernel.stash[_store_key] = store
    return store


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection(SECTION, PostgresConfig, doc="the PostgreSQL store")]


_HOW_TO_SET = (
    "the PostgreSQL store needs a DSN such as postgresql://user:password@host:5432/dbname:"
    f" set {SECTION}.dsn in config.yaml, or the environment variable {ENV_DSN}, or"
    f" {SECTION}.dsn_env to the name of a variable that holds it (such as DATABASE_URL)"
)


@hookimpl
def soulacy_validate_config(kernel: Kernel, config: Settings) -> Sequence[ConfigIssue]:
    section: PostgresConfig = config.section(SECTION)

    def where(key: str) -> Location:
        return config.source_of(f"{SECTION}.{key}") or Location(str(config.file))

    issues: list[ConfigIssue] = []
    if not 1 <= section.pool_size <= MAX_POOL_SIZE:
        issues.append(
            ConfigIssue(
                where("pool_size"),
                f"{SECTION}.pool_size",
                f"between 1 and {MAX_POOL_SIZE}",
                section.pool_size,
                True,
            )
        )
    dsn = resolve_dsn(section, kernel.environ)
    if dsn is None and not section.dsn_env:
        # Validating the file alone (before an edit is saved), the variable is not in
        # ``config``, but it is in the kernel's environment.
        dsn = kernel.environ.get(ENV_DSN) or None
    if dsn is None:
        if section.dsn_env:
            message = (
                f"the environment variable {section.dsn_env} is not set (it should hold the"
                " DSN of the PostgreSQL store)"
            )
            issues.append(ConfigIssue(where("dsn_env"), f"{SECTION}.dsn_env", message))
        else:
            issues.append(ConfigIssue(where("dsn"), f"{SECTION}.dsn", f"not set: {_HOW_TO_SET}"))
        return issues
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        # Never echo the value: it may hold a password.
        message = (
            "not a PostgreSQL connection string (postgresql://user:password@host:port/dbname,"
            f" or key=value pairs): {redact_text(' '.join(str(exc).split()))}"
        )
        key = "dsn" if section.dsn or not section.dsn_env else "dsn_env"
        issues.append(ConfigIssue(where(key), f"{SECTION}.{key}", message))
    return issues


@hookimpl
async def soulacy_unconfigure(kernel: Kernel) -> None:
    # Kept in the stash: a kernel used after closing reuses (reopens) it.
    store = kernel.stash.get(_store_key, None)
    if store is not None:
        await store.aclose()


@hookimpl(tryfirst=True)
def soulacy_store(kernel: Kernel) -> PostgresStore:
    return store_of(kernel)


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand(
            "store migrate",
            "bring the PostgreSQL store's schema to this release's version",
            _migrate,
            _configure_migrate,
        ),
        CliCommand(
            "store copy",
            "copy a SQLite workspace file (soulacy.db) into an empty PostgreSQL database",
            _copy,
            _configure_copy,
        ),
    ]


def _configure_migrate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


async def _migrate(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    try:
        store = store_of(kernel)
        found = await store.open()
    finally:
        await kernel.aclose()
    report = {
        "store": store.describe(),
        "from_version": found,
        "version": max(found, SCHEMA_VERSION),
        "migrated": found < SCHEMA_VERSION,
    }
    if args.json:
        ctx.print_json(report)
    elif found < SCHEMA_VERSION:
        ctx.print(f"migrated {report['store']} from schema version {found} to {SCHEMA_VERSION}")
    else:
        ctx.print(f"{report['store']} is at schema version {found}: nothing to do")
    return 0


def _configure_copy(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--to",
        metavar="DSN",
        help=f"the PostgreSQL database (default: the configured one: {SECTION}.dsn,"
        f" {ENV_DSN} or {SECTION}.dsn_env); it must hold no Soulacy data yet",
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="PATH",
        help="the SQLite file (default: the workspace's store.path, soulacy.db)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


LABELS = {
    "runs": "runs",
    "attempt_endings": "attempt endings",
    "conversation_history": "history entries",
    "tool_records": "tool records",
    "proofs": "proofs",
    "superseded_proofs": "superseded proofs",
    "workflow_checkpoints": "checkpoints",
    "plugin_state": "plugin state",
    "leases": "leases",
    "counters": "counters",
    "lease_waiters": "lease queue places",
    "cancel_requests": "cancellation requests",
    "legacy_proofs": "legacy proofs",
}


def _source(kernel: Kernel, given: str | None) -> Path:
    """The SQLite file: ``--from``, else the workspace's ``store.path``."""
    if given is not None:
        return Path(given).expanduser().absolute()
    try:
        relative = str(kernel.config.get("store.path"))
    except KeyError:  # the SQLite plugin is disabled: its default file
        relative = "soulacy.db"
    return kernel.workspace / relative


async def _copy(args: argparse.Namespace, ctx: CliContext) -> int:
    loaded = ctx.plugins
    if args.to is not None:
        try:
            psycopg.conninfo.conninfo_to_dict(args.to)
        except psycopg.Error as exc:
            raise UsageError(
                "--to: not a PostgreSQL connection string (postgresql://user@host:port/dbname,"
                f" or key=value pairs): {redact_text(' '.join(str(exc).split()))}"
            ) from None
        # The kernel's store is then the target's: its own override of postgres.dsn.
        loaded = attrs.evolve(loaded, environ={**loaded.environ, ENV_DSN: args.to})
    kernel = Kernel.from_plugins(loaded)
    try:
        report = await copy_sqlite(store_of(kernel), _source(kernel, args.source))
    finally:
        await kernel.aclose()
    if args.json:
        ctx.print_json(report.data())
    else:
        _print_report(ctx, report)
    if report.running:
        ctx.warn(
            f"{len(report.running)} run(s) were running in the SQLite store when copied"
            f" ({', '.join(report.running[:5])}): what they write from now on goes to the"
            " SQLite file only; stop every process using the workspace before copying"
        )
    if report.unverified_proofs:
        ctx.warn(
            f"{len(report.unverified_proofs)} proof(s) do not match their sha256 in the SQLite"
            f" file and were copied as they are: {', '.join(report.unverified_proofs[:5])}"
        )
    return 0


def _print_report(ctx: CliContext, report: CopyReport) -> None:
    total = sum(report.copied.values())
    ctx.print(
        f"copied {report.source} (SQLite, schema version {report.schema_version}) into"
        f" {report.target} in one transaction: {total} rows"
    )
    width = max(len(LABELS.get(table, table)) for table in report.copied)
    for table, count in report.copied.items():
        extra = f"   (highest token {report.highest_token})" if table == "leases" else ""
        ctx.print(f"  {LABELS.get(table, table):<{width}}  {count:>8}{extra}")
    for table, count in report.left_out.items():
        if count:
            ctx.print(f"not copied: {count} {LABELS.get(table, table)}, {LEFT_OUT[table]}")
