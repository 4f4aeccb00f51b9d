"""The plugin in a kernel: enabled like any contrib plugin, configured, answering the store."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import psycopg
import pytest
import trio
from pg_support import DEAD_DSN, DEAD_PASSWORD
from psycopg.conninfo import conninfo_to_dict

from soulacy.contrib.postgres import PostgresStore
from soulacy.contrib.postgres._schema import SCHEMA_VERSION
from soulacy.kernel import ConfigError, Kernel
from soulacy.kernel.store import ConversationKey
from soulacy.testing import Workspace

PLUGIN = "soulacy.contrib.postgres"
ENABLE = f"plugins:\n  enable: [{PLUGIN}]\n"
FAST = "leases: {ttl: 2s, heartbeat: 200ms, cancel_poll: 100ms}\n"
TOOLS_PY = '''
import time


def look(name: str) -> str:
    """Looks at something, slowly."""
    time.sleep(0.2)
    return f"saw {name}"
'''


def agent(workspace: Workspace) -> None:
    workspace.scripted_agent(
        "a",
        [{"tool": "look", "arguments": {"name": "sky"}, "id": "c1"}, {"text": "it is blue"}],
        tools=["tools.py:look"],
        repeat=True,
    )
    (workspace.path / "agents" / "a" / "tools.py").write_text(TOOLS_PY)


def rows(dsn: str, query: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        return list(conn.execute(query, args).fetchall())


def test_it_is_off_by_default_and_a_missing_dsn_is_an_error_naming_the_key(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel()
    assert not kernel.pm.has_plugin(PLUGIN)
    assert type(kernel.store()).__name__ == "SQLiteStore"
    with pytest.raises(ConfigError) as caught:
        make_kernel(plugins=[PLUGIN])
    message = str(caught.value)
    assert "postgres.dsn: not set" in message
    assert "SOULACY_POSTGRES__DSN" in message
    workspace.write_config(ENABLE + "postgres:\n  dsn_env: DATABASE_URL\n")
    with pytest.raises(ConfigError, match="the environment variable DATABASE_URL is not set"):
        make_kernel()


@pytest.mark.parametrize(
    ("section", "key", "expected"),
    [
        ("{dsn: 'postgresql://u:pw@h/d', pool_size: 0}", "postgres.pool_size", "between 1"),
        ("{dsn: 'host=h password=hunter22 nonsense'}", "postgres.dsn", "not a PostgreSQL"),
    ],
)
def test_settings_are_validated_without_echoing_the_dsn(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    section: str,
    key: str,
    expected: str,
) -> None:
    workspace.write_config(ENABLE + f"postgres: {section}\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    message = str(caught.value)
    assert f"{key}: {expected}" in message
    assert "config.yaml:" in message
    assert "hunter22" not in message
    assert "pw@" not in message


def test_the_dsn_comes_from_the_file_the_kernels_environment_or_a_named_variable(
    workspace: Workspace, make_kernel: Callable[..., Kernel], database: str
) -> None:
    workspace.write_config(ENABLE + f"postgres:\n  dsn: '{database}'\n  pool_size: 3\n")
    store = make_kernel().store()
    assert isinstance(store, PostgresStore)
    assert store.pool_size == 3
    workspace.write_config("")
    store = make_kernel(plugins=[PLUGIN], environ={"SOULACY_POSTGRES__DSN": database}).store()
    assert isinstance(store, PostgresStore)
    workspace.write_config(ENABLE + "postgres: {dsn_env: DATABASE_URL}\n")
    store = make_kernel(environ={"DATABASE_URL": database}).store()
    assert isinstance(store, PostgresStore)
    assert f"/{conninfo_to_dict(database)['dbname']}?" in store.describe()


async def test_a_run_keeps_its_history_run_and_proof_in_postgres(
    workspace: Workspace, make_kernel: Callable[..., Kernel], database: str
) -> None:
    workspace.write_config(ENABLE + f"postgres: {{dsn: '{database}'}}\n")
    agent(workspace)
    kernel = make_kernel()
    try:
        result = await kernel.run("a", "what colour?", session_id="S", run_id="R1")
        assert (result.status, result.reply) == ("completed", "it is blue")
        assert result.proof is not None
        history = await kernel.store().history("S")
        assert [e.role for e in history] == ["user", "assistant", "tool", "assistant"]
    finally:
        await kernel.aclose()
    assert not (workspace.path / "soulacy.db").exists()  # nothing went to SQLite
    assert rows(
        database,
        "SELECT role, content FROM conversation_history WHERE session_id = 'S' ORDER BY id",
    ) == [
        ("user", "what colour?"),
        ("assistant", ""),
        ("tool", "saw sky"),
        ("assistant", "it is blue"),
    ]
    assert rows(database, "SELECT run_id, status, attempt FROM runs") == [("R1", "completed", 1)]
    ((sha, receipts),) = rows(database, "SELECT sha256, receipts FROM proofs WHERE run_id = 'R1'")
    assert (sha, receipts) == (result.proof["sha256"], 1)
    ((token, owner),) = rows(database, "SELECT token, owner_id FROM leases")
    assert (token, owner) == (1, None)  # held during the run, released after


async def test_two_kernels_on_one_database_take_turns_on_a_conversation(
    workspace: Workspace, make_kernel: Callable[..., Kernel], database: str
) -> None:
    workspace.write_config(ENABLE + FAST + f"postgres: {{dsn: '{database}'}}\n")
    agent(workspace)
    one, two = make_kernel(), make_kernel()
    results = {}
    seen_holders: set[str] = set()
    key = ConversationKey("a", "S").lease_key()

    async def run(kernel: Kernel, run_id: str) -> None:
        results[run_id] = await kernel.run("a", f"from {run_id}", session_id="S", run_id=run_id)

    async def watch() -> None:
        while len(results) < 2:
            lease = await two.store().get_lease(key)
            if lease is not None:
                seen_holders.add(lease.holder)
            await trio.sleep(0.02)

    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, one, "R1")
                nursery.start_soon(run, two, "R2")
                nursery.start_soon(watch)
        assert {r.status for r in results.values()} == {"completed"}
        entries = await one.store().history("S")
    finally:
        await one.aclose()
        await two.aclose()
    # Each turn's four messages together: the lease kept the other kernel out until it ended.
    by_run = [e.run_id for e in entries]
    assert len(by_run) == 8
    assert by_run[:4] == [by_run[0]] * 4
    assert by_run[4:] == [by_run[4]] * 4
    assert {by_run[0], by_run[4]} == {"R1", "R2"}
    assert seen_holders == {"R1", "R2"}  # both held the one lease, one after the other
    ((token,),) = rows(database, "SELECT token FROM leases WHERE key = %s", key)
    assert token == 2


def test_the_command_line_migrates_and_a_database_down_is_a_clear_error(
    workspace: Workspace,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    database: str,
) -> None:
    agent(workspace)
    env = {"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1", "SOULACY_POSTGRES__DSN": database}
    reading = soulacy_cli(["-p", PLUGIN, "runs", "--json"], cwd=workspace.path, env=env)
    assert reading.returncode == 1
    assert "soulacy store migrate" in reading.stderr  # a read command creates nothing
    migrate = ["-p", PLUGIN, "store", "migrate", "--json"]
    first = soulacy_cli(migrate, cwd=workspace.path, env=env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) | {"store": None} == {
        "store": None,
        "from_version": 0,
        "version": SCHEMA_VERSION,
        "migrated": True,
    }
    again = soulacy_cli(migrate[:-1], cwd=workspace.path, env=env)
    assert again.returncode == 0, again.stderr
    assert f"is at schema version {SCHEMA_VERSION}: nothing to do" in again.stdout
    listed = soulacy_cli(["-p", PLUGIN, "runs", "--json"], cwd=workspace.path, env=env)
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])

    down = {**env, "SOULACY_POSTGRES__DSN": DEAD_DSN}
    failed = soulacy_cli(["-p", PLUGIN, "run", "a", "hi"], cwd=workspace.path, env=down)
    assert failed.returncode == 1
    # The run fails honestly, saying why; nothing of it could be stored.
    assert "status: failed (storage_error)" in failed.stdout
    assert (
        "error: PostgreSQL store postgresql://soulacy@127.0.0.1:1/soulacy: acquire lease"
        " failed: connection refused" in failed.stdout
    )
    assert "Traceback" not in failed.stderr + failed.stdout
    assert DEAD_PASSWORD not in failed.stderr + failed.stdout


def test_config_show_and_get_never_print_the_dsn(
    workspace: Workspace, soulacy_cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    agent(workspace)
    env = {"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1", "SOULACY_POSTGRES__DSN": DEAD_DSN}
    for args in (["config", "show"], ["config", "show", "--json"], ["config", "get", "postgres"]):
        shown = soulacy_cli(["-p", PLUGIN, *args], cwd=workspace.path, env=env)
        assert shown.returncode == 0, shown.stderr
        assert "dsn" in shown.stdout
        assert DEAD_PASSWORD not in shown.stdout + shown.stderr


def test_disabling_the_plugin_by_its_module_names_it_as_the_owner_of_its_keys(
    workspace: Workspace, soulacy_cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    env = {"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1"}
    off = ["-p", f"no:{PLUGIN}", "runs", "--json"]
    workspace.write_config(ENABLE)  # enabled, no postgres: key: disabled, SQLite serves
    back = soulacy_cli(off, cwd=workspace.path, env=env)
    assert (back.returncode, back.stdout.strip()) == (0, "[]"), back.stderr
    assert "no plugin named" not in back.stderr
    workspace.write_config(ENABLE + f"postgres:\n  dsn: '{DEAD_DSN}'\n")
    refused = soulacy_cli(off, cwd=workspace.path, env=env)
    assert refused.returncode != 0
    assert (
        f"postgres: this key belongs to the plugin {PLUGIN!r}, which is disabled (-p no:{PLUGIN})"
        in refused.stderr
    )
    assert DEAD_PASSWORD not in refused.stderr + refused.stdout
