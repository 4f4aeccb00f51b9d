"""``check_store(factory)``: the conformance kit every store implementation runs on itself.

One store object plays every role (``soulacy_store``), so one kit checks them all: history,
runs and their attempts, tool records, proofs, checkpoints, plugin state, leases with their
fencing tokens and queues, cancellation requests and counters, each check on a fresh store.
These checks run in one process; :func:`soulacy.testing.check_store_processes` adds
the checks that need several processes on one store.

Every failure is an AssertionError that names the check and says what was expected and what
came back; an unexpected exception inside a check is reported the same way. ``only=`` runs
the checks it names (of :data:`STORE_CHECK_NAMES`) and no other, so each can run alone.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import attrs
import trio

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    AlreadyDecided,
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    CheckpointStore,
    Ending,
    Lease,
    LeaseLost,
    LeaseOwner,
    Pruned,
    RetentionLimits,
    RunEvent,
    RunEventBatch,
    RunIdTaken,
    RunRecord,
    StateRow,
    StorageError,
    Store,
    ToolRecord,
    takes_ending,
    takes_state,
)
from soulacy.plugins.proofkit import RECEIPT_FIELD_CHARS, make_proof

# A factory of fresh stores: a store, or an awaitable of one (an async open)
StoreFactory = Callable[[], Store | Awaitable[Store]]
CheckpointStoreFactory = Callable[[], CheckpointStore | Awaitable[CheckpointStore]]
SHOWN_CHARS = 400  # a failure shows at most this much of a value
SHORT_TTL = 0.1  # seconds: a lease that expires within a check
EXPIRY_WAIT = 0.35  # seconds waited for a SHORT_TTL lease (or queue place) to lapse
LONG_TTL = 60.0  # seconds: a lease that does not expire within a check
CLOCK_SLACK = 5.0  # seconds of tolerance when comparing the store's times


def show(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters (a kit's values can be large)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text)} characters]"


def expect(got: Any, expected: Any, what: str) -> None:
    """Fail with ``what: expected E, got G`` unless ``got == expected``."""
    if got != expected:
        raise AssertionError(f"{what}: expected {show(expected)}, got {show(got)}")


def expect_that(ok: bool, what: str, expected: str, got: Any) -> None:
    """Fail with ``what: expected <expected>, got G`` unless ``ok``."""
    if not ok:
        raise AssertionError(f"{what}: expected {expected}, got {show(got)}")


async def expect_storage_error(what: str, call: Callable[[], Awaitable[Any]]) -> None:
    """A store whose storage fails raises StorageError: a failure is never read as no data."""
    try:
        got = await call()
    except StorageError:
        return
    except Exception as exc:
        raise AssertionError(
            f"{what} on a failing store: expected StorageError,"
            f" got {type(exc).__name__}: {show(str(exc))}"
        ) from exc
    raise AssertionError(
        f"{what} on a failing store: expected StorageError, got the answer {show(got)}"
        " (a failure must never look like success or no data)"
    )


async def expect_ending_lease_lost(
    store: Any,
    run: RunRecord,
    turn: Sequence[Message],
    tools: Sequence[ToolRecord],
    ending: Ending,
    stale: Lease,
    current: Lease | None,
) -> None:
    """A run's end under ``stale``, with its last turn and without one, raises LeaseLost."""
    await expect_lease_lost(
        "record_turn(ending=)",
        lambda: store.record_turn(run, turn, tools, stale, ending=ending),
        stale,
        current,
    )
    await expect_lease_lost(
        "record_turn([], [], ending=)",
        lambda: store.record_turn(run, [], [], stale, ending=ending),
        stale,
        current,
    )


async def expect_lease_lost(
    what: str, call: Callable[[], Awaitable[Any]], stale: Lease, current: Lease | None
) -> None:
    """A write under ``stale`` raises LeaseLost naming its key and token and the lease now
    current (``current``, None when released)."""
    try:
        got = await call()
    except LeaseLost as exc:
        expect(
            (exc.key, exc.token),
            (stale.key, stale.token),
            f"{what} under a lost lease: the LeaseLost's (key, token)",
        )
        expect(
            who(exc.current),
            who(current),
            f"{what} under a lost lease: the LeaseLost's current lease (key, owner, token, holder)",
        )
        return
    except Exception as exc:
        raise AssertionError(
            f"{what} under a lost lease (token {stale.token}): expected LeaseLost,"
            f" got {type(exc).__name__}: {show(str(exc))}"
        ) from exc
    raise AssertionError(
        f"{what} under a lost lease (token {stale.token}): expected LeaseLost, got the answer"
        f" {show(got)} (a writer whose lease was taken over must be stopped)"
    )


def who(lease: Lease | None) -> tuple[str, str, int, str] | None:
    """What identifies a lease: (key, owner id, token, holder)."""
    if lease is None:
        return None
    return (lease.key, lease.owner.id, lease.token, lease.holder)


def dead_pid() -> int:
    """A pid that certainly belonged to a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def this_host() -> str:
    """The host name this process's leases carry (``SOULACY_HOST_ID``, else the host name)."""
    return LeaseOwner.current("kit-host").host


def live_owner(owner_id: str) -> LeaseOwner:
    """An owner in this very process: alive, never provably gone."""
    return LeaseOwner.current(owner_id)


def gone_owner(owner_id: str) -> LeaseOwner:
    """An owner on this host whose process has exited: provably gone."""
    return LeaseOwner(owner_id, dead_pid(), this_host())


def far_owner(owner_id: str) -> LeaseOwner:
    """An owner on another host: never provably gone from here."""
    return LeaseOwner(owner_id, 1, "another-host.invalid")


async def _make(factory: StoreFactory | CheckpointStoreFactory) -> Any:
    store = factory()
    return await store if inspect.isawaitable(store) else store


async def _close(store: Any) -> None:
    close = getattr(store, "aclose", None)
    if close is not None:
        await close()


def run_named(name: str, check: Callable[[], Any]) -> Any:
    """``check()``, a failure (or an unexpected exception) reported under ``name``."""
    try:
        return check()
    except AssertionError as exc:
        raise AssertionError(f"{name}: {exc}") from exc
    except Exception as exc:
        raise AssertionError(
            f"{name}: a call: expected no exception, got {type(exc).__name__}: {exc}"
        ) from exc


def check_name(check: Callable[..., Any]) -> str:
    """A check's name: its function's name without the leading underscore."""
    return check.__name__.strip("_")


def select_checks(
    kit: str, names: Sequence[str], only: str | Iterable[str] | None
) -> tuple[str, ...]:
    """The names of the checks ``only`` selects among ``names``, in the kit's order (every
    name when ``only`` is None). A name the kit has not, or no name at all, is a ValueError
    listing the kit's names: a selection never silently runs nothing."""
    if only is None:
        return tuple(names)
    wanted = [only] if isinstance(only, str) else list(only)
    unknown = [name for name in wanted if name not in names]
    if unknown or not wanted:
        what = f"no check named {', '.join(map(repr, unknown))}" if unknown else "no check"
        raise ValueError(f"{kit} kit: only= selects {what}; its checks are: {', '.join(names)}")
    return tuple(name for name in names if name in wanted)


