"""Every builtin implementation passes the conformance kit of its concern: a real store runs
each check as a test of its own (``only=``), so that a failure names one check and the checks
run in parallel workers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio
from _support.http_server import KEYS
from _support.openai_server import FakeOpenAI, serve_asgi, text, tool_call

from soulacy.kernel import Kernel, open_kernel
from soulacy.kernel.messages import ToolSpec
from soulacy.kernel.providers import ProviderConfig
from soulacy.plugins.compaction import ExtractiveCompactor
from soulacy.plugins.http.testing import HttpAdapter
from soulacy.plugins.memory_store import MemoryStore
from soulacy.plugins.openai import OpenAIProvider
from soulacy.plugins.progress import SignatureDetector
from soulacy.plugins.scripted import Script, ScriptedProvider, ScriptStep, ScriptToolCall
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.testing import (
    CHECKPOINT_CHECK_NAMES,
    COMPACTOR_CHECK_NAMES,
    PROCESS_CHECK_NAMES,
    STORE_CHECK_NAMES,
    Workspace,
    check_checkpoint_store,
    check_compactor,
    check_progress_detector,
    check_provider,
    check_store,
    check_store_processes,
    check_transport,
)

TOOLS = [ToolSpec("weather", "the weather", {"type": "object", "properties": {}})]
# The checks of a store that works (the memory store has no storage to break).
WORKING = [name for name in STORE_CHECK_NAMES if name != "failures_raise"]
WORKING_CHECKPOINTS = [name for name in CHECKPOINT_CHECK_NAMES if "failures" not in name]


def sqlite_stores(tmp_path: Path, prefix: str) -> Callable[[], SQLiteStore]:
    counter = iter(range(100))
    return lambda: SQLiteStore(tmp_path / f"{prefix}{next(counter)}.db")


def not_a_database(tmp_path: Path) -> Callable[[], SQLiteStore]:
    """A SQLite store on a file that is not a database: every call fails."""
    path = tmp_path / "not-a-database.db"
    path.write_bytes(b"this is not a SQLite file\n" * 200)
    return lambda: SQLiteStore(path)


@pytest.mark.parametrize("check", WORKING)
async def test_the_memory_store_passes_the_store_kit(check: str) -> None:
    await check_store(MemoryStore, only=check)


@pytest.mark.parametrize("check", STORE_CHECK_NAMES)
async def test_the_sqlite_store_passes_the_store_kit(check: str, tmp_path: Path) -> None:
    await check_store(sqlite_stores(tmp_path, "s"), failing=not_a_database(tmp_path), only=check)


@pytest.mark.parametrize("check", WORKING_CHECKPOINTS)
async def test_the_memory_store_passes_the_checkpoint_store_kit(check: str) -> None:
    await check_checkpoint_store(MemoryStore, only=check)


@pytest.mark.parametrize("check", CHECKPOINT_CHECK_NAMES)
async def test_the_sqlite_store_passes_the_checkpoint_store_kit(check: str, tmp_path: Path) -> None:
    failing = not_a_database(tmp_path)
    await check_checkpoint_store(sqlite_stores(tmp_path, "c"), failing=failing, only=check)


def open_sqlite(path: str) -> SQLiteStore:
    """The opener of the multi-process kit: child processes call it with the file's path."""
    return SQLiteStore(Path(path))


def test_the_multi_process_checks_are_the_documented_ones() -> None:
    assert PROCESS_CHECK_NAMES == (
        "exclusive",
        "expiry_takeover",
        "stale_writer_fenced",
        "durability",
        "no_interleaving",
        "kill_takeover",
        "counters",
        "cancel_requests",
        "run_events",
        "run_id_race",
    )


@pytest.mark.processes
@pytest.mark.parametrize("check", PROCESS_CHECK_NAMES)
async def test_the_sqlite_store_passes_the_multi_process_kit(check: str, tmp_path: Path) -> None:
    result = await check_store_processes(
        f"{__name__}:open_sqlite", str(tmp_path / "shared.db"), only=check
    )
    assert result.skipped is None, result.skipped
    assert result.not_run == ()
    assert result.passed == (check,)


def test_the_memory_store_is_skipped_by_the_multi_process_kit() -> None:
    # Not a trio test: pytest reports the reason of a skip raised outside trio's nursery.
    result = trio.run(check_store_processes, "soulacy.plugins.memory_store:MemoryStore")
    assert result.passed == ()
    assert result.skipped is not None
    assert "multi_process = False" in result.skipped
    pytest.skip(result.skipped)


def test_the_signature_detector_passes_the_progress_kit() -> None:
    check_progress_detector(lambda limit: SignatureDetector(limit))


def test_the_extractive_compactor_passes_the_compactor_kit() -> None:
    check_compactor(ExtractiveCompactor)


def test_a_compactor_that_cuts_nothing_fails_the_kit() -> None:
    class Lazy:
        def compact(self, messages, allowance, tools=()):  # type: ignore[no-untyped-def]
            return messages

    with pytest.raises(AssertionError, match="compactor check keeps"):
        check_compactor(Lazy)
    check_compactor(Lazy, only="unchanged")  # the one check it passes, run alone
    with pytest.raises(AssertionError, match="compactor check oversized"):
        check_compactor(Lazy, only=["unchanged", "oversized"])


def test_the_compactor_kit_refuses_a_check_it_has_not() -> None:
    unknown = "compactor kit: only= selects no check named 'keeps_what_matters';"
    with pytest.raises(ValueError, match=unknown) as info:
        check_compactor(ExtractiveCompactor, only="keeps_what_matters")
    assert all(name in str(info.value) for name in COMPACTOR_CHECK_NAMES), info.value


async def test_the_scripted_provider_passes_the_provider_kit() -> None:
    steps = [
        ScriptStep(text="Hello there, friend."),
        ScriptStep(tool_calls=[ScriptToolCall("weather", {}, "c1")]),
    ]
    provider = ScriptedProvider("s", Script(steps))
    reply = await check_provider(provider, tools=TOOLS)
    assert reply.message.content == "Hello there, friend."
    reply = await check_provider(provider, tools=TOOLS)
    assert reply.message.tool_calls[0].name == "weather"


@pytest.fixture
async def openai_url(nursery: trio.Nursery) -> AsyncIterator[tuple[str, FakeOpenAI]]:
    server = FakeOpenAI()
    url, shutdown = await serve_asgi(nursery, server.app)
    yield url + "/v1", server
    shutdown.set()


async def test_the_openai_provider_passes_the_provider_kit(
    openai_url: tuple[str, FakeOpenAI],
) -> None:
    url, server = openai_url
    server.answers += [text("hi"), tool_call("c1", "weather", "{}")]
    for _ in range(2):
        provider = OpenAIProvider("o", ProviderConfig(type="openai", base_url=url))
        await check_provider(provider, tools=TOOLS, stream=False)


async def test_the_http_transport_passes_the_transport_kit(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(f"server:\n  port: 0\n  api_keys: {{alice: {KEYS['alice']}}}\n")
    workspace.scripted_agent("echo", [{"text": "hello"}], repeat=True)
    async with open_kernel(kernel=make_kernel()) as kernel:
        alice = {"Authorization": f"Bearer {KEYS['alice']}"}
        await check_transport(HttpAdapter(kernel.started["http"][0], headers=alice), "echo")
