"""What the per-run caches of decision 0051 must keep seeing.

A model's capacity, the progress detector's volatile fields and the memory store's
conversation of a running run are now worked out once and reused: a changed configuration, a
provider that learns its model's capacity, another model, another principal or another attempt
must still get its own answer.
"""

from __future__ import annotations

from collections.abc import Callable

from soulacy.kernel import Kernel
from soulacy.kernel.messages import Message
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import ProviderConfig
from soulacy.kernel.store import LeaseOwner, RunRecord
from soulacy.plugins.memory_store._store import MemoryStore
from soulacy.plugins.progress import soulacy_progress_detector
from soulacy.testing import Workspace

Make = Callable[..., Kernel]

FAKE = "llm:\n  providers:\n    fake:\n      type: scripted\n      context_window: 100\n"


async def test_a_changed_capacity_configuration_is_seen_by_the_next_ask(
    workspace: Workspace, make_kernel: Make
) -> None:
    workspace.write_config(FAKE)
    kernel = make_kernel()
    assert kernel.providers.capacity("fake", None) == ModelCapacity(100, None)
    assert kernel.providers.capacity("fake", None) == ModelCapacity(100, None)  # the cached one
    kernel.update_config({"llm.providers.fake.context_window": 200})
    assert kernel.providers.capacity("fake", None) == ModelCapacity(200, None)
    kernel.update_config({"llm.providers.fake.max_output_tokens": 7})
    assert kernel.providers.capacity("fake", "m") == ModelCapacity(200, 7)
    await kernel.aclose()


async def test_a_provider_that_learns_its_capacity_is_asked_every_time(
    workspace: Workspace, make_kernel: Make
) -> None:
    workspace.write_config("llm:\n  providers:\n    fake:\n      type: scripted\n")
    kernel = make_kernel()
    provider = kernel.providers.provider("fake")
    assert kernel.providers.capacity("fake", None) == ModelCapacity()
    provider._capacity = ModelCapacity(300, 30)  # type: ignore[attr-defined]
    assert kernel.providers.capacity("fake", None) == ModelCapacity(300, 30)
    provider._capacity = ModelCapacity(400, None)  # type: ignore[attr-defined]
    assert kernel.providers.capacity("fake", "other") == ModelCapacity(400, None)
    assert kernel.providers.capacity("fake", None) == ModelCapacity(400, None)
    provider._capacity = None  # type: ignore[attr-defined]
    assert kernel.providers.capacity("fake", None) == ModelCapacity()
    await kernel.aclose()


async def test_an_unknown_provider_stays_unknown_once_another_is_cached(
    workspace: Workspace, make_kernel: Make
) -> None:
    workspace.write_config(FAKE)
    kernel = make_kernel()
    assert kernel.providers.capacity("fake", None) == ModelCapacity(100, None)
    assert kernel.providers.capacity("nope", None) is None
    assert kernel.providers.capacity(None, None) is None  # no llm.default.provider
    await kernel.aclose()


class _Run:
    """What the detector hook reads of a run: its policy's no-progress limit."""

    class policy:
        class no_progress_limit:
            value = 3


async def test_changed_volatile_fields_reach_the_next_runs_detector(
    workspace: Workspace, make_kernel: Make
) -> None:
    kernel = make_kernel(plugins=["no:sqlite_store"])
    first = soulacy_progress_detector(kernel=kernel, run=_Run)  # type: ignore[arg-type]
    again = soulacy_progress_detector(kernel=kernel, run=_Run)  # type: ignore[arg-type]
    assert first.volatile is again.volatile  # one set for every run of one configuration
    assert "zz" not in first.volatile
    kernel.update_config({"progress.volatile_fields": ["zz"]})
    changed = soulacy_progress_detector(kernel=kernel, run=_Run)  # type: ignore[arg-type]
    assert changed.volatile == frozenset({"zz"})
    other = make_kernel(plugins=["no:sqlite_store"])  # another kernel, the same workspace file
    other.update_config({"progress.volatile_fields": ["id", "zz"]})
    assert soulacy_progress_detector(  # type: ignore[arg-type]
        kernel=other, run=_Run
    ).volatile == frozenset({"id", "zz"})
    assert soulacy_progress_detector(  # type: ignore[arg-type]
        kernel=kernel, run=_Run
    ).volatile == frozenset({"zz"})
    await kernel.aclose()
    await other.aclose()