async def run_checks(
    kind: str,
    factory: StoreFactory | CheckpointStoreFactory,
    checks: Sequence[Callable[[Any], Awaitable[None]]],
) -> None:
    """Each check on a fresh store; a failure names the kit and the check."""
    for check in checks:
        name = check_name(check)
        store = await _make(factory)
        try:
            await check(store)
        except AssertionError as exc:
            raise AssertionError(f"{kind} check {name}: {exc}") from exc
        except Exception as exc:
            raise AssertionError(
                f"{kind} check {name}: a call of the store: expected no exception,"
                f" got {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            await _close(store)


async def _leased_run(store: Any, run: RunRecord, owner: LeaseOwner) -> tuple[RunRecord, Lease]:
    """Start ``run`` under a lease of its own, held by it (it reads as running)."""
    grant = await store.acquire_lease(f"run:{run.run_id}", owner, LONG_TTL, holder=run.run_id)
    expect_that(grant.acquired, f"a free lease for {run.run_id}", "acquired", grant)
    stored = await store.start_run(run, grant.lease)
    return stored, grant.lease


def run_metadata(run: RunRecord, status: str, **extra: Any) -> dict[str, Any]:
    """The reply metadata of ``run`` ending with ``status``, as the kits write it."""
    return {
        "run_id": run.run_id,
        "agent_id": run.agent_id,
        "session_id": run.session_id,
        "status": status,
        "verification": "unverified",
        "incomplete_reason": None,
        **extra,
    }


def _contents(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages]


async def _history_round_trip(store: Any) -> None:
    run = RunRecord("kit-r1", "agent", "s1", user_id="u")
    stored = await store.start_run(run)
    expect_that(
        isinstance(stored, RunRecord),
        "start_run's answer",
        "the RunRecord as stored",
        stored,
    )
    expect(
        (stored.run_id, stored.agent_id, stored.status, stored.attempt, stored.lease_key),
        ("kit-r1", "agent", "running", 1, None),
        "start_run's answer of a new run id without a lease: (run_id, agent_id, status,"
        " attempt, lease_key)",
    )
    call = ToolCall("c1", "read", {"path": "a.txt"})
    messages = [
        Message("user", "hello"),
        Message("assistant", "", (call,)),
        Message("tool", "contents", tool_call_id="c1", name="read"),
        Message("assistant", "done"),
    ]
    await store.record_turn(run, messages[:2], [])
    await store.record_turn(
        run,
        messages[2:],
        [ToolRecord("kit-r1", "c1", "read", {"path": "a.txt"}, "contents", False)],
    )
    expect(
        await store.load_history("agent", "s1", None, "u"),
        messages,
        "load_history returns the conversation's messages as recorded, oldest first",
    )
    expect(await store.load_history("agent", "other", None, "u"), [], "another session's history")
    expect(await store.load_history("other-agent", "s1", None, "u"), [], "another agent's history")
    expect(await store.load_history("agent", "s1"), [], "another user's (None) history")
    expect(await store.load_history("agent", "s1", None, "v"), [], "another user's history")
    entries = await store.history("s1")
    expect(
        [e.role for e in entries],
        ["user", "assistant", "tool", "assistant"],
        "history() entries, oldest first",
    )
    expect({e.run_id for e in entries}, {"kit-r1"}, "every entry names its run")
    expect({e.user_id for e in entries}, {"u"}, "every entry names its user")
    expect(
        [e.metadata for e in entries],
        [None] * 4,
        "entries' metadata before finish_run (it arrives with finish_run)",
    )
    expect([e.message() for e in entries], messages, "history() entries hold the recorded messages")
    expect([e.attempt for e in entries], [1] * 4, "the attempt of a first attempt's entries")


async def _history_by_agent(store: Any) -> None:
    """history(session, agent_id) holds that agent's entries only."""
    for run_id, agent in (("kit-a1", "writer"), ("kit-a2", "reviewer")):
        run = RunRecord(run_id, agent, "shared-session")
        await store.start_run(run)
        await store.record_turn(run, [Message("user", f"to {agent}")], [])
    writer = await store.history("shared-session", "writer")
    expect([e.content for e in writer], ["to writer"], "history(session, agent_id='writer')")
    expect({e.agent_id for e in writer}, {"writer"}, "the agent_id of history(agent_id=...)")
    everyone = await store.history("shared-session")
    expect(
        [e.content for e in everyone],
        ["to writer", "to reviewer"],
        "history(session) of every agent, oldest first",
    )
    expect(await store.history("shared-session", "nobody"), [], "history of an unknown agent")
    expect(await store.history("no-such-session"), [], "history of an unknown session")


async def _conversations_by_principal(store: Any) -> None:
    """The same agent and session id used by two principals are two conversations."""
    alice = RunRecord("kit-p1", "agent", "shared", principal="alice")
    bob = RunRecord("kit-p2", "agent", "shared", principal="bob")
    nobody = RunRecord("kit-p3", "agent", "shared")
    for run, text in ((alice, "password hunter2"), (bob, "hello"), (nobody, "local")):
        await store.start_run(run)
        await store.record_turn(run, [Message("user", text)], [])
    expect(
        _contents(await store.load_history("agent", "shared", "bob")),
        ["hello"],
        "load_history of bob's conversation holds only bob's messages",
    )
    expect(
        _contents(await store.load_history("agent", "shared", "alice")),
        ["password hunter2"],
        "load_history of alice's conversation holds only alice's messages",
    )
    expect(
        _contents(await store.load_history("agent", "shared")),
        ["local"],
        "load_history of no principal (None is a principal of its own, not a wildcard)",
    )
    expect(
        await store.load_history("agent", "shared", "mallory"), [], "an unknown principal's history"
    )
    alice_entries = await store.history("shared", principal="alice")
    expect(
        [e.content for e in alice_entries],
        ["password hunter2"],
        "history(principal='alice') holds only alice's entries",
    )
    expect({e.principal for e in alice_entries}, {"alice"}, "entries name their principal")
    expect(
        [e.content for e in await store.history("shared", principal=None)],
        ["local"],
        "history(principal=None) holds only the entries of no principal",
    )
    expect(
        [e.content for e in await store.history("shared", "agent", "bob")],
        ["hello"],
        "history(session, agent, principal='bob')",
    )
    every = await store.history("shared", principal=EVERY_PRINCIPAL)
    expect(
        [e.content for e in every],
        ["password hunter2", "hello", "local"],
        "history() of every principal, oldest first",
    )


async def _metadata_by_run_id(store: Any) -> None:
    first, second = RunRecord("kit-m1", "agent", "s2"), RunRecord("kit-m2", "agent", "s2")
    await store.start_run(first)
    second, _ = await _leased_run(store, second, live_owner("kit-kernel"))
    for run in (first, second):
        await store.record_turn(
            run, [Message("user", run.run_id), Message("assistant", "reply")], []
        )
    metadata = run_metadata(first, "incomplete", incomplete_reason="max_turns")
    await store.finish_run("kit-m1", metadata)
    entries = await store.history("s2")
    expect(
        [(e.run_id, e.content) for e in entries],
        [("kit-m1", "kit-m1"), ("kit-m1", "reply"), ("kit-m2", "kit-m2"), ("kit-m2", "reply")],
        "the session's entries, oldest first",
    )
    for entry in entries:
        if entry.run_id == "kit-m1":
            expect(
                dict(entry.metadata or {}),
                metadata,
                "the metadata of the finished run's entries (finish_run attaches it)",
            )
        else:
            expect(
                entry.metadata,
                None,
                "the metadata of another run's entries (finishing one run must not touch"
                " another run's entries)",
            )
    stored = await store.get_run("kit-m1")
    expect_that(stored is not None, "get_run of a finished run", "its RunRecord", stored)
    expect(
        (stored.status, stored.incomplete_reason, stored.verification),
        ("incomplete", "max_turns", "unverified"),
        "the finished run's (status, incomplete_reason, verification)",
    )
    expect_that(stored.finished_at is not None, "the finished run's finished_at", "a time", stored)
    still_running = await store.get_run("kit-m2")
    expect_that(
        still_running is not None, "get_run of a running run", "its RunRecord", still_running
    )
    expect(
        still_running.status,
        "running",
        "the status of a run not finished, whose lease it holds",
    )
    expect(await store.get_run("kit-none"), None, "get_run of an unknown run id")


async def _runs_listing(store: Any) -> None:
    for n in range(3):
        run = RunRecord(f"kit-l{n}", "lister", f"s-l{n}", "u", "p", started_at=1000.0 + n)
        await store.start_run(run)
    await store.start_run(RunRecord("kit-other", "other", "s-o", started_at=2000.0))
    listed = await store.list_runs(limit=2, agent_id="lister")
    expect(
        [r.run_id for r in listed],
        ["kit-l2", "kit-l1"],
        "list_runs(limit=2, agent_id='lister'): newest first, limited, that agent's",
    )
    expect(
        (listed[0].agent_id, listed[0].session_id, listed[0].user_id, listed[0].principal),
        ("lister", "s-l2", "u", "p"),
        "a listed run's (agent_id, session_id, user_id, principal)",
    )
    expect(
        [r.run_id for r in await store.list_runs()],
        ["kit-other", "kit-l2", "kit-l1", "kit-l0"],
        "list_runs() of every agent, newest first",
    )
    await store.start_run(RunRecord("kit-q", "lister", "s-q", principal="q", started_at=3000.0))
    expect(
        [r.run_id for r in await store.list_runs(limit=2, principal="p")],
        ["kit-l2", "kit-l1"],
        "list_runs(limit=2, principal='p'): that principal's only (a newer run of 'q' hides none)",
    )
    expect(
        [r.run_id for r in await store.list_runs(principal=None)],
        ["kit-other"],
        "list_runs(principal=None): the runs without a principal",
    )
    expect(
        [r.run_id for r in await store.list_runs(agent_id="lister", principal="q")],
        ["kit-q"],
        "list_runs(agent_id='lister', principal='q'): both filters",
    )


async def _tool_records_replay(store: Any) -> None:
    run = RunRecord("kit-t1", "agent", "s3")
    await store.start_run(run)
    records = [
        ToolRecord("kit-t1", "ok", "read", {"p": 1}, "fine", False),
        ToolRecord("kit-t1", "bad", "write", {"p": 2}, "error: disk full", True),
    ]
    await store.record_turn(run, [], records[:1])
    await store.record_turn(run, [Message("user", "and?")], records[1:])
    other = RunRecord("kit-t2", "agent", "s3")
    await store.start_run(other)
    await store.record_turn(other, [], [ToolRecord("kit-t2", "ok", "read", {}, "other", False)])
    loaded = await store.load_tool_records("kit-t1")
    expect(sorted(loaded), ["bad", "ok"], "the call ids of load_tool_records('kit-t1')")
    for record in records:
        got = loaded[record.call_id]
        expect(
            (got.run_id, got.call_id, got.name, dict(got.arguments), got.content, got.is_error),
            (
                record.run_id,
                record.call_id,
                record.name,
                dict(record.arguments),
                record.content,
                record.is_error,
            ),
            f"the tool record {record.call_id!r} as recorded",
        )
    expect(
        (await store.load_tool_records("kit-t2"))["ok"].content,
        "other",
        "another run's tool record of the same call id is its own",
    )
    expect(await store.load_tool_records("kit-none"), {}, "tool records of an unknown run")


async def _proofs(store: Any) -> None:
    run = RunRecord("kit-p1", "agent", "s4")
    await store.start_run(run)
    many = [ToolRecord("kit-p1", f"c{n}", "step", {"i": n}, f"ok-{n}", False) for n in range(1500)]
    long = ToolRecord("kit-p1", "long", "read", {}, "x" * (RECEIPT_FIELD_CHARS + 10), False)
    await store.record_turn(run, [], [*many, long])
    proof = await store.finalize_proof("kit-p1", run_metadata(run, "completed"))
    expect(proof.receipts, 1501, "the proof's receipt count (every receipt is kept: no cap)")
    expect(
        proof.sha256,
        hashlib.sha256(proof.body.encode()).hexdigest(),
        "the proof's sha256 (of its body, UTF-8)",
    )
    body = json.loads(proof.body)
    expect(len(body["receipts"]), 1501, "the receipts in the proof's body (no cap)")
    expect(
        [r["call_id"] for r in body["receipts"][:3]], ["c0", "c1", "c2"], "receipts in call order"
    )
    expect(body["receipts"][-1]["call_id"], "long", "the last receipt")
    last = body["receipts"][-1]
    expect(last.get("truncated", {}).get("result"), True, "a receipt's cut result says so")
    expect_that(
        len(last["result"]) < RECEIPT_FIELD_CHARS + 60,
        "the length of a receipt's long result",
        f"bounded near RECEIPT_FIELD_CHARS ({RECEIPT_FIELD_CHARS})",
        len(last["result"]),
    )
    expect(body["status"], "completed", "the proof's status")
    # The proof format is one for every store (soulacy.plugins.proofkit), so that a proof copied
    # to another store still verifies: the body is make_proof's, byte for byte.
    kept = await store.load_tool_records("kit-p1")
    in_order = [kept[r["call_id"]] for r in body["receipts"] if r["call_id"] in kept]
    made = make_proof("kit-p1", run_metadata(run, "completed"), in_order)
    expect_that(
        proof.body == made.body,
        "the proof's body",
        "make_proof's of the run's tool records (soulacy.plugins.proofkit), byte for byte",
        proof.body[:SHOWN_CHARS],
    )
    again = await store.finalize_proof("kit-p1", run_metadata(run, "failed"))
    expect(again.sha256, proof.sha256, "finalizing again returns the stored proof (it is final)")
    stored = await store.get_proof("kit-p1")
    expect(stored and stored.sha256, proof.sha256, "get_proof returns the finalized proof")
    await store.start_run(run)  # a retry of the same run id: a new attempt
    expect(await store.get_proof("kit-p1"), None, "get_proof after a retry started (set aside)")
    retried = await store.finalize_proof("kit-p1", run_metadata(run, "failed"))
    expect_that(
        retried.sha256 != proof.sha256,
        "the retry's proof",
        f"a proof of its own (not the first attempt's {proof.sha256})",
        retried.sha256,
    )
    expect(json.loads(retried.body)["status"], "failed", "the retry's proof status")
    stored = await store.get_proof("kit-p1")
    expect(stored and stored.sha256, retried.sha256, "get_proof returns the retry's proof")
    expect(await store.get_proof("kit-none"), None, "get_proof of an unknown run id")


async def _concurrent_finalization(store: Any) -> None:
    runs = [RunRecord(f"kit-c{n}", "agent", f"s-c{n}") for n in range(32)]
    for run in runs:
        await store.start_run(run)
        await store.record_turn(run, [], [ToolRecord(run.run_id, "c", "t", {}, "r", False)])
    results: dict[str, list[str]] = {}

    async def finalize(run: RunRecord, status: str) -> None:
        proof = await store.finalize_proof(run.run_id, run_metadata(run, status))
        results.setdefault(run.run_id, []).append(proof.sha256)

    async with trio.open_nursery() as nursery:  # 64 finalizations: each run twice at once
        for run in runs:  # with different endings: only one of them may be stored
            nursery.start_soon(finalize, run, "completed")
            nursery.start_soon(finalize, run, "failed")
    expect(sorted(results), sorted(r.run_id for r in runs), "the runs finalized")
    for run in runs:
        shas = results[run.run_id]
        expect(len(shas), 2, f"finalizations of {run.run_id} that returned")
        expect_that(
            len(set(shas)) == 1,
            f"the proofs two concurrent finalizations of {run.run_id} returned",
            "one and the same proof",
            shas,
        )
        stored = await store.get_proof(run.run_id)
        expect(stored and stored.sha256, shas[0], f"the stored proof of {run.run_id}")


# -- the store's kind ----------------------------------------------------------------------------


async def _declares_multi_process(store: Any) -> None:
    """``multi_process`` says whether several processes may share the store."""
    declared = getattr(type(store), "multi_process", None)
    expect_that(
        isinstance(declared, bool),
        "the store class's multi_process attribute",
        "True or False (whether several processes may share the store)",
        declared,
    )


# -- checkpoints and plugin state -----------------------------------------------------------------


def _steps(saved: Sequence[Checkpoint]) -> list[tuple[str, str]]:
    return [(c.step_id, c.status) for c in saved]


async def _checkpoints(store: Any) -> None:
    identity = {"user_id": "u", "session_id": "s"}
    # Step ids out of alphabetical order: the order is the order of first saving.
    await store.save_checkpoint(Checkpoint("r", "zeta", "in_progress", "ag", None, identity))
    await store.save_checkpoint(
        Checkpoint("r", "alpha", "completed", "ag", {"result": 2}, identity)
    )
    await store.save_checkpoint(Checkpoint("r", "zeta", "completed", "ag", {"result": 1}, identity))
    await store.save_checkpoint(Checkpoint("legacy", "x", "completed", "ag", {"result": 0}, None))
    saved = await store.load_checkpoints("r")
    expect(
        _steps(saved),
        [("zeta", "completed"), ("alpha", "completed")],
        "load_checkpoints: steps in the order first saved, a save replacing the step's state",
    )
    expect(
        (saved[0].run_id, saved[0].agent_id, saved[0].evidence, saved[0].identity),
        ("r", "ag", {"result": 1}, identity),
        "a checkpoint's (run_id, agent_id, evidence, identity) as last saved",
    )
    expect(saved[1].evidence, {"result": 2}, "the evidence of another step")
    (legacy,) = await store.load_checkpoints("legacy")
    expect(legacy.identity, None, "the identity of a checkpoint saved without one")
    expect(await store.load_checkpoints("none"), [], "load_checkpoints of an unknown run")
    await store.save_checkpoint(Checkpoint("r2", "s", "failed", "ag", {"error": "boom"}, identity))
    expect(
        _steps(await store.load_checkpoints("r2")), [("s", "failed")], "another run's checkpoints"
    )
    expect(await store.discard_checkpoints("r", "zeta"), 1, "discard_checkpoints('r', 'zeta')")
    expect(
        [c.step_id for c in await store.load_checkpoints("r")],
        ["alpha"],
        "the steps left after discarding one",
    )
    expect(await store.discard_checkpoints("r", "zeta"), 0, "discarding a step again")
    expect(await store.discard_checkpoints("r"), 1, "discard_checkpoints('r') of its one step")
    expect(await store.load_checkpoints("r"), [], "a run's checkpoints after discarding all")
    expect(
        _steps(await store.load_checkpoints("r2")),
        [("s", "failed")],
        "another run's checkpoints after discarding one run's",
    )


async def _state(store: Any) -> None:
    expect(await store.load_state("missing"), None, "load_state of a key never saved")
    value = {"last_tick": "2026-01-01T00:00:00+00:00", "n": 3}
    await store.save_state("s", value)
    value["n"] = 99  # the caller's object changing later is not the stored state
    expect(
        await store.load_state("s"),
        {"last_tick": "2026-01-01T00:00:00+00:00", "n": 3},
        "load_state returns what was saved",
    )
    await store.save_state("s", {"last_tick": "2026-01-02T00:00:00+00:00", "n": 4})
    await store.save_state("t", {"other": True})
    expect(
        await store.load_state("s"),
        {"last_tick": "2026-01-02T00:00:00+00:00", "n": 4},
        "load_state after a second save (it replaces the first)",
    )


CHECKPOINT_CHECKS: tuple[Callable[[Any], Awaitable[None]], ...] = (_checkpoints, _state)


async def _checkpoint_failures_raise(store: Any) -> None:
    calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("load_checkpoints", lambda: store.load_checkpoints("r")),
        ("save_checkpoint", lambda: store.save_checkpoint(Checkpoint("r", "a", "completed"))),
        ("discard_checkpoints", lambda: store.discard_checkpoints("r")),
        ("load_state", lambda: store.load_state("s")),
        ("save_state", lambda: store.save_state("s", {"n": 1})),
    ]
    for what, call in calls:
        await expect_storage_error(what, call)


# -- leases ---------------------------------------------------------------------------------------


