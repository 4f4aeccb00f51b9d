"""``check_store(factory)``: the conformance kit every store implementation runs on itself.

Every failure is an AssertionError that names the check and says what was expected and what
came back; an unexpected exception inside a check is reported the same way.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from ._messages import Message, ToolCall
from ._store import EVERY_PRINCIPAL, RECEIPT_FIELD_CHARS, RunRecord, StorageError, ToolRecord

StoreFactory = Callable[[], Any]  # returns a store, or an awaitable of one
SHOWN_CHARS = 400  # a failure shows at most this much of a value


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


async def _make(factory: StoreFactory) -> Any:
    store = factory()
    return await store if inspect.isawaitable(store) else store


async def _close(store: Any) -> None:
    close = getattr(store, "aclose", None)
    if close is not None:
        await close()


async def run_checks(
    kind: str,
    factory: StoreFactory,
    checks: Sequence[Callable[[Any], Awaitable[None]]],
) -> None:
    """Each check on a fresh store; a failure names the kit and the check."""
    for check in checks:
        name = check.__name__.strip("_")
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


def _metadata(run: RunRecord, status: str, **extra: Any) -> dict[str, Any]:
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
    await store.start_run(run)
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
    for run in (first, second):
        await store.start_run(run)
        await store.record_turn(
            run, [Message("user", run.run_id), Message("assistant", "reply")], []
        )
    metadata = _metadata(first, "incomplete", incomplete_reason="max_turns")
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
    expect(still_running.status, "running", "the status of a run not finished")
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
    proof = await store.finalize_proof("kit-p1", _metadata(run, "completed"))
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
    again = await store.finalize_proof("kit-p1", _metadata(run, "failed"))
    expect(again.sha256, proof.sha256, "finalizing again returns the stored proof (it is final)")
    stored = await store.get_proof("kit-p1")
    expect(stored and stored.sha256, proof.sha256, "get_proof returns the finalized proof")
    await store.start_run(run)  # a retry of the same run id: a new attempt
    expect(await store.get_proof("kit-p1"), None, "get_proof after a retry started (set aside)")
    retried = await store.finalize_proof("kit-p1", _metadata(run, "failed"))
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
        proof = await store.finalize_proof(run.run_id, _metadata(run, status))
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


STORE_CHECKS: tuple[Callable[[Any], Awaitable[None]], ...] = (
    _history_round_trip,
    _history_by_agent,
    _conversations_by_principal,
    _metadata_by_run_id,
    _runs_listing,
    _tool_records_replay,
    _proofs,
    _concurrent_finalization,
)


async def _failures_raise(store: Any) -> None:
    """Every call of a store whose storage fails raises StorageError."""
    run = RunRecord("kit-f1", "agent", "s-f")
    calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("load_history", lambda: store.load_history("agent", "s-f")),
        ("history", lambda: store.history("s-f")),
        ("get_run", lambda: store.get_run("kit-f1")),
        ("list_runs", lambda: store.list_runs()),
        ("load_tool_records", lambda: store.load_tool_records("kit-f1")),
        ("get_proof", lambda: store.get_proof("kit-f1")),
        ("start_run", lambda: store.start_run(run)),
        ("record_turn", lambda: store.record_turn(run, [Message("user", "x")], [])),
        ("finish_run", lambda: store.finish_run("kit-f1", _metadata(run, "completed"))),
        ("finalize_proof", lambda: store.finalize_proof("kit-f1", _metadata(run, "completed"))),
    ]
    for what, call in calls:
        await expect_storage_error(what, call)


async def check_store(factory: StoreFactory, *, failing: StoreFactory | None = None) -> None:
    """Run every store check, each on a fresh store from ``factory`` (sync or async).

    A store that serves ``soulacy_conversation_store`` and ``soulacy_proof_store`` must pass;
    a failure raises AssertionError naming the check, what was expected and what came back.
    ``failing``, when given, makes a store whose storage fails on every call (for a file
    store, a file that is not a database): each of its calls must raise StorageError, never
    answer as if there were no data.
    """
    await run_checks("store", factory, STORE_CHECKS)
    if failing is not None:
        await run_checks("store", failing, (_failures_raise,))