async def test_two_principals_of_one_session_keep_their_own_history() -> None:
    store = MemoryStore()
    alice = await store.start_run(RunRecord("r1", "a", "s", principal="alice"))
    bob = await store.start_run(RunRecord("r2", "a", "s", principal="bob"))
    for turn in range(2):
        await store.record_turn(alice, [Message("user", f"alice {turn}")], [])
        await store.record_turn(bob, [Message("user", f"bob {turn}")], [])
    assert [m.content for m in await store.load_history("a", "s", "alice")] == [
        "alice 0",
        "alice 1",
    ]
    assert [m.content for m in await store.load_history("a", "s", "bob")] == ["bob 0", "bob 1"]
    assert [e.principal for e in await store.history("s", principal="bob")] == ["bob", "bob"]


async def test_a_retry_and_an_equal_record_write_to_the_same_conversation() -> None:
    store = MemoryStore()
    lease = (await store.acquire_lease("k", LeaseOwner("me", 1, "h"), 30.0, holder="r")).lease
    first = await store.start_run(RunRecord("r", "a", "s", principal="p"), lease)
    await store.record_turn(first, [Message("user", "one")], [], lease)
    await store.finish_run("r", {"status": "failed"}, lease)
    retry = await store.start_run(RunRecord("r", "a", "s", principal="p"), lease)
    await store.record_turn(retry, [Message("user", "two")], [], lease)
    # A record equal to the running one but another object (a caller's copy) finds it too.
    await store.record_turn(RunRecord("r", "a", "s", principal="p"), [Message("user", "3")], [])
    # Another conversation under the same run id (a caller's own record) is its own.
    await store.record_turn(RunRecord("r", "a", "t", principal="p"), [Message("user", "t")], [])
    assert [m.content for m in await store.load_history("a", "s", "p")] == ["one", "two", "3"]
    assert [m.content for m in await store.load_history("a", "t", "p")] == ["t"]
    attempts = [e.attempt for e in await store.history("s", principal="p")]
    assert attempts == [1, 2, 1]
    await store.finish_run("r", {"status": "completed"}, lease)
    assert store._writing == {}  # a finished run keeps nothing of this


async def test_a_bare_provider_type_is_its_defaults_until_configured(
    workspace: Workspace, make_kernel: Make
) -> None:
    kernel = make_kernel()
    assert kernel.providers.config("scripted") == ProviderConfig(type="scripted")
    assert kernel.providers.config("scripted") is kernel.providers.config("scripted")
    kernel.update_config({"llm.providers.scripted": {"type": "scripted", "context_window": 9}})
    assert kernel.providers.config("scripted").context_window == 9  # configured wins
    assert kernel.providers.capacity("scripted", None) == ModelCapacity(9, None)
    await kernel.aclose()


async def test_a_token_quota_set_between_runs_stops_the_next_run(
    workspace: Workspace, make_kernel: Make
) -> None:
    """The costs plugin keeps "is a shared limit set" with the configuration it read: a quota
    set later applies to the next run, and removed again, the run after is unlimited."""
    workspace.write_config("runtime:\n  no_progress_limit: 0\n")
    loop = [{"tool": "nope", "usage": {"input": 1000, "output": 1000}}] * 3 + [{"text": "done"}]
    workspace.scripted_agent("a", loop, repeat=True, max_turns=-1, budget={"max_tokens": 0})
    kernel = make_kernel(plugins=["no:sqlite_store"])
    assert (await kernel.run("a", "go")).status == "completed"
    kernel.update_config({"rate_limit.tokens_per_minute": 3000})
    stopped = await kernel.run("a", "go")
    assert (stopped.status, stopped.incomplete_reason) == ("incomplete", "token_quota_per_minute")
    kernel.update_config({"rate_limit.tokens_per_minute": 0})
    assert (await kernel.run("a", "go")).status == "completed"
    await kernel.aclose()