async def _leases(store: Any) -> None:
    """Acquire, read, renew (by asking again and with renew_leases) and release a lease."""
    me = live_owner("kit-kernel")
    expect(await store.get_lease("k"), None, "get_lease of a key never leased")
    first = await store.acquire_lease("k", me, LONG_TTL, holder="run-1")
    expect(
        (first.acquired, who(first.lease), first.took_over_from, first.ahead),
        (True, ("k", "kit-kernel", first.lease and first.lease.token, "run-1"), None, 0),
        "acquire_lease of a free key: (acquired, (key, owner, token, holder), took_over_from,"
        " ahead)",
    )
    lease = first.lease
    expect(lease.owner, me, "the owner of a granted lease (id, pid, host, boot)")
    expect(lease.expired, False, "a lease just granted: expired")
    expect_that(
        isinstance(lease.token, int) and lease.token > 0,
        "a granted lease's token",
        "a positive integer",
        lease.token,
    )
    expect_that(
        abs(lease.expires_at - lease.renewed_at - LONG_TTL) < CLOCK_SLACK
        and abs(lease.renewed_at - lease.acquired_at) < CLOCK_SLACK,
        "a lease granted for 60 seconds: expires_at - renewed_at (and renewed_at - acquired_at)",
        "60 (and 0), by the store's clock",
        (lease.expires_at - lease.renewed_at, lease.renewed_at - lease.acquired_at),
    )
    read = await store.get_lease("k")
    expect(
        (who(read), read and read.expired),
        (who(lease), False),
        "get_lease of a held lease: ((key, owner, token, holder), expired)",
    )
    again = await store.acquire_lease("k", me, LONG_TTL, holder="run-1")
    expect(
        (again.acquired, who(again.lease), again.took_over_from),
        (True, who(lease), None),
        "the same owner and holder asking again (a renewal, the same token): (acquired,"
        " (key, owner, token, holder), took_over_from)",
    )
    expect_that(
        again.lease.renewed_at >= lease.renewed_at and again.lease.expires_at >= lease.expires_at,
        "a renewal's (renewed_at, expires_at)",
        f"no earlier than the grant's {(lease.renewed_at, lease.expires_at)}",
        (again.lease.renewed_at, again.lease.expires_at),
    )
    renewed = await store.renew_leases([again.lease], 2 * LONG_TTL)
    expect([who(r) for r in renewed], [who(lease)], "renew_leases of a held lease: the renewed")
    expect_that(
        abs(renewed[0].expires_at - renewed[0].renewed_at - 2 * LONG_TTL) < CLOCK_SLACK,
        "renew_leases(ttl=120): expires_at - renewed_at",
        "120, by the store's clock",
        renewed[0].expires_at - renewed[0].renewed_at,
    )
    await store.release_lease(renewed[0])
    expect(await store.get_lease("k"), None, "get_lease after the holder released")
    regranted = await store.acquire_lease("k", me, LONG_TTL, holder="run-1")
    expect_that(
        regranted.acquired and regranted.lease.token > lease.token,
        "the token of a lease granted again after a release, to the same owner",
        f"acquired, a token greater than {lease.token} (a token is never reused)",
        regranted,
    )
    gone = gone_owner("kit-gone")
    lost = (await store.acquire_lease("j", gone, LONG_TTL)).lease
    taken = await store.acquire_lease("j", me, LONG_TTL)
    expect(
        (taken.acquired, who(taken.took_over_from)),
        (True, who(lost)),
        "acquire_lease of a lease whose owner's process exited: (acquired, took_over_from)",
    )
    held = taken.lease
    both = await store.renew_leases([lost, held, regranted.lease], LONG_TTL)
    expect(
        {who(r) for r in both},
        {who(held), who(regranted.lease)},
        "renew_leases of a lost lease and two held ones: the lost one left out",
    )


async def _lease_tokens(store: Any) -> None:
    """Every grant to another owner or holder increases the token, releases included."""
    a, b = live_owner("kit-a"), live_owner("kit-b")
    seen: list[int] = []
    for owner, holder in [(a, "x"), (b, "x"), (a, "y"), (a, "x"), (a, "x"), (b, "y")]:
        grant = await store.acquire_lease("t", owner, LONG_TTL, holder=holder)
        expect(grant.acquired, True, f"acquire_lease of a free key by ({owner.id}, {holder})")
        renewal = await store.acquire_lease("t", owner, LONG_TTL, holder=holder)
        expect(
            renewal.lease and renewal.lease.token,
            grant.lease.token,
            "the token of a renewal (the same owner and holder asking again)",
        )
        seen.append(grant.lease.token)
        await store.release_lease(grant.lease)
    expect_that(
        all(x < y for x, y in itertools.pairwise(seen)),
        "the tokens of six grants of one key, each released before the next",
        "strictly increasing (a token is never reused)",
        seen,
    )
    gone = gone_owner("kit-gone")
    dead = await store.acquire_lease("t", gone, LONG_TTL, holder="x")
    taken = await store.acquire_lease("t", a, LONG_TTL, holder="x")
    expect_that(
        dead.lease.token > seen[-1] and taken.lease.token > dead.lease.token,
        "the tokens of a grant and of its takeover",
        f"greater than {seen[-1]}, then greater again",
        (dead.lease.token, taken.lease.token),
    )


async def _lease_exclusive(store: Any) -> None:
    """A live owner's lease is refused to every other owner and holder."""
    a, b = live_owner("kit-a"), live_owner("kit-b")  # both alive: this very process
    held = (await store.acquire_lease("x", a, LONG_TTL, holder="run-1")).lease
    for owner, holder, queue in [(b, "run-1", False), (b, "run-2", True), (a, "run-2", False)]:
        refused = await store.acquire_lease("x", owner, LONG_TTL, holder=holder, queue=queue)
        expect(
            (refused.acquired, who(refused.lease), refused.took_over_from),
            (False, who(held), None),
            f"acquire_lease by ({owner.id}, {holder}, queue={queue}) of a key a live owner"
            " holds: (acquired, the holder's (key, owner, token, holder), took_over_from)",
        )
    forged = Lease("x", b, held.token, "run-1")  # the right token, another owner
    expect(await store.renew_leases([forged], LONG_TTL), [], "renew_leases by another owner")
    await store.release_lease(forged)
    await store.release_lease(Lease("x", a, held.token + 1, "run-1"))  # not its token
    expect(
        who(await store.get_lease("x")),
        who(held),
        "get_lease after releases by another owner and with another token (no effect)",
    )
    far = far_owner("kit-far")
    elsewhere = (await store.acquire_lease("y", far, LONG_TTL)).lease
    refused = await store.acquire_lease("y", a, LONG_TTL)
    expect(
        (refused.acquired, who(refused.lease)),
        (False, who(elsewhere)),
        "acquire_lease of a key held by another host's owner (never provably gone from here):"
        " (acquired, the holder)",
    )


async def _lease_expiry(store: Any) -> None:
    """An expired lease is taken over, saying whose, with a greater token; until then the
    writes under it still pass."""
    a, b = live_owner("kit-a"), live_owner("kit-b")
    first = (await store.acquire_lease("e", a, SHORT_TTL, holder="h")).lease
    await trio.sleep(EXPIRY_WAIT)
    read = await store.get_lease("e")
    expect(
        (who(read), read and read.expired),
        (who(first), True),
        f"get_lease {EXPIRY_WAIT}s after a grant for {SHORT_TTL}s: ((key, owner, token, holder),"
        " expired)",
    )
    await store.save_state("kit-e", {"n": 1}, first)  # expired, its token unchanged: passes
    expect(
        await store.load_state("kit-e"),
        {"n": 1},
        "save_state under an expired lease nobody took over (its token still holds)",
    )
    taken = await store.acquire_lease("e", b, LONG_TTL, holder="h2")
    expect(
        (taken.acquired, who(taken.took_over_from)),
        (True, who(first)),
        "acquire_lease of an expired lease by another owner: (acquired, took_over_from)",
    )
    expect_that(
        taken.lease.token > first.token,
        "the token of a takeover",
        f"greater than the expired lease's {first.token}",
        taken.lease.token,
    )
    expect(await store.renew_leases([first], LONG_TTL), [], "renew_leases of a lease taken over")
    await store.release_lease(first)
    expect(
        who(await store.get_lease("e")),
        who(taken.lease),
        "get_lease after the old holder released its lost lease (no effect)",
    )
    back = await store.acquire_lease("e", a, LONG_TTL, holder="h")
    expect(
        (back.acquired, who(back.lease)),
        (False, who(taken.lease)),
        "the old holder asking again: (acquired, the new holder's lease)",
    )
    await expect_lease_lost(
        "save_state", lambda: store.save_state("kit-e", {"n": 2}, first), first, taken.lease
    )
    expect(await store.load_state("kit-e"), {"n": 1}, "the state after a refused fenced save")


async def _lease_gone_owner(store: Any) -> None:
    """A lease whose owner is provably gone is taken over at once, saying whose."""
    me = live_owner("kit-kernel")
    gone = gone_owner("kit-gone")
    dead = (await store.acquire_lease("g", gone, LONG_TTL, holder="h")).lease
    taken = await store.acquire_lease("g", me, LONG_TTL, holder="h")
    expect(
        (
            taken.acquired,
            who(taken.took_over_from),
            taken.took_over_from and taken.took_over_from.owner,
        ),
        (True, who(dead), gone),
        "acquire_lease of a lease whose owner's process exited: (acquired, took_over_from,"
        " its owner)",
    )
    expect_that(
        taken.lease.token > dead.token,
        "the token of a takeover",
        f"greater than {dead.token}",
        taken.lease.token,
    )
    # This very pid, but of another boot of the host: a process that is no more.
    rebooted = LeaseOwner("kit-rebooted", os.getpid(), this_host(), "another-boot:1")
    old = (await store.acquire_lease("r", rebooted, LONG_TTL)).lease
    taken = await store.acquire_lease("r", me, LONG_TTL)
    expect(
        (taken.acquired, who(taken.took_over_from)),
        (True, who(old)),
        "acquire_lease of a lease whose owner lived before the host's last boot: (acquired,"
        " took_over_from)",
    )


async def _lease_queue(store: Any) -> None:
    """With ``queue``, callers are served in arrival order; non-queue callers ignore it."""
    a, b, c, d = (live_owner(f"kit-{n}") for n in "abcd")

    async def ask(owner: LeaseOwner, ttl: float = LONG_TTL) -> Any:
        return await store.acquire_lease("q", owner, ttl, holder=owner.id, queue=True)

    def state(grant: Any) -> tuple[bool, str | None, int]:
        return grant.acquired, grant.lease and grant.lease.owner.id, grant.ahead

    held = await ask(a)
    expect(state(held), (True, "kit-a", 0), "the first caller: (acquired, holder, ahead)")
    expect(state(await ask(b)), (False, "kit-a", 0), "the first waiter: (acquired, holder, ahead)")
    expect(state(await ask(c)), (False, "kit-a", 1), "a second waiter: (acquired, holder, ahead)")
    expect(
        state(await ask(b)),
        (False, "kit-a", 0),
        "the first waiter asking again keeps its place: (acquired, holder, ahead)",
    )
    expect(state(await ask(c)), (False, "kit-a", 1), "the second waiter asking again")
    await store.release_lease(held.lease)
    expect(
        state(await ask(c)),
        (False, None, 1),
        "the second waiter asking first once the lease is free (the first waiter is served"
        " first): (acquired, holder, ahead)",
    )
    second = await ask(b)
    expect(state(second), (True, "kit-b", 0), "the first waiter once the lease is free")
    expect(
        state(await ask(c)),
        (False, "kit-b", 0),
        "the second waiter once the first got the lease (and left the queue)",
    )
    plain = await store.acquire_lease("q", d, LONG_TTL, holder="kit-d")
    expect((plain.acquired, plain.ahead), (False, 0), "a caller without queue, the lease held")
    await store.release_lease(second.lease)
    plain = await store.acquire_lease("q", d, LONG_TTL, holder="kit-d")
    expect(
        (plain.acquired, plain.ahead),
        (True, 0),
        "a caller without queue takes a free lease (it ignores the queue): (acquired, ahead)",
    )
    await store.release_lease(plain.lease)
    expect(state(await ask(c)), (True, "kit-c", 0), "the waiter left, once the lease is free")
    # A waiter that stops asking loses its place once its ttl has passed.
    e, f, g = live_owner("kit-e"), live_owner("kit-f"), live_owner("kit-g")
    holder = (await store.acquire_lease("q2", e, LONG_TTL, holder="e", queue=True)).lease
    lapsing = await store.acquire_lease("q2", f, SHORT_TTL, holder="f", queue=True)
    waiting = await store.acquire_lease("q2", g, LONG_TTL, holder="g", queue=True)
    expect((lapsing.ahead, waiting.ahead), (0, 1), "two waiters' ahead")
    await trio.sleep(EXPIRY_WAIT)
    waiting = await store.acquire_lease("q2", g, LONG_TTL, holder="g", queue=True)
    expect(
        (waiting.acquired, waiting.ahead),
        (False, 0),
        f"a waiter asking again after the waiter ahead stopped asking for over its ttl"
        f" ({SHORT_TTL}s): (acquired, ahead: live waiters only)",
    )
    await store.release_lease(holder)
    waiting = await store.acquire_lease("q2", g, LONG_TTL, holder="g", queue=True)
    expect(
        (waiting.acquired, waiting.ahead),
        (True, 0),
        "the live waiter once the lease is free, the lapsed one ahead of it ignored",
    )


# -- fencing --------------------------------------------------------------------------------------


async def _fencing(store: Any) -> None:
    """Each write made under a lease is refused, writing nothing, once the lease passed to
    another holder, released or forged; under the current lease it passes."""
    me = live_owner("kit-new")

    async def takeover(key: str, holder: str) -> tuple[Lease, Lease]:
        stale = (
            await store.acquire_lease(key, gone_owner("kit-stale"), LONG_TTL, holder=holder)
        ).lease
        grant = await store.acquire_lease(key, me, LONG_TTL, holder=holder)
        expect(
            (grant.acquired, who(grant.took_over_from)),
            (True, who(stale)),
            "the takeover of a provably gone owner's lease: (acquired, took_over_from)",
        )
        return stale, grant.lease

    # start_run
    run = RunRecord("kit-fs", "agent", "s-fence")
    stale, current = await takeover("f-start", "kit-fs")
    await expect_lease_lost("start_run", lambda: store.start_run(run, stale), stale, current)
    expect(await store.get_run("kit-fs"), None, "get_run of a run whose fenced start was refused")
    started = await store.start_run(run, current)
    expect(
        (started.status, started.lease_key, started.attempt),
        ("running", "f-start", 1),
        "start_run under the current lease: (status, lease_key, attempt) of its answer",
    )
    # record_turn, finish_run, finalize_proof: a run started by the stale owner
    run = RunRecord("kit-fr", "agent", "s-fence2")
    stale = (
        await store.acquire_lease("f-run", gone_owner("kit-stale"), LONG_TTL, holder="kit-fr")
    ).lease
    started = await store.start_run(run, stale)
    await store.record_turn(started, [Message("user", "first")], [], stale)
    current = (await store.acquire_lease("f-run", me, LONG_TTL, holder="kit-fr")).lease
    expect_that(
        current is not None and current.token > stale.token,
        "the takeover of the stale owner's run lease",
        "a lease with a greater token",
        current,
    )
    turn = [Message("assistant", "stale"), Message("tool", "r", tool_call_id="c", name="t")]
    record = ToolRecord("kit-fr", "c", "t", {}, "r", False)
    await expect_lease_lost(
        "record_turn", lambda: store.record_turn(started, turn, [record], stale), stale, current
    )
    if takes_state(store):  # with the run's state row (the effect ledger's reservation)
        reserved = StateRow("effects:kit-fr", {"calls": {"c": {"tool": "t"}}})
        await expect_lease_lost(
            "record_turn(state=)",
            lambda: store.record_turn(started, turn, [record], stale, state=reserved),
            stale,
            current,
        )
        expect(
            await store.load_state("effects:kit-fr"),
            None,
            "the state row after a refused fenced record_turn(state=) (nothing written)",
        )
    expect(
        _contents(await store.load_history("agent", "s-fence2")),
        ["first"],
        "the history after a refused fenced record_turn (nothing of the turn written)",
    )
    expect(
        await store.load_tool_records("kit-fr"),
        {},
        "the tool records after a refused fenced record_turn (nothing of the turn written)",
    )
    metadata = run_metadata(started, "completed")
    await expect_lease_lost(
        "finish_run", lambda: store.finish_run("kit-fr", metadata, stale), stale, current
    )
    after = await store.get_run("kit-fr")
    expect(
        (after and after.status, after and after.finished_at),
        ("running", None),
        "get_run after a refused fenced finish_run: (status, finished_at)",
    )
    expect(
        [e.metadata for e in await store.history("s-fence2")],
        [None],
        "the entries' metadata after a refused fenced finish_run",
    )
    await expect_lease_lost(
        "finalize_proof",
        lambda: store.finalize_proof("kit-fr", metadata, (), stale),
        stale,
        current,
    )
    expect(await store.get_proof("kit-fr"), None, "get_proof after a refused fenced finalization")
    if takes_ending(store):  # the last turn with the run's end
        await expect_ending_lease_lost(
            store, started, turn, [record], Ending(metadata), stale, current
        )
        after = await store.get_run("kit-fr")
        expect(
            (
                _contents(await store.load_history("agent", "s-fence2")),
                after and after.status,
                [e.metadata for e in await store.history("s-fence2")],
                await store.get_proof("kit-fr"),
            ),
            (["first"], "running", [None], None),
            "after a refused fenced record_turn(ending=): (the history, the run's status, the"
            " entries' metadata, the proof); nothing written",
        )
    await store.record_turn(started, turn, [record], current)
    await store.finish_run("kit-fr", metadata, current)
    proof = await store.finalize_proof("kit-fr", metadata, (), current)
    expect(
        (
            _contents(await store.load_history("agent", "s-fence2")),
            (await store.get_run("kit-fr")).status,
            proof.receipts,
        ),
        (["first", "stale", "r"], "completed", 1),
        "under the current lease: (the history, the run's status, the proof's receipts)",
    )
    # save_checkpoint
    stale, current = await takeover("f-step", "")
    step = Checkpoint("kit-fc", "step", "in_progress", "agent", None, {})
    await expect_lease_lost(
        "save_checkpoint", lambda: store.save_checkpoint(step, stale), stale, current
    )
    expect(
        await store.load_checkpoints("kit-fc"), [], "the checkpoints after a refused fenced save"
    )
    await store.save_checkpoint(step, current)
    expect(
        _steps(await store.load_checkpoints("kit-fc")),
        [("step", "in_progress")],
        "the checkpoints after a save under the current lease",
    )
    # save_state: taken over, released, forged
    stale, current = await takeover("f-state", "")
    await expect_lease_lost(
        "save_state", lambda: store.save_state("kit-fst", {"n": 1}, stale), stale, current
    )
    expect(await store.load_state("kit-fst"), None, "the state after a refused fenced save")
    forged = Lease("f-state", live_owner("kit-forger"), current.token, current.holder)
    await expect_lease_lost(
        "save_state under a lease of the right token and another owner",
        lambda: store.save_state("kit-fst", {"n": 2}, forged),
        forged,
        current,
    )
    expect(await store.load_state("kit-fst"), None, "the state after a forged fenced save")
    await store.save_state("kit-fst", {"n": 3}, current)
    expect(await store.load_state("kit-fst"), {"n": 3}, "the state saved under its lease")
    await store.release_lease(current)
    await expect_lease_lost(
        "save_state under a released lease",
        lambda: store.save_state("kit-fst", {"n": 4}, current),
        current,
        None,
    )
    expect(await store.load_state("kit-fst"), {"n": 3}, "the state after a save once released")


# -- attempts and interrupted runs ----------------------------------------------------------------


async def _attempts(store: Any) -> None:
    """A retry of a run id is its next attempt; each attempt's entries keep their own reply
    metadata, those of an attempt that never ended marked interrupted."""
    me = live_owner("kit-kernel")
    lease = (await store.acquire_lease("att", me, LONG_TTL, holder="kit-at")).lease
    run = RunRecord("kit-at", "agent", "s-att")
    first = await store.start_run(run, lease)
    expect(
        (first.attempt, first.status, first.lease_key),
        (1, "running", "att"),
        "start_run's answer of a new run id under a lease: (attempt, status, lease_key)",
    )
    await store.record_turn(
        first, [Message("user", "one"), Message("assistant", "crash")], [], lease
    )
    other = RunRecord("kit-at-other", "agent", "s-att")
    await store.start_run(other)
    await store.record_turn(other, [Message("user", "other")], [])
    second = await store.start_run(run, lease)  # the first attempt crashed: a retry
    expect(
        (second.attempt, second.status, second.lease_key),
        (2, "running", "att"),
        "start_run's answer of a retry: (attempt, status, lease_key)",
    )
    stored = await store.get_run("kit-at")
    expect(stored and stored.attempt, 2, "get_run's attempt after a retry started")

    async def entries() -> list[tuple[str, int, Any]]:
        found = await store.history("s-att")
        return [(e.content, e.attempt, e.metadata and dict(e.metadata)) for e in found]

    interrupted = {"status": "interrupted", "attempt": 1}
    expect(
        await entries(),
        [("one", 1, interrupted), ("crash", 1, interrupted), ("other", 1, None)],
        "history() after a retry started: the entries' (content, attempt, metadata); the"
        " crashed attempt's marked interrupted, another run's untouched",
    )
    await store.record_turn(
        second, [Message("user", "two"), Message("assistant", "done")], [], lease
    )
    metadata = run_metadata(second, "completed")
    await store.finish_run("kit-at", metadata, lease)
    expect(
        await entries(),
        [
            ("one", 1, interrupted),
            ("crash", 1, interrupted),
            ("other", 1, None),
            ("two", 2, metadata),
            ("done", 2, metadata),
        ],
        "history() after the retry finished: its metadata on its own attempt's entries only",
    )
    third = await store.start_run(run, lease)
    expect(third.attempt, 3, "start_run's attempt of a second retry")
    await store.record_turn(third, [Message("user", "three")], [], lease)
    expect(
        await entries(),
        [
            ("one", 1, interrupted),
            ("crash", 1, interrupted),
            ("other", 1, None),
            ("two", 2, metadata),
            ("done", 2, metadata),
            ("three", 3, None),
        ],
        "history() after a retry of a finished attempt: the finished attempt keeps its"
        " metadata, the crashed one stays interrupted of attempt 1",
    )
    stored = await store.get_run("kit-at")
    expect(
        (stored and stored.attempt, stored and stored.status),
        (3, "running"),
        "get_run after the third start: (attempt, status)",
    )


async def expect_run_id_taken(
    what: str, call: Callable[[], Awaitable[Any]], owner: str | None, differs: Sequence[str]
) -> None:
    """``call`` (a start_run) raises RunIdTaken naming the stored run's principal and the
    fields of the identity that differ."""
    try:
        got = await call()
    except RunIdTaken as exc:
        expect(
            (exc.owner, list(exc.differs)),
            (owner, list(differs)),
            f"{what}: the RunIdTaken's (owner, differs)",
        )
        return
    except Exception as exc:
        raise AssertionError(
            f"{what}: expected RunIdTaken, got {type(exc).__name__}: {show(str(exc))}"
        ) from exc
    raise AssertionError(
        f"{what}: expected RunIdTaken, got the answer {show(got)} (a run id names one request:"
        " another request's start must not become an attempt of the stored run)"
    )


async def _lease_of(store: Any, key: str, holder: str) -> Lease:
    """A free lease of ``key``, held by ``holder`` of a live owner."""
    grant = await store.acquire_lease(key, live_owner("kit-kernel"), LONG_TTL, holder=holder)
    expect_that(grant.acquired, f"a free lease {key!r}", "acquired", grant)
    lease: Lease = grant.lease
    return lease


async def _run_ids_reserved(store: Any) -> None:
    """A run id names one request, insert-or-fail: start_run of a stored id for another agent,
    session, user or principal raises RunIdTaken and writes nothing (the stored run, its
    history, tool records and proof untouched); the refused request's fenced run events are
    refused, and the run's own replace any it shared before the run was stored; the same
    request's start is its next attempt; of starts racing for a fresh id, exactly one owns
    it."""
    alice = RunRecord("kit-rid", "agent", "s-alice", "u", "alice")
    lease = await _lease_of(store, "rid-alice", "kit-rid")
    first = await store.start_run(alice, lease)
    messages = [Message("user", "alice's secret"), Message("assistant", "noted")]
    record = ToolRecord("kit-rid", "c1", "read", {"path": "a"}, "alice's file", False)
    await store.record_turn(first, messages, [record], lease)
    metadata = run_metadata(first, "completed")
    await store.finish_run("kit-rid", metadata, lease)
    proof = await store.finalize_proof("kit-rid", metadata, (), lease)
    bob_lease = await _lease_of(store, "rid-bob", "kit-rid")
    others = [
        (attrs.evolve(alice, principal="bob", session_id="s-bob"), ["session_id", "principal"]),
        (attrs.evolve(alice, principal="bob"), ["principal"]),
        (attrs.evolve(alice, principal=None), ["principal"]),
        (attrs.evolve(alice, session_id="s-other"), ["session_id"]),
        (attrs.evolve(alice, agent_id="other-agent"), ["agent_id"]),
        (attrs.evolve(alice, user_id="v"), ["user_id"]),
        (attrs.evolve(alice, user_id=None), ["user_id"]),
    ]
    for other, differs in others:
        for fence in (bob_lease, None):
            await expect_run_id_taken(
                f"start_run of alice's stored run id with another {', '.join(differs)}"
                f" ({'under a lease of its own' if fence else 'unfenced'})",
                functools.partial(store.start_run, other, fence),
                "alice",
                differs,
            )
    stored = await store.get_run("kit-rid")
    expect(
        stored
        and (
            stored.agent_id,
            stored.session_id,
            stored.user_id,
            stored.principal,
            stored.status,
            stored.attempt,
            stored.lease_key,
        ),
        ("agent", "s-alice", "u", "alice", "completed", 1, "rid-alice"),
        "get_run of alice's run after the refused starts (agent, session, user, principal,"
        " status, attempt, lease_key): untouched",
    )
    expect(
        [
            (e.content, e.principal, e.attempt, e.metadata and dict(e.metadata))
            for e in await store.history("s-alice")
        ],
        [(m.content, "alice", 1, metadata) for m in messages],
        "alice's history after the refused starts: (content, principal, attempt, metadata)",
    )
    expect(
        sorted(await store.load_tool_records("kit-rid")),
        ["c1"],
        "alice's tool records after the refused starts",
    )
    kept = await store.get_proof("kit-rid")
    expect(kept and kept.sha256, proof.sha256, "alice's proof after the refused starts (kept)")
    expect(await store.history("s-bob"), [], "the history of bob's refused session")
    expect(
        [r.run_id for r in await store.list_runs(principal="bob")],
        [],
        "list_runs(principal='bob') after bob's refused starts",
    )
    # The run's shared events are its own request's: a refused request's batch (fenced under
    # its own conversation's lease, not the run's) is refused, and writes nothing.
    await store.append_run_events(
        [RunEventBatch("kit-rid", "alice", _events(1, 2), True, lease)], 10
    )
    refused = await store.append_run_events(
        [RunEventBatch("kit-rid", "bob", _events(1), True, bob_lease)], 10
    )
    expect(refused, ["kit-rid"], "append_run_events of bob's refused request's batch: refused")
    other_session = await _lease_of(store, "rid-alice-2", "kit-rid")
    refused = await store.append_run_events(
        [RunEventBatch("kit-rid", "alice", _events(1), True, other_session)], 10
    )
    expect(
        refused,
        ["kit-rid"],
        "append_run_events of a batch of alice's other request (another session's lease)",
    )
    kept = await store.run_events("kit-rid", 0)
    expect(
        kept and (kept.principal, [e.id for e in kept.events]),
        ("alice", [1, 2]),
        "the run's events after the refused requests' batches: (principal, ids), alice's own",
    )
    again = await store.start_run(alice, lease)  # a retry of the same request
    expect(
        (again.attempt, again.principal, again.lease_key),
        (2, "alice", "rid-alice"),
        "start_run of the same request again: its next attempt (attempt, principal, lease_key)",
    )
    # Events a refused request shared before the run it lost to was stored are the run's to
    # replace (its first batch), and none of that request's follows.
    early = await _lease_of(store, "rid-bob-ev", "kit-rid-ev")
    await store.append_run_events([RunEventBatch("kit-rid-ev", "bob", _events(1), True, early)], 10)
    owner = await _lease_of(store, "rid-alice-ev", "kit-rid-ev")
    await store.start_run(RunRecord("kit-rid-ev", "agent", "s-ev", None, "alice"), owner)
    expect(
        await store.append_run_events(
            [RunEventBatch("kit-rid-ev", "alice", _events(1, 2, 3), True, owner)], 10
        ),
        [],
        "append_run_events of the stored run's own first batch, after a refused request's",
    )
    expect(
        await store.append_run_events(
            [RunEventBatch("kit-rid-ev", "bob", _events(2), False, early)], 10
        ),
        ["kit-rid-ev"],
        "append_run_events of the refused request's next batch",
    )
    found = await store.run_events("kit-rid-ev", 0)
    expect(
        found and (found.principal, [(e.id, e.data) for e in found.events]),
        ("alice", [(e.id, e.data) for e in _events(1, 2, 3)]),
        "the run's events: its own, the refused request's replaced (principal, events)",
    )

    # Starts racing for a fresh id, one per principal: one owns it, every other is refused.
    owners = [f"p{n}" for n in range(8)]
    won: list[str] = []
    losers: list[tuple[str, str | None, tuple[str, ...]]] = []

    async def start(principal: str) -> None:
        run = RunRecord("kit-rid-race", "agent", f"s-{principal}", None, principal)
        try:
            await store.start_run(run)
        except RunIdTaken as exc:
            losers.append((principal, exc.owner, exc.differs))
        else:
            won.append(principal)

    async with trio.open_nursery() as nursery:
        for principal in owners:
            nursery.start_soon(start, principal)
    expect(len(won), 1, f"starts of one fresh run id by {len(owners)} principals at once that won")
    expect(
        sorted(losers),
        sorted((p, won[0], ("session_id", "principal")) for p in owners if p != won[0]),
        "the refused starts: (principal, RunIdTaken.owner, differs)",
    )
    raced = await store.get_run("kit-rid-race")
    expect(
        raced and (raced.principal, raced.session_id, raced.attempt),
        (won[0], f"s-{won[0]}", 1),
        "get_run of the raced id: the winner's (principal, session, attempt 1)",
    )


async def _interrupted_runs(store: Any) -> None:
    """A running run reads as interrupted once its lease is not its own: none, expired,
    released, of another holder, or of an owner provably gone."""
    me = live_owner("kit-kernel")
    runs = {
        name: RunRecord(f"kit-{name}", "agent", f"s-{name}", started_at=1000.0 + n)
        for n, name in enumerate(
            ["held", "unleased", "expired", "gone", "released", "other", "done"]
        )
    }

    async def lease(name: str, owner: LeaseOwner, ttl: float, holder: str | None = None) -> Lease:
        run_id = runs[name].run_id
        grant = await store.acquire_lease(f"i-{name}", owner, ttl, holder=holder or run_id)
        expect(grant.acquired, True, f"a free lease for the run {run_id}")
        granted: Lease = grant.lease
        await store.start_run(runs[name], granted)
        return granted

    expired = await lease("expired", me, SHORT_TTL)
    await lease("held", me, LONG_TTL)
    await store.start_run(runs["unleased"])
    gone = gone_owner("kit-gone")
    await lease("gone", gone, LONG_TTL)
    await store.release_lease(await lease("released", me, LONG_TTL))
    await lease("other", me, LONG_TTL, holder="another-run")
    done = await lease("done", me, LONG_TTL)
    await store.finish_run("kit-done", run_metadata(runs["done"], "completed"), done)
    await store.release_lease(done)
    await trio.sleep(EXPIRY_WAIT)
    described = {}
    for name in runs:
        current = await store.get_lease(f"i-{name}")
        described[name] = current.describe() if current is not None else None
    expected = {
        "held": ("running", None),
        "unleased": ("interrupted", None),
        "expired": ("interrupted", described["expired"]),
        "gone": ("interrupted", described["gone"]),
        "released": ("interrupted", None),
        "other": ("interrupted", None),  # a later run's lease says nothing of this run's owner
        "done": ("completed", None),
    }
    expect_that(
        described["expired"] is not None and described["expired"]["token"] == expired.token,
        "get_lease of an expired lease",
        "the lease, still there (describe() of it)",
        described["expired"],
    )
    for name, (status, lease_shown) in expected.items():
        got = await store.get_run(f"kit-{name}")
        what = f"get_run of the run {name!r}: (status, lease)"
        if status == "interrupted":
            what += (
                " (a running run whose lease does not prove it alive reads interrupted, with"
                " the lease while it is the run's own)"
            )
        expect(
            (got and got.status, got and got.lease if status != "running" else None),
            (status, lease_shown),
            what,
        )
    listed = {r.run_id: r.status for r in await store.list_runs(agent_id="agent")}
    expect(
        listed,
        {f"kit-{name}": status for name, (status, _) in expected.items()},
        "list_runs' statuses (read as get_run reads them)",
    )


# -- counters and cancellation requests ---------------------------------------------------------


async def _counters(store: Any) -> None:
    """``spend`` adds atomically unless the limit would be passed; a give-back always applies."""
    expect(await store.counter("cost"), 0, "counter() of an unknown key")
    expect(await store.spend("cost", 2), 2, "spend('cost', 2) of a new counter: the total")
    expect(await store.spend("cost", 3, limit=5), 5, "spend up to the limit exactly: the total")
    expect(await store.spend("cost", 0.5, limit=5), None, "spend past the limit: refused (None)")
    expect(await store.counter("cost"), 5, "the counter after a refused spend (nothing added)")
    expect(
        await store.spend("cost", -1, limit=1),
        4,
        "a negative spend (a give-back) over the limit: applied, the total",
    )
    expect(await store.spend("cost", 1.5), 5.5, "spend without a limit: the total")
    expect(await store.counter("other"), 0, "another key's counter")
    results: list[float | None] = []

    async def spend_one() -> None:
        results.append(await store.spend("quota", 1, limit=25))

    async with trio.open_nursery() as nursery:  # 40 spends at once against a limit of 25
        for _ in range(40):
            nursery.start_soon(spend_one)
    granted = sorted(r for r in results if r is not None)
    expect(
        (granted, results.count(None)),
        ([float(n) for n in range(1, 26)], 15),
        "40 concurrent spends of 1 against a limit of 25: (the totals granted, the refusals)",
    )
    expect(await store.counter("quota"), 25, "the counter after 40 concurrent spends (limit 25)")


async def _cancel_requests(store: Any) -> None:
    def shown(requests: Sequence[Any]) -> list[tuple[Any, ...]]:
        return [(r.id, r.reason, r.run_id, r.lease_key) for r in requests]

    expect(await store.cancel_requests(0), [], "cancel_requests(0) of a new store")
    first = await store.request_cancel("stop it", run_id="kit-run")
    expect_that(
        isinstance(first.id, int) and first.id > 0,
        "the id of a cancellation request",
        "a positive integer",
        first,
    )
    expect(
        (first.reason, first.run_id, first.lease_key),
        ("stop it", "kit-run", None),
        "a run's cancellation request: (reason, run_id, lease_key)",
    )
    second = await store.request_cancel("shutdown", lease_key="conversation:a")
    expect_that(second.id > first.id, "the id of a later request", f"> {first.id}", second.id)
    expect(
        shown(await store.cancel_requests(0)),
        shown([first, second]),
        "cancel_requests(0): every request, oldest first",
    )
    expect(
        shown(await store.cancel_requests(first.id)),
        shown([second]),
        "cancel_requests(after the first's id): the requests after it only",
    )
    expect(await store.cancel_requests(second.id), [], "cancel_requests(after the last's id)")


def _stored(found: Any) -> tuple[Any, ...] | None:
    if found is None:
        return None
    events = [(e.id, e.name, dict(e.data)) for e in found.events]
    return (found.run_id, found.principal, found.first_kept, events)


def _events(*ids: int, name: str = "delta") -> list[RunEvent]:
    return [RunEvent(i, name, {"text": f"t{i}", "n": i}) for i in ids]


async def _run_events(store: Any) -> None:
    """A run's stream events: appended in batches, read after an id, bounded, restarted by a
    new attempt, kept apart per run with their principal."""
    expect(await store.run_events("kit-ev", 0), None, "run_events of a run with none stored")
    await store.append_run_events(
        [RunEventBatch("kit-ev", "alice", _events(1, 2, 3), restart=True)], 100
    )
    expected = [(i, "delta", {"text": f"t{i}", "n": i}) for i in (1, 2, 3)]
    expect(
        _stored(await store.run_events("kit-ev", 0)),
        ("kit-ev", "alice", 1, expected),
        "run_events(after 0) of three appended events: (run, principal, first kept, events)",
    )
    expect(
        _stored(await store.run_events("kit-ev", 2)),
        ("kit-ev", "alice", 1, expected[2:]),
        "run_events(after 2): the events after id 2 only",
    )
    expect(
        _stored(await store.run_events("kit-ev", 0, limit=2)),
        ("kit-ev", "alice", 1, expected[:2]),
        "run_events(after 0, limit=2): the first two",
    )
    await store.append_run_events(
        [
            RunEventBatch("kit-ev", "alice", _events(4, 5)),
            RunEventBatch("kit-other", "bob", [RunEvent(1, "result", {"status": "completed"})]),
        ],
        3,
    )
    found = await store.run_events("kit-ev", 0)
    expect(
        (found.first_kept, [e.id for e in found.events]) if found else None,
        (3, [3, 4, 5]),
        "a run's events bounded to keep=3: (first kept, ids)",
    )
    expect(
        _stored(await store.run_events("kit-other", 0)),
        ("kit-other", "bob", 1, [(1, "result", {"status": "completed"})]),
        "another run's events, appended in the same call, with its own principal",
    )
    await store.append_run_events([RunEventBatch("kit-ev", "alice", _events(1), restart=True)], 100)
    expect(
        _stored(await store.run_events("kit-ev", 0)),
        ("kit-ev", "alice", 1, [(1, "delta", {"text": "t1", "n": 1})]),
        "a restarted log (a new attempt): the earlier attempt's events are gone",
    )
    await store.append_run_events(
        [RunEventBatch("kit-ev", "mallory", [RunEvent(1, "result", {"x": 1})], restart=True)], 100
    )
    expect(
        _stored(await store.run_events("kit-ev", 0)),
        ("kit-ev", "alice", 1, [(1, "delta", {"text": "t1", "n": 1})]),
        "a batch of another principal for the run: ignored, the owner's events kept",
    )
    # An event with its JSON text already made (decision 0050): a store may write that text or
    # encode the data itself, but what it reads back is the data, and any text it returns with
    # it is that data's.
    given = RunEvent(1, "delta", {"b": 1, "a": [2, "x"]}, '{"b": 1, "a": [2, "x"]}')
    await store.append_run_events([RunEventBatch("kit-json", "alice", [given], True)], 100)
    read = await store.run_events("kit-json", 0)
    expect(
        _stored(read),
        ("kit-json", "alice", 1, [(1, "delta", {"b": 1, "a": [2, "x"]})]),
        "an event appended with its JSON text: read back as its data",
    )
    texts = [e.json for e in read.events if e.json is not None] if read else []
    expect(
        [json.loads(text) for text in texts],
        [{"b": 1, "a": [2, "x"]}] * len(texts),
        "the JSON text a store returns with an event: its data's",
    )
    expect(
        await store.wait_run_events("kit-ev", 0, 5.0),
        True,
        "wait_run_events after an id below the newest: True at once",
    )
    expect(
        await store.wait_run_events("kit-ev", 1, 0.2),
        False,
        "wait_run_events with nothing newer within 0.2 s: False",
    )
    woke: list[tuple[bool, float]] = []

    async def wait() -> None:
        started = trio.current_time()
        found = await store.wait_run_events("kit-ev", 1, 10.0)
        woke.append((found, trio.current_time() - started))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.sleep(0.05)
        await store.append_run_events([RunEventBatch("kit-ev", "alice", _events(2))], 100)
    expect_that(
        woke[0][0] and woke[0][1] < 10.0,
        "wait_run_events while another task appends",
        "True, well before its 10 s timeout",
        woke,
    )
    cancels = await store.cancel_requests(0)
    after = max((r.id for r in cancels), default=0)
    waited: list[float] = []

    async def wait_cancel() -> None:
        started = trio.current_time()
        await store.wait_cancel_requests(after, 0.2)
        waited.append(trio.current_time() - started)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_cancel)
    expect_that(
        waited[0] < 5.0, "wait_cancel_requests with no request", "back after its timeout", waited
    )


async def _run_events_resumed(store: Any) -> None:
    """A run's events read from any id, as a stream resumed by ``Last-Event-ID`` reads them,
    whatever batches they were appended in (a store may keep a batch in one row): a read that
    starts inside a batch gets the events after its id only, pages read one after another
    get every event once and in order, and ``keep`` drops exactly the oldest events, a batch
    cut in its middle keeping its newer ones; the newest, a ``result``, always stays."""

    def ids(found: Any) -> list[int] | None:
        return None if found is None else [e.id for e in found.events]

    run = "kit-evr"
    await store.append_run_events(
        [RunEventBatch(run, "alice", _events(*range(1, 11)), restart=True)], 100
    )
    await store.append_run_events([RunEventBatch(run, "alice", _events(11))], 100)
    await store.append_run_events([RunEventBatch(run, "alice", _events(*range(12, 21)))], 100)
    for after in (0, 1, 5, 9, 10, 11, 12, 19, 20, 25):
        expect(
            ids(await store.run_events(run, after)),
            list(range(after + 1, 21)),
            f"run_events(after {after}) of 20 events appended in batches of 10, 1 and 9: the ids",
        )
    expect(
        _stored(await store.run_events(run, 5, limit=3)),
        (run, "alice", 1, [(i, "delta", {"text": f"t{i}", "n": i}) for i in (6, 7, 8)]),
        "run_events(after 5, limit=3), inside the first batch: (run, principal, first kept,"
        " events)",
    )
    expect(
        ids(await store.run_events(run, 8, limit=6)),
        [9, 10, 11, 12, 13, 14],
        "run_events(after 8, limit=6), across the three batches: the ids",
    )
    pages: list[list[int]] = []
    after = 0
    for _ in range(20):  # a stream reading page after page, each after the last id it read
        page = ids(await store.run_events(run, after, limit=3)) or []
        if not page:
            break
        pages.append(page)
        after = page[-1]
    expect(
        [i for page in pages for i in page],
        list(range(1, 21)),
        "pages of at most 3 read one after another, each after the last id read: every event"
        " once, in order",
    )
    await store.append_run_events([RunEventBatch(run, "alice", _events(21, 22))], 8)
    found = await store.run_events(run, 0)
    expect(
        (found.first_kept, ids(found)) if found else None,
        (15, list(range(15, 23))),
        "the events bounded to keep=8, which cuts the batch of 12-20 in its middle: (first"
        " kept, ids)",
    )
    expect(
        ids(await store.run_events(run, 13)),
        list(range(15, 23)),
        "run_events(after 13), an id dropped by keep: the ids (all kept)",
    )
    expect(
        _stored(await store.run_events(run, 16, limit=2)),
        (run, "alice", 15, [(i, "delta", {"text": f"t{i}", "n": i}) for i in (17, 18)]),
        "run_events(after 16, limit=2), inside the cut batch: (run, principal, first kept, events)",
    )
    short = "kit-evr-short"
    await store.append_run_events(
        [RunEventBatch(short, "alice", _events(*range(1, 11)), restart=True)], 4
    )
    found = await store.run_events(short, 0)
    expect(
        (found.first_kept, ids(found)) if found else None,
        (7, [7, 8, 9, 10]),
        "one batch of 10 events bounded to keep=4: (first kept, ids)",
    )
    ended = [*_events(11, 12), RunEvent(13, "result", {"status": "completed"})]
    await store.append_run_events([RunEventBatch(short, "alice", ended)], 1)
    found = await store.run_events(short, 0)
    expect(
        _stored(found),
        (short, "alice", 13, [(13, "result", {"status": "completed"})]),
        "a batch ending with the result, bounded to keep=1: the result alone",
    )
    expect(
        await store.wait_run_events(short, 12, 5.0),
        True,
        "wait_run_events after the id before the result, kept alone: True at once",
    )


async def _run_events_fenced(store: Any) -> None:
    """Run events written under a lease that a later attempt of their run took over (an
    owner paused past its lease) are refused, the call naming their run: they never replace
    nor follow the new attempt's, before it started, once it wrote its own, or once it ended
    and released the lease. The current attempt's events are written, after its lease was
    released and granted to another run too; a reader sees one ``result``, the current
    attempt's."""
    key = "conversation:kit-evf"
    run = RunRecord("kit-evf", "agent", "s-evf", principal="alice")
    paused = (
        await store.acquire_lease(key, gone_owner("kit-paused"), LONG_TTL, holder="kit-evf")
    ).lease
    await store.start_run(run, paused)

    def batch(
        events: list[RunEvent], fence: Lease | None, restart: bool = False, run_id: str = "kit-evf"
    ) -> RunEventBatch:
        return RunEventBatch(run_id, "alice", events, restart, fence)

    def shown(found: Any) -> list[tuple[int, str, Any]] | None:
        if found is None:
            return None
        return [(e.id, e.name, e.data.get("status", e.data.get("text"))) for e in found.events]

    async def refused(what: str, batches: list[RunEventBatch], expected: list[str]) -> None:
        answer = await store.append_run_events(batches, 100)
        expect(
            None if answer is None else sorted(set(answer)),
            sorted(expected),
            f"append_run_events {what}: the runs whose batches were refused (its answer)",
        )

    def result(status: str, n: int) -> RunEvent:
        return RunEvent(n, "result", {"status": status, "run_id": "kit-evf"})

    started = [RunEvent(1, "run", {"text": "started"}), *_events(2)]
    await refused("under the run's own lease", [batch(started, paused, restart=True)], [])
    attempt_1 = [(1, "run", "started"), (2, "delta", "t2")]
    expect(shown(await store.run_events("kit-evf", 0)), attempt_1, "the first attempt's events")

    grant = await store.acquire_lease(key, live_owner("kit-next"), LONG_TTL, holder="kit-evf")
    expect(
        (grant.acquired, who(grant.took_over_from)),
        (True, who(paused)),
        "the next attempt's takeover of the paused owner's lease: (acquired, took_over_from)",
    )
    current = grant.lease
    # 1. taken over, the next attempt neither started nor wrote an event yet
    await refused(
        "under a lease the run's next attempt took over (not started yet)",
        [batch(_events(3), paused)],
        ["kit-evf"],
    )
    expect(
        shown(await store.run_events("kit-evf", 0)),
        attempt_1,
        "the events after a refused batch of the paused owner: nothing of it written",
    )
    # 2. the next attempt began its log: nothing of the paused owner replaces or follows it
    begun = [RunEvent(1, "run", {"text": "again"}), *_events(2)]
    await refused("of the next attempt", [batch(begun, current, restart=True)], [])
    attempt_2 = [(1, "run", "again"), (2, "delta", "t2")]
    expect(
        shown(await store.run_events("kit-evf", 0)),
        attempt_2,
        "the events once the next attempt began its log: its own only",
    )
    await refused(
        "of the paused owner, after the next attempt's log began",
        [batch([*_events(3), result("failed", 4)], paused)],
        ["kit-evf"],
    )
    await refused(
        "of the paused owner beginning a log again",
        [batch([RunEvent(1, "run", {"text": "stale"}), result("failed", 2)], paused, True)],
        ["kit-evf"],
    )
    expect(
        shown(await store.run_events("kit-evf", 0)),
        attempt_2,
        "the next attempt's events after the paused owner's were refused: neither replaced"
        " nor followed",
    )
    # 3. the next attempt started, ended and released its lease; another run took the key
    await store.start_run(run, current)
    await refused("of the current attempt", [batch(_events(3), current)], [])
    await store.finish_run("kit-evf", run_metadata(run, "completed"), current)
    await store.release_lease(current)
    later = await store.acquire_lease(key, live_owner("kit-later"), LONG_TTL, holder="kit-later")
    expect_that(later.acquired, "the conversation's lease, once released", "acquired", later)
    await refused(
        "of the current attempt after its lease was released and taken by another run (its result)",
        [batch([result("completed", 4)], current)],
        [],
    )
    await refused(
        "of the paused owner after the next attempt ended, mixed with another run's batch",
        [
            batch([*_events(5), result("failed", 6)], paused),
            batch(_events(1), None, restart=True, run_id="kit-evf-other"),
        ],
        ["kit-evf"],
    )
    final = [*attempt_2, (3, "delta", "t3"), (4, "result", "completed")]
    expect(
        shown(await store.run_events("kit-evf", 0)),
        final,
        "the run's events as a reader finds them: the current attempt's, one result",
    )
    expect(
        shown(await store.run_events("kit-evf-other", 0)),
        [(1, "delta", "t1")],
        "another run's batch appended in the call that refused a stale one: written",
    )
    # 4. the next attempt ended before writing any event: its run record alone tells
    run = RunRecord("kit-evf2", "agent", "s-evf2", principal="alice")
    key = "conversation:kit-evf2"
    paused = (
        await store.acquire_lease(key, gone_owner("kit-paused"), LONG_TTL, holder="kit-evf2")
    ).lease
    await store.start_run(run, paused)
    await refused(
        "of another run, under its own lease", [batch(started, paused, True, "kit-evf2")], []
    )
    current = (
        await store.acquire_lease(key, live_owner("kit-next"), LONG_TTL, holder="kit-evf2")
    ).lease
    await store.start_run(run, current)
    await store.finish_run("kit-evf2", run_metadata(run, "completed"), current)
    await store.release_lease(current)
    await store.acquire_lease(key, live_owner("kit-later"), LONG_TTL, holder="kit-later")
    await refused(
        "of the paused owner after the next attempt started and ended (no event of it written yet)",
        [batch([*_events(3), result("failed", 4)], paused, run_id="kit-evf2")],
        ["kit-evf2"],
    )
    await refused(
        "of the current attempt, late (its lease released and taken by another run)",
        [batch([*begun, result("completed", 3)], current, True, "kit-evf2")],
        [],
    )
    expect(
        shown(await store.run_events("kit-evf2", 0)),
        [*attempt_2, (3, "result", "completed")],
        "the events of a run whose next attempt wrote its log late: its own, one result",
    )


def _approval(run_id: str, call_id: str, principal: str | None = "alice") -> ApprovalRequest:
    return ApprovalRequest(
        run_id,
        call_id,
        "delete",
        {"path": "a.txt", "n": 1},
        "agent",
        f"s-{run_id}",
        principal,
        "u1",
        {"text": "clean up", "overrides": {"max_turns": 3}, "mode": "auto"},
        ("confirm_tools lists 'delete'",),
    )


def _decision(request: ApprovalRequest | None) -> tuple[Any, ...] | None:
    if request is None or request.decision is None:
        return None
    d = request.decision
    return (d.approved, d.approver, d.decided_by, d.note)


async def _approvals(store: Any) -> None:
    """Approval requests are stored once per (run, call), read and decided by principal; a
    decision is atomic (of several at once exactly one wins) and a second is refused."""
    asked = _approval("kit-a1", "c1")
    expect(
        await store.request_approval(asked),
        asked,
        "request_approval: the request as stored (every field, pending)",
    )
    expect(await store.get_approval("kit-a1", "c1"), asked, "get_approval of a pending request")
    again = attrs.evolve(asked, arguments={"path": "other"}, reasons=("later",))
    expect(
        await store.request_approval(again),
        asked,
        "request_approval of a (run, call) already stored: the first request, unchanged",
    )
    expect(await store.get_approval("kit-a1", "c2"), None, "get_approval of an unknown call")
    await store.request_approval(_approval("kit-a1", "c2"))
    await store.request_approval(_approval("kit-a2", "c1", principal=None))
    expect(
        [(r.run_id, r.call_id) for r in await store.list_approvals()],
        [("kit-a1", "c1"), ("kit-a1", "c2"), ("kit-a2", "c1")],
        "list_approvals(): every request, in the order they were made",
    )
    expect(
        [r.call_id for r in await store.list_approvals("kit-a1", "alice")],
        ["c1", "c2"],
        "list_approvals(run, 'alice'): that run's requests of that principal",
    )
    expect(await store.list_approvals("kit-a1", "bob"), [], "list_approvals by another principal")
    expect(
        [r.run_id for r in await store.list_approvals(principal=None)],
        ["kit-a2"],
        "list_approvals(principal=None): None matches only None",
    )
    expect(await store.get_approval("kit-a1", "c1", "bob"), None, "get_approval by another")
    decision = ApprovalDecision(True, "carol", "alice", "fine")
    expect(
        await store.decide_approval("kit-a1", "c1", decision, "bob"),
        None,
        "decide_approval by another principal: None (it sees no such request)",
    )
    expect(
        await store.decide_approval("kit-a1", "c9", decision),
        None,
        "decide_approval of an unknown call: None",
    )
    expect(
        _decision(await store.get_approval("kit-a1", "c1")),
        None,
        "the request after refused decisions: still pending",
    )
    before = time.time()
    decided = await store.decide_approval("kit-a1", "c1", decision, "alice")
    first = (True, "carol", "alice", "fine")
    expect(_decision(decided), first, "decide_approval: the decision it returns")
    at = decided.decision.decided_at
    expect_that(
        before - CLOCK_SLACK <= at <= time.time() + CLOCK_SLACK,
        "decide_approval: decided_at",
        "the store's time of the decision (epoch seconds)",
        at,
    )
    expect(_decision(await store.get_approval("kit-a1", "c1")), first, "get_approval, decided")
    try:
        await store.decide_approval("kit-a1", "c1", ApprovalDecision(False, "mallory"))
    except AlreadyDecided as exc:
        expect(
            _decision(exc.request),
            first,
            "AlreadyDecided of a second decision: the first decision, in its request",
        )
    else:
        raise AssertionError("a second decide_approval of one call: expected AlreadyDecided")
    expect(
        _decision(await store.get_approval("kit-a1", "c1")),
        first,
        "the request after a second decision was refused: the first one stands",
    )
    expect(
        _decision(await store.request_approval(asked)),
        first,
        "request_approval of a decided call (a retry): the request with its decision",
    )
    expect(
        [(r.run_id, r.call_id) for r in await store.list_approvals(pending=True)],
        [("kit-a1", "c2"), ("kit-a2", "c1")],
        "list_approvals(pending=True): the requests not decided yet",
    )
    outcomes: list[str] = []

    async def decide(n: int) -> None:
        try:
            await store.decide_approval("kit-a1", "c2", ApprovalDecision(n % 2 == 0, f"p{n}"))
            outcomes.append(f"p{n}")
        except AlreadyDecided:
            outcomes.append("refused")

    async with trio.open_nursery() as nursery:  # four decisions of one call at once
        for n in range(4):
            nursery.start_soon(decide, n)
    expect(outcomes.count("refused"), 3, "four concurrent decisions of one call: the refusals")
    stored = await store.get_approval("kit-a1", "c2")
    winner = [o for o in outcomes if o != "refused"]
    expect(
        None if stored is None or stored.decision is None else [stored.decision.approver],
        winner,
        "four concurrent decisions: the approver stored is the one whose decision won",
    )
    # A call cut by a crash, told it happened: the result the person gave is kept, exactly.
    await store.request_approval(_approval("kit-a1", "cut:c3"))
    said = "delivered: id 42\n« multi-line », 日本"
    happened = ApprovalDecision(False, "ops", "alice", None, result=said)
    decided = await store.decide_approval("kit-a1", "cut:c3", happened, "alice")
    listed = [r for r in await store.list_approvals("kit-a1") if r.call_id == "cut:c3"]
    for found, how in (
        (decided, "decide_approval"),
        (await store.get_approval("kit-a1", "cut:c3"), "get_approval"),
        (listed[0] if listed else None, "list_approvals"),
    ):
        expect(
            None if found is None or found.decision is None else found.decision.result,
            said,
            f"the result of a cut call that happened, as {how} returns it",
        )
    expect(
        None if stored is None or stored.decision is None else stored.decision.result,
        None,
        "the result of a call decided without one: None",
    )


async def _approvals_fenced(store: Any) -> None:
    """An approval request made under a lease is refused (nothing stored) once it is lost."""
    stale = (await store.acquire_lease("f-ap", gone_owner("kit-stale"), LONG_TTL)).lease
    current = (await store.acquire_lease("f-ap", live_owner("kit-new"), LONG_TTL)).lease
    asked = _approval("kit-af", "c1")
    await expect_lease_lost(
        "request_approval", lambda: store.request_approval(asked, stale), stale, current
    )
    expect(await store.get_approval("kit-af", "c1"), None, "a request refused under a lost lease")
    expect(
        await store.request_approval(asked, current),
        asked,
        "request_approval under the current lease",
    )


async def _effect_ledger(store: Any) -> None:
    """The effect ledger's reservation (docs/running.md#the-effect-ledger): a run-bound state
    row saved under the run's lease before a call runs, replaced by the next; the run's retry
    (its next attempt, under another lease) reads it, to know which calls a crash cut."""
    run = RunRecord("kit-fx", "agent", "s-kit-fx", principal="alice")
    _, fence = await _leased_run(store, run, live_owner("kit-crashed"))
    key = "effects:kit-fx"
    await store.save_state(key, {"calls": {"c1": {"tool": "send"}}}, fence, run_id="kit-fx")
    reserved = {"calls": {"c1": {"tool": "send"}, "c2": {"tool": "pay"}}}
    await store.save_state(key, reserved, fence, run_id="kit-fx")
    await store.release_lease(fence)  # the process is gone: no ending, no result of c2
    retry, _ = await _leased_run(store, run, live_owner("kit-retrying"))
    expect(retry.attempt, 2, "the retry of the run whose calls were reserved")
    expect(
        await store.load_state(key),
        reserved,
        "the reservation read by the run's retry: the last one saved, kept across attempts",
    )


async def _turn_with_state(store: Any) -> None:
    """A turn and the run's state row in one step (``record_turn(..., state=)``, the effect
    ledger's reply and reservation in one commit): both written, or neither — a value that
    cannot be stored writes nothing of the turn, and under a lost lease nothing at all. A store
    whose ``record_turn`` has no ``state`` has nothing to check: the runtime writes the two
    apart for it (``soulacy.kernel.store.record_turn_and_state``)."""
    if not takes_state(store):
        return
    run = RunRecord("kit-ts", "agent", "s-kit-ts", principal="alice")
    started, fence = await _leased_run(store, run, live_owner("kit-turns"))
    key = "effects:kit-ts"
    await store.record_turn(started, [Message("user", "go")], [], fence)
    asked = Message("assistant", "", tool_calls=(ToolCall("c1", "send", {"to": "x"}),))
    first = {"calls": {"c1": {"tool": "send"}}}
    await store.record_turn(started, [asked], [], fence, state=StateRow(key, first))
    expect(
        (
            _contents(await store.load_history("agent", "s-kit-ts", "alice")),
            await store.load_state(key),
        ),
        (["go", ""], first),
        "after record_turn(state=): (the history, the state row)",
    )
    # A turn with records, its state row replacing the one before.
    result = Message("tool", "sent", tool_call_id="c1", name="send")
    record = ToolRecord("kit-ts", "c1", "send", {"to": "x"}, "sent", False)
    second = {"calls": {"c2": {"tool": "pay"}}}
    await store.record_turn(started, [result], [record], fence, state=StateRow(key, second))
    expect(
        (
            _contents(await store.load_history("agent", "s-kit-ts", "alice")),
            sorted(await store.load_tool_records("kit-ts")),
            await store.load_state(key),
        ),
        (["go", "", "sent"], ["c1"], second),
        "after a turn with a record and state=: (the history, the records' ids, the state row)",
    )
    # No message and no record: the state row alone.
    third: dict[str, Any] = {"calls": {}}
    await store.record_turn(started, [], [], fence, state=StateRow(key, third))
    expect(await store.load_state(key), third, "after record_turn([], [], state=): the state row")
    # A value that cannot be stored (it contains itself: no JSON) writes nothing of the turn.
    endless: dict[str, Any] = {}
    endless["self"] = endless
    try:
        await store.record_turn(
            started, [Message("assistant", "lost")], [], fence, state=StateRow(key, endless)
        )
    except Exception:  # any error: the value is the caller's mistake
        pass
    else:
        raise AssertionError(
            "record_turn(state=) with a value that contains itself: expected an error, got"
            " none (the value cannot be stored as JSON)"
        )
    expect(
        (
            _contents(await store.load_history("agent", "s-kit-ts", "alice")),
            await store.load_state(key),
        ),
        (["go", "", "sent"], third),
        "after record_turn(state=) failed on its state row: (the history, the state row);"
        " nothing of the turn may be written when its state row is not",
    )
    # Under a lease taken over: neither the turn nor the row.
    stale = (await store.acquire_lease("ts-lost", gone_owner("kit-stale"), LONG_TTL)).lease
    current = (await store.acquire_lease("ts-lost", live_owner("kit-new"), LONG_TTL)).lease
    await expect_lease_lost(
        "record_turn(state=)",
        lambda: store.record_turn(
            started, [Message("assistant", "stale")], [], stale, state=StateRow(key, first)
        ),
        stale,
        current,
    )
    await expect_lease_lost(
        "record_turn([], [], state=)",
        lambda: store.record_turn(started, [], [], stale, state=StateRow(key, first)),
        stale,
        current,
    )
    expect(
        (
            _contents(await store.load_history("agent", "s-kit-ts", "alice")),
            await store.load_state(key),
        ),
        (["go", "", "sent"], third),
        "after record_turn(state=) under a lost lease: (the history, the state row)",
    )


async def _turn_with_ending(store: Any) -> None:
    """A run's last turn, how it ended and its proof in one step (``record_turn(...,
    ending=)``): the answer, the run's status and the proof all written, or none. The proof is
    made from the run's records with the turn's own, and returned as ``get_proof`` reads it;
    an end that cannot be stored (assertions that are no JSON) writes nothing of the turn, and
    under a lost lease nothing at all. A store whose ``record_turn`` has no ``ending`` has
    nothing to check: the runtime makes the three writes for it
    (``soulacy.kernel.store.record_turn_and_end``)."""
    if not takes_ending(store):
        return
    run = RunRecord("kit-te", "agent", "s-kit-te", principal="alice")
    started, fence = await _leased_run(store, run, live_owner("kit-ends"))
    asked = Message("assistant", "", tool_calls=(ToolCall("c1", "send", {"to": "x"}),))
    await store.record_turn(started, [Message("user", "go"), asked], [], fence)
    result = Message("tool", "sent", tool_call_id="c1", name="send")
    record = ToolRecord("kit-te", "c1", "send", {"to": "x"}, "sent", False)
    answer = [result, Message("assistant", "done")]
    metadata = run_metadata(started, "completed")

    async def stored() -> tuple[list[str], list[str], str | None, Any, Any]:
        ran = await store.get_run("kit-te")
        proof = await store.get_proof("kit-te")
        return (
            _contents(await store.load_history("agent", "s-kit-te", "alice")),
            sorted(await store.load_tool_records("kit-te")),
            ran and ran.status,
            [e.metadata and e.metadata.get("status") for e in await store.history("s-kit-te")],
            proof and proof.receipts,
        )

    # An end that cannot be stored (assertions containing themselves: no JSON for the proof)
    # writes nothing: not the turn, not the status.
    endless: dict[str, Any] = {}
    endless["self"] = endless
    try:
        await store.record_turn(
            started, answer, [record], fence, ending=Ending(metadata, [endless])
        )
    except Exception:  # any error: the value is the caller's mistake
        pass
    else:
        raise AssertionError(
            "record_turn(ending=) with assertions that contain themselves: expected an error,"
            " got none (the proof cannot be made)"
        )
    expect(
        await stored(),
        (["go", ""], [], "running", [None, None], None),
        "after record_turn(ending=) failed on its proof: (the history, the records' ids, the"
        " run's status, its entries' status, the proof's receipts); nothing of the turn or the"
        " end may be written when the proof is not",
    )
    # Under a lease taken over: nothing.
    stale = (await store.acquire_lease("te-lost", gone_owner("kit-stale"), LONG_TTL)).lease
    current = (await store.acquire_lease("te-lost", live_owner("kit-new"), LONG_TTL)).lease
    ending = Ending(metadata, [{"ok": True}])
    await expect_ending_lease_lost(store, started, answer, [record], ending, stale, current)
    expect(
        await stored(),
        (["go", ""], [], "running", [None, None], None),
        "after record_turn(ending=) under a lost lease: (the history, the records' ids, the"
        " run's status, its entries' status, the proof's receipts)",
    )
    # Under the run's lease: everything, the proof returned as it is read.
    proof = await store.record_turn(started, answer, [record], fence, ending=ending)
    expect(
        await stored(),
        (["go", "", "sent", "done"], ["c1"], "completed", ["completed"] * 4, 1),
        "after record_turn(ending=): (the history, the records' ids, the run's status, its"
        " entries' status, the proof's receipts)",
    )
    found = await store.get_proof("kit-te")
    expect(
        (getattr(proof, "sha256", proof), proof and proof.data().get("assertions")),
        (found and found.sha256, [{"ok": True}]),
        "record_turn(ending=)'s answer: (its sha256, its assertions), the proof get_proof reads",
    )
    # An end with no turn: the status and the proof of a run whose last turn is stored.
    run = RunRecord("kit-te2", "agent", "s-kit-te2", principal="alice")
    started, fence = await _leased_run(store, run, live_owner("kit-ends"))
    await store.record_turn(started, [Message("user", "go")], [], fence)
    metadata = run_metadata(started, "failed")
    proof = await store.record_turn(started, [], [], fence, ending=Ending(metadata))
    ran = await store.get_run("kit-te2")
    found = await store.get_proof("kit-te2")
    expect(
        (ran and ran.status, proof and proof.sha256),
        ("failed", found and found.sha256),
        "after record_turn([], [], ending=): (the run's status, the proof's sha256 as read)",
    )


async def _suspended_wait(store: Any) -> None:
    """A run suspended while it waits for a decision (docs/approvals.md#suspended-waits): its
    lease given back, it reads interrupted with its request pending; decided meanwhile, its
    retry (the next attempt, under a new lease) finds the decision, which it cannot replace."""
    run = RunRecord("kit-sw", "agent", "s-kit-sw", principal="alice")
    _, fence = await _leased_run(store, run, live_owner("kit-waiting"))
    asked = _approval("kit-sw", "c1")
    await store.request_approval(asked, fence)
    await store.release_lease(fence)  # suspended: no ending, no lease
    stored = await store.get_run("kit-sw")
    expect(
        None if stored is None else (stored.status, stored.attempt),
        ("interrupted", 1),
        "a run whose lease was given back while its call waits: interrupted, attempt 1",
    )
    expect(
        [(r.call_id, r.pending) for r in await store.list_approvals("kit-sw")],
        [("c1", True)],
        "its request, still pending once its lease is given back",
    )
    decision = ApprovalDecision(True, "ann", "alice", None)
    await store.decide_approval("kit-sw", "c1", decision, "alice")
    retry, again = await _leased_run(store, run, live_owner("kit-resuming"))
    expect(retry.attempt, 2, "the retry that resumes the run: its next attempt")
    found = await store.request_approval(asked, again)  # the retry asks again, same call
    expect(
        _decision(found),
        (True, "ann", "alice", None),
        "request_approval by the retry: the decision made while no process held the run",
    )
    expect(
        _decision(await store.get_approval("kit-sw", "c1")),
        (True, "ann", "alice", None),
        "get_approval after the retry asked again: the decision, unchanged",
    )


APPROVAL_CHECKS: tuple[Callable[[Any], Awaitable[None]], ...] = (
    _approvals,
    _approvals_fenced,
    _effect_ledger,
    _turn_with_state,
    _turn_with_ending,
    _suspended_wait,
)


# -- retention: stores with a ``prune`` (RetentionStore); others have nothing to check --------


def _prunes(store: Any) -> bool:
    return callable(getattr(store, "prune", None))


async def _pruned(store: Any, limits: RetentionLimits) -> Pruned:
    pruned = await store.prune(limits)
    expect_that(isinstance(pruned, Pruned), "prune's answer", "a Pruned", pruned)
    return pruned  # type: ignore[no-any-return]


async def _prune_keeps_tokens_growing(store: Any) -> None:
    """Released and long-expired lease rows are pruned, live ones kept; a pruned key granted
    again gets a token above every token ever granted for it (a high-water mark)."""
    if not _prunes(store):
        return
    a, b = live_owner("kit-a"), live_owner("kit-b")
    tokens = []
    for owner in (a, b, a):
        grant = await store.acquire_lease("kit-pruned", owner, LONG_TTL, holder="h")
        tokens.append(grant.lease.token)
        await store.release_lease(grant.lease)
    live = (await store.acquire_lease("kit-live", a, LONG_TTL, holder="h")).lease
    lapsed = (await store.acquire_lease("kit-lapsed", a, SHORT_TTL, holder="h")).lease
    await trio.sleep(EXPIRY_WAIT)
    pruned = await _pruned(store, RetentionLimits(leases=3600.0))
    expect(pruned.leases, 1, "prune(leases=1h): lease rows pruned (one released, none else)")
    expect(who(await store.get_lease("kit-live")), who(live), "a live lease after a prune")
    expect(
        who(await store.get_lease("kit-lapsed")),
        who(lapsed),
        "a lease expired for less than the limit, after a prune",
    )
    renewed = await store.renew_leases([live], LONG_TTL)
    expect(len(renewed), 1, "renew_leases of a live lease after a prune: leases renewed")
    await store.save_state("kit-fenced", {"ok": True}, fence=live)
    again = await store.acquire_lease("kit-pruned", b, LONG_TTL, holder="h")
    expect_that(
        again.acquired and again.lease.token > max(tokens),
        "the token of a pruned key granted again",
        f"acquired, above every token granted for it ({tokens})",
        again,
    )
    pruned = await _pruned(store, RetentionLimits(leases=0.0))
    expect(pruned.leases, 1, "prune(leases=0): the expired lease's row pruned")
    retaken = await store.acquire_lease("kit-lapsed", b, LONG_TTL, holder="h")
    expect_that(
        retaken.acquired and retaken.lease.token > lapsed.token,
        "the token of a pruned expired lease's key granted again",
        f"acquired, above {lapsed.token}",
        retaken,
    )
    await expect_lease_lost(
        "save_state under the pruned lease",
        lambda: store.save_state("kit-x", {}, fence=lapsed),
        lapsed,
        retaken.lease,
    )


async def _finished_run(
    store: Any, run_id: str, principal: str | None, session: str = "kit-s"
) -> RunRecord:
    """A finished run of ``principal`` with history, a tool record, a proof, events and a
    plugin state of its own (``state:RUN``)."""
    run = RunRecord(run_id, "agent", session, principal=principal)
    stored, lease = await _leased_run(store, run, live_owner("kit"))
    tool = ToolRecord(run_id, "c1", "weather", {"city": "Oslo"}, "sunny", False)
    calls = (ToolCall("c1", "weather", {"city": "Oslo"}),)
    turn = [
        Message("user", f"hi from {run_id}"),
        Message("assistant", "", calls),
        Message("tool", "sunny", (), "c1", "weather"),
    ]
    await store.record_turn(stored, turn, [tool], fence=lease)
    await store.append_run_events(
        [RunEventBatch(run_id, principal, _events(1, 2), restart=True, fence=lease)], 100
    )
    await store.save_state(f"state:{run_id}", {"of": run_id}, run_id=run_id)
    metadata = run_metadata(stored, "completed")
    await store.finish_run(run_id, metadata, fence=lease)
    await store.finalize_proof(run_id, metadata, fence=lease)
    await store.release_lease(lease)
    return stored


async def _running_run(
    store: Any, run_id: str, principal: str | None, session: str = "kit-s"
) -> RunRecord:
    """A run still running (its lease held), with history, events and a state of its own."""
    run = RunRecord(run_id, "agent", session, principal=principal)
    stored, lease = await _leased_run(store, run, live_owner("kit"))
    await store.record_turn(stored, [Message("user", f"hi from {run_id}")], [], fence=lease)
    await store.append_run_events(
        [RunEventBatch(run_id, principal, _events(1), restart=True, fence=lease)], 100
    )
    await store.save_state(f"state:{run_id}", {"of": run_id}, run_id=run_id)
    return stored


async def _prune_finished_runs_only(store: Any) -> None:
    """``runs``: a finished run goes with everything it left, its plugin state included; a
    run that is not finished, another principal's conversation in the same session and a
    state of no run stay. Default limits delete nothing a run left."""
    if not _prunes(store):
        return
    await _finished_run(store, "kit-done-a", "alice")
    await store.save_state("kit-no-run", {"kept": True})
    await _running_run(store, "kit-going-b", "bob")  # the same session and agent, bob's
    await _running_run(store, "kit-going-a", "alice")
    nothing = await _pruned(store, RetentionLimits())
    expect(
        (nothing.runs, nothing.history, nothing.proofs, nothing.run_events, nothing.state),
        (0, 0, 0, 0, 0),
        "prune with the default limits: (runs, history, proofs, run events, state) deleted",
    )
    pruned = await _pruned(store, RetentionLimits(runs=0.0))
    expect((pruned.runs, pruned.state), (1, 1), "prune(runs=0): (runs, their states) deleted")
    expect(await store.get_run("kit-done-a"), None, "get_run of a pruned run")
    expect(await store.get_proof("kit-done-a"), None, "get_proof of a pruned run")
    expect(await store.run_events("kit-done-a", 0), None, "run_events of a pruned run")
    expect(await store.load_state("state:kit-done-a"), None, "the state of a pruned run")
    expect(await store.load_tool_records("kit-done-a"), {}, "the tool records of a pruned run")
    expect(
        _contents(await store.load_history("agent", "kit-s", "alice")),
        ["hi from kit-going-a"],
        "alice's conversation after her finished run was pruned (her running run's entry)",
    )
    expect(
        _contents(await store.load_history("agent", "kit-s", "bob")),
        ["hi from kit-going-b"],
        "bob's conversation in the same session after alice's run was pruned",
    )
    for run_id in ("kit-going-a", "kit-going-b"):
        kept = await store.get_run(run_id)
        expect(kept and kept.status, "running", f"the run {run_id} (running) after a prune")
        expect(
            await store.load_state(f"state:{run_id}"),
            {"of": run_id},
            f"the state of the running run {run_id} after a prune",
        )
        events = await store.run_events(run_id, 0)
        expect(events and len(events.events), 1, f"the events of the running run {run_id}")
    expect(await store.load_state("kit-no-run"), {"kept": True}, "a state of no run")


async def _prune_by_age(store: Any) -> None:
    """``history``, ``proofs`` and ``run_events`` delete what finished runs left and keep
    their records; a running run keeps its entries and events."""
    if not _prunes(store):
        return
    await _finished_run(store, "kit-old", "alice")
    await _running_run(store, "kit-now", "alice")
    pruned = await _pruned(store, RetentionLimits(history=0.0, proofs=0.0, run_events=0.0))
    expect(
        (pruned.runs, pruned.proofs, pruned.run_events),
        (0, 1, 2),
        "prune(history=0, proofs=0, run_events=0): (runs, proofs, events) deleted",
    )
    expect_that(
        pruned.history >= 3,
        "prune(history=0): history rows deleted",
        "the finished run's three entries (and its tool records, where kept apart)",
        pruned.history,
    )
    expect(await store.load_tool_records("kit-old"), {}, "the finished run's tool records")
    kept = await store.get_run("kit-old")
    expect(kept and kept.status, "completed", "the finished run's record after a prune")
    expect(await store.get_proof("kit-old"), None, "the finished run's proof after a prune")
    expect(await store.run_events("kit-old", 0), None, "the finished run's events")
    expect(
        _contents(await store.load_history("agent", "kit-s", "alice")),
        ["hi from kit-now"],
        "the conversation after its old entries were pruned (the running run's entry stays)",
    )
    events = await store.run_events("kit-now", 0)
    expect(events and len(events.events), 1, "the running run's events after a prune")


RETENTION_CHECKS: tuple[Callable[[Any], Awaitable[None]], ...] = (
    _prune_keeps_tokens_growing,
    _prune_finished_runs_only,
    _prune_by_age,
)


STORE_CHECKS: tuple[Callable[[Any], Awaitable[None]], ...] = (
    _declares_multi_process,
    _history_round_trip,
    _history_by_agent,
    _conversations_by_principal,
    _metadata_by_run_id,
    _runs_listing,
    _tool_records_replay,
    _proofs,
    _concurrent_finalization,
    *CHECKPOINT_CHECKS,
    _leases,
    _lease_tokens,
    _lease_exclusive,
    _lease_expiry,
    _lease_gone_owner,
    _lease_queue,
    _fencing,
    _attempts,
    _run_ids_reserved,
    _interrupted_runs,
    _counters,
    _cancel_requests,
    _run_events,
    _run_events_resumed,
    _run_events_fenced,
    *APPROVAL_CHECKS,
    *RETENTION_CHECKS,
)
FAILURES_RAISE = "failures_raise"  # the check of the ``failing`` store
STORE_CHECK_NAMES: tuple[str, ...] = (*map(check_name, STORE_CHECKS), FAILURES_RAISE)


async def _failures_raise(store: Any) -> None:
    """Every call of a store whose storage fails raises StorageError."""
    run = RunRecord("kit-f1", "agent", "s-f")
    owner = live_owner("kit")
    lease = Lease("k", owner, 1, "kit-f1")
    calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("load_history", lambda: store.load_history("agent", "s-f")),
        ("history", lambda: store.history("s-f")),
        ("get_run", lambda: store.get_run("kit-f1")),
        ("list_runs", lambda: store.list_runs()),
        ("load_tool_records", lambda: store.load_tool_records("kit-f1")),
        ("get_proof", lambda: store.get_proof("kit-f1")),
        ("start_run", lambda: store.start_run(run)),
        ("record_turn", lambda: store.record_turn(run, [Message("user", "x")], [])),
        ("finish_run", lambda: store.finish_run("kit-f1", run_metadata(run, "completed"))),
        ("finalize_proof", lambda: store.finalize_proof("kit-f1", run_metadata(run, "completed"))),
        ("acquire_lease", lambda: store.acquire_lease("k", owner, LONG_TTL)),
        ("acquire_lease(queue=True)", lambda: store.acquire_lease("k", owner, 1, queue=True)),
        ("renew_leases", lambda: store.renew_leases([lease], LONG_TTL)),
        ("release_lease", lambda: store.release_lease(lease)),
        ("get_lease", lambda: store.get_lease("k")),
        ("request_cancel", lambda: store.request_cancel("stop", run_id="kit-f1")),
        ("cancel_requests", lambda: store.cancel_requests(0)),
        ("spend", lambda: store.spend("cost", 1.0, limit=10.0)),
        ("counter", lambda: store.counter("cost")),
        (
            "append_run_events",
            lambda: store.append_run_events([RunEventBatch("kit-f1", None, _events(1))], 10),
        ),
        ("run_events", lambda: store.run_events("kit-f1", 0)),
        ("wait_run_events", lambda: store.wait_run_events("kit-f1", 0, 1.0)),
    ]
    for what, call in calls:
        await expect_storage_error(what, call)
    await _checkpoint_failures_raise(store)
    await _approval_failures_raise(store)


async def _approval_failures_raise(store: Any) -> None:
    asked = _approval("kit-f1", "c1")
    decision = ApprovalDecision(True, "kit")
    for what, call in (
        ("request_approval", lambda: store.request_approval(asked)),
        ("decide_approval", lambda: store.decide_approval("kit-f1", "c1", decision)),
        ("get_approval", lambda: store.get_approval("kit-f1", "c1")),
        ("list_approvals", lambda: store.list_approvals()),
    ):
        await expect_storage_error(what, call)


async def check_store(
    factory: StoreFactory,
    *,
    failing: StoreFactory | None = None,
    only: str | Iterable[str] | None = None,
) -> None:
    """Run every store check, each on a fresh store from ``factory`` (sync or async).

    A store that serves ``soulacy_store`` must pass: history, runs and attempts, tool records,
    proofs, checkpoints and plugin state, leases (exclusive, renewed, released, tokens never
    reused, takeover after expiry or of an owner provably gone, queues), fenced writes,
    interrupted runs, counters, cancellation requests, run events and, for a store with a
    ``prune`` (``RetentionStore``), retention, in one process (the
    checks that need several are :func:`check_store_processes`'s). A failure raises
    AssertionError naming the check, what was expected and what came back. ``failing``, when
    given, makes a store whose storage fails on every call (for a file store, a file that is
    not a database): each of its calls must raise StorageError, never answer as if there were
    no data (the check ``failures_raise``).

    ``only`` runs the checks it names (one name or several, from :data:`STORE_CHECK_NAMES`)
    and no other: a suite parametrized over the names runs each check as a test of its own.
    A name that is not a check's is a ValueError listing the names, and so is selecting
    ``failures_raise`` without ``failing``.
    """
    selected = select_checks("store", STORE_CHECK_NAMES, only)
    if only is not None and FAILURES_RAISE in selected and failing is None:
        raise ValueError(
            f"store kit: the check {FAILURES_RAISE} needs failing= (a factory of a store whose"
            " storage fails on every call)"
        )
    await run_checks("store", factory, [c for c in STORE_CHECKS if check_name(c) in selected])
    if failing is not None and FAILURES_RAISE in selected:
        await run_checks("store", failing, (_failures_raise,))
