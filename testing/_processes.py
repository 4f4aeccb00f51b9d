"""``check_store_processes(opener, *args)``: the store checks that need several processes.

:func:`check_store` runs in one process; what a store shared by several processes must also
get right needs real ones. Each check here opens the same store in child OS processes (Python
interpreters running :func:`serve`, driven over their stdin and stdout, one JSON line per
command and per answer) and in this process, and uses the :class:`~soulacy.kernel.store.Store`
protocol only:

* ``exclusive``: two processes race for one lease many times; never both hold it at once, and
  no token is granted twice;
* ``expiry_takeover``: a holder that stops (SIGSTOP) keeps its lease until it expires, by the
  store's clock; then another process takes it over with a greater token, and the old holder
  learns that its lease was lost;
* ``stale_writer_fenced``: a holder paused, taken over and continued: each of its fenced writes
  is refused with LeaseLost, and nothing of them is stored;
* ``durability``: what a process wrote (a turn, a run's end, a proof, a checkpoint, state, a
  counter) is read back by another that opens the store after it exited;
* ``no_interleaving``: two processes take turns on one conversation through its lease
  (``queue=True``): each turn's messages are stored contiguous, in the order of the tokens;
* ``kill_takeover``: the lease of a process killed with SIGKILL is taken over at once (its
  owner is provably gone), and its run reads as interrupted;
* ``counters``: two processes spend against one limit: exactly the limit is granted;
* ``cancel_requests``: a request made by one process is seen by the other;
* ``run_events``: a run's stream events appended by one process wake a waiter in the other,
  which reads them as written;
* ``run_id_race``: two processes, of two principals, start the same fresh run ids at the same
  moment: of each id exactly one owns it, the other's start is refused (``RunIdTaken``) with
  nothing of it stored, and the owner's run is whole.

``opener`` is ``"module:callable"``: ``callable(*args)`` (or the awaitable it returns) is the
store, in this process and in each child (which imports with this process's ``sys.path``), so
``args`` must be JSON. A store whose class says ``multi_process = False`` serves one process:
the kit then runs nothing and its result says why (``skipped``). ``only=`` runs the checks it
names (of :data:`PROCESS_CHECK_NAMES`) and no other, so each can be a test of its own.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import attrs
import trio

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import (
    Checkpoint,
    ConversationKey,
    Lease,
    LeaseLost,
    LeaseOwner,
    RunEvent,
    RunEventBatch,
    RunIdTaken,
    RunRecord,
    ToolRecord,
)

from ._store import expect, expect_that, run_metadata, select_checks, show

DEFAULT_TIMEOUT = 60.0  # seconds a check may take before it is failed (and its children killed)
EXPIRING_TTL = 1.0  # seconds: the lease of a child that is stopped and then taken over
LIVE_TTL = 30.0  # seconds: a lease that does not expire within a check
STDERR_SHOWN = 2000  # characters of a child's stderr shown when it fails


@attrs.frozen
class ProcessKitResult:
    """What :func:`check_store_processes` did: the checks that passed, the ones that could not
    run here (``not_run``: check name and why), or why nothing ran (``skipped``). With
    ``only=``, ``passed`` and ``not_run`` name selected checks only: the others were not
    asked for and appear in neither."""

    passed: tuple[str, ...] = ()
    not_run: tuple[tuple[str, str], ...] = ()
    skipped: str | None = None


# -- opening the store --------------------------------------------------------------------------


async def open_store(opener: str, args: Sequence[Any]) -> Any:
    """``callable(*args)`` of ``opener`` ("module:callable"), awaited when awaitable."""
    module_name, _, attribute = opener.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a store opener is 'module:callable', got {opener!r}")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    store = target(*args)
    return await store if inspect.isawaitable(store) else store


async def _close(store: Any) -> None:
    close = getattr(store, "aclose", None)
    if close is not None:
        await close()


# -- the child: a store served over stdin and stdout ----------------------------------------------


def lease_json(lease: Lease | None) -> dict[str, Any] | None:
    """A lease as JSON, to cross a process boundary."""
    return None if lease is None else attrs.asdict(lease)


def lease_of(data: Mapping[str, Any] | None) -> Lease | None:
    if data is None:
        return None
    fields = dict(data)
    return Lease(**{**fields, "owner": LeaseOwner(**fields["owner"])})


def durable_turn(prefix: str) -> tuple[RunRecord, list[Message], list[ToolRecord]]:
    """The run, messages and tool record the durability check writes in a child."""
    run = RunRecord(f"{prefix}-run", "kit-agent", f"{prefix}-session", user_id="kit-user")
    call = ToolCall("c1", "read", {"path": "a.txt"})
    messages = [
        Message("user", "hello"),
        Message("assistant", "", (call,)),
        Message("tool", "contents", tool_call_id="c1", name="read"),
        Message("assistant", "done"),
    ]
    records = [ToolRecord(run.run_id, "c1", "read", {"path": "a.txt"}, "contents", False)]
    return run, messages, records


@attrs.define
class _Worker:
    """The child's side: its store, its owner and the leases it holds, by key."""

    store: Any
    owner: LeaseOwner
    leases: dict[str, Lease] = attrs.Factory(dict)

    async def acquire(
        self, key: str, ttl: float, holder: str = "", queue: bool = False
    ) -> dict[str, Any]:
        grant = await self.store.acquire_lease(key, self.owner, ttl, holder=holder, queue=queue)
        if grant.acquired:
            self.leases[key] = grant.lease
        return {
            "acquired": grant.acquired,
            "lease": lease_json(grant.lease),
            "took_over_from": lease_json(grant.took_over_from),
            "ahead": grant.ahead,
        }

    async def renew(self, key: str, ttl: float) -> list[dict[str, Any] | None]:
        return [
            lease_json(lease) for lease in await self.store.renew_leases([self.leases[key]], ttl)
        ]

    async def release(self, key: str) -> None:
        await self.store.release_lease(self.leases.pop(key))

    async def race(
        self, key: str, rounds: int, ttl: float, marker: str, seconds: float
    ) -> dict[str, Any]:
        """Acquire and release ``key`` ``rounds`` times, proving exclusivity with a marker
        file that only a holder may create (O_EXCL) and remove."""
        tokens: list[int] = []
        overlaps: list[str] = []
        deadline = time.monotonic() + seconds
        while len(tokens) < rounds and time.monotonic() < deadline:
            grant = await self.store.acquire_lease(key, self.owner, ttl, holder=self.owner.id)
            if not grant.acquired:
                await trio.sleep(random.uniform(0, 0.002))
                continue
            tokens.append(grant.lease.token)
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                overlaps.append(f"token {grant.lease.token}: the other holder's marker was there")
            else:
                await trio.sleep(random.uniform(0, 0.003))
                try:
                    os.unlink(marker)
                except FileNotFoundError:
                    overlaps.append(f"token {grant.lease.token}: the other holder removed ours")
            await self.store.release_lease(grant.lease)
            await trio.sleep(random.uniform(0, 0.002))
        return {"tokens": tokens, "overlaps": overlaps}

    async def start_leased_run(self, key: str, run_id: str, session: str, ttl: float) -> int:
        """Start ``run_id`` under a lease it holds and record its first message."""
        grant = await self.store.acquire_lease(key, self.owner, ttl, holder=run_id)
        if not grant.acquired:
            raise RuntimeError(f"the lease {key!r} is held: {grant.lease}")
        self.leases[key] = grant.lease
        run = await self.store.start_run(RunRecord(run_id, "kit-agent", session), grant.lease)
        await self.store.record_turn(run, [Message("user", "first")], [], grant.lease)
        token: int = grant.lease.token
        return token

    async def fenced_writes(self, key: str, run_id: str, session: str) -> dict[str, Any]:
        """Every fenced write under the lease of ``key``, as its holder believes it still is."""
        fence = self.leases[key]
        run = RunRecord(run_id, "kit-agent", session)
        metadata = run_metadata(run, "completed")
        writes: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            (
                "record_turn",
                lambda: self.store.record_turn(
                    run,
                    [Message("assistant", "stale")],
                    [ToolRecord(run_id, "stale", "t", {}, "stale", False)],
                    fence,
                ),
            ),
            ("finish_run", lambda: self.store.finish_run(run_id, metadata, fence)),
            ("finalize_proof", lambda: self.store.finalize_proof(run_id, metadata, (), fence)),
            (
                "save_checkpoint",
                lambda: self.store.save_checkpoint(
                    Checkpoint(run_id, "stale", "completed", "kit-agent", {}, {}), fence
                ),
            ),
            ("save_state", lambda: self.store.save_state(f"{run_id}-state", {"n": 1}, fence)),
            (
                "start_run",
                lambda: self.store.start_run(
                    RunRecord(f"{run_id}-new", "kit-agent", session), fence
                ),
            ),
        ]
        outcomes: dict[str, Any] = {}
        for name, write in writes:
            try:
                await write()
            except LeaseLost as exc:
                current = exc.current.token if exc.current is not None else None
                outcomes[name] = {"lease_lost": exc.token, "current": current}
            except Exception as exc:
                outcomes[name] = f"{type(exc).__name__}: {exc}"
            else:
                outcomes[name] = "written"
        return outcomes

    async def turns(
        self, key: str, session: str, turns: int, messages: int, ttl: float, pause: float
    ) -> list[int]:
        """``turns`` runs on one conversation, each holding its lease (queued) while it
        records its messages one by one."""
        name = self.owner.id
        tokens: list[int] = []
        for turn in range(turns):
            run_id = f"{name}-turn{turn}"
            while True:
                grant = await self.store.acquire_lease(
                    key, self.owner, ttl, holder=run_id, queue=True
                )
                if grant.acquired:
                    break
                await trio.sleep(0.005)
            lease = grant.lease
            tokens.append(lease.token)
            run = await self.store.start_run(RunRecord(run_id, "kit-agent", session), lease)
            for m in range(messages):
                text = f"{name}|{turn}|{m}|{lease.token}"
                await self.store.record_turn(run, [Message("user", text)], [], lease)
                await trio.sleep(pause)
            await self.store.finish_run(run_id, run_metadata(run, "completed"), lease)
            await self.store.release_lease(lease)
        return tokens

    async def write_all(self, prefix: str) -> str:
        """A turn, a run's end, a proof, a checkpoint, state and a counter: the durability
        check reads them back from another process. Returns the proof's sha256."""
        run, messages, records = durable_turn(prefix)
        grant = await self.store.acquire_lease(
            f"{prefix}-lease", self.owner, LIVE_TTL, holder=run.run_id
        )
        lease = grant.lease
        run = await self.store.start_run(run, lease)
        await self.store.record_turn(run, messages[:2], [], lease)
        await self.store.record_turn(run, messages[2:], records, lease)
        metadata = run_metadata(run, "completed")
        await self.store.finish_run(run.run_id, metadata, lease)
        proof = await self.store.finalize_proof(run.run_id, metadata, (), lease)
        await self.store.save_checkpoint(
            Checkpoint(run.run_id, "step", "completed", "kit-agent", {"result": 1}, {}), lease
        )
        await self.store.save_state(f"{prefix}-state", {"tick": 7}, lease)
        await self.store.spend(f"{prefix}-cost", 2.5)
        await self.store.release_lease(lease)
        sha: str = proof.sha256
        return sha

    async def spend(self, key: str, amount: float, limit: float, times: int) -> list[Any]:
        return [await self.store.spend(key, amount, limit) for _ in range(times)]

    async def request_cancel(self, reason: str, run_id: str) -> int:
        request = await self.store.request_cancel(reason, run_id=run_id)
        request_id: int = request.id
        return request_id

    async def cancel_requests(self, after: int) -> list[list[Any]]:
        found = await self.store.cancel_requests(after)
        return [[r.id, r.reason, r.run_id, r.lease_key] for r in found]

    async def append_run_events(self, run_id: str, ids: list[int], restart: bool) -> None:
        events = [RunEvent(i, "delta", {"text": f"{run_id}:{i}"}) for i in ids]
        await self.store.append_run_events([RunEventBatch(run_id, "kit", events, restart)], 100)

    async def claim_runs(
        self, run_ids: list[str], principal: str, session: str, start_at: float, every: float
    ) -> dict[str, Any]:
        """Start each of ``run_ids`` as ``principal``'s run on ``session`` (under a lease of
        its own), the n-th at ``start_at + n * every`` by the wall clock, as the other process
        does: a started run records a turn and finishes; a refused start says what it was
        told."""
        outcomes: dict[str, Any] = {}
        for n, run_id in enumerate(run_ids):
            await trio.sleep(max(0.0, start_at + n * every - time.time()))
            key = f"{session}:{run_id}"
            grant = await self.store.acquire_lease(key, self.owner, LIVE_TTL, holder=run_id)
            lease = grant.lease
            record = RunRecord(run_id, "kit-agent", session, None, principal)
            try:
                run = await self.store.start_run(record, lease)
            except RunIdTaken as exc:
                outcomes[run_id] = {"refused": list(exc.differs), "owner": exc.owner}
            else:
                text = f"{principal}'s {run_id}"
                await self.store.record_turn(run, [Message("user", text)], [], lease)
                await self.store.finish_run(run_id, run_metadata(run, "completed"), lease)
                outcomes[run_id] = {"started": run.attempt}
            await self.store.release_lease(lease)
        return outcomes


async def _serve(spec: Mapping[str, Any], out: IO[str]) -> None:
    def answer(reply: Mapping[str, Any]) -> None:
        out.write(json.dumps(reply) + "\n")
        out.flush()

    store = await open_store(spec["opener"], spec["args"])
    try:
        worker = _Worker(store, LeaseOwner.current(spec["owner"]))
        await store.get_lease(f"{spec['owner']}-warm-up")  # connected before the first command
        answer({"ok": {"pid": os.getpid()}})
        while True:
            line = await trio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                break
            command = json.loads(line)
            if command["op"] == "exit":
                break
            try:
                result = await getattr(worker, command["op"])(**command["args"])
            except Exception:
                answer({"error": traceback.format_exc()})
            else:
                answer({"ok": result})
    finally:
        await _close(store)
    answer({"ok": "closed"})


def serve() -> None:
    """A child's main: open the store of ``sys.argv[1]`` (JSON: opener, args, owner) and run
    the commands read from stdin, one JSON line each, answering each on stdout."""
    spec = json.loads(sys.argv[1])
    out = os.fdopen(os.dup(1), "w")  # the answers; anything printed goes to stderr instead
    os.dup2(2, 1)
    trio.run(_serve, spec, out)


# -- the parent: children driven over pipes -------------------------------------------------------


class _Child:
    """A child process serving the store, and the answers it sent but that were not read."""

    def __init__(self, name: str, process: trio.Process, stderr: IO[bytes]) -> None:
        self.name = name
        self.process = process
        self.stderr = stderr
        self.pid = process.pid
        self._buffer = b""

    def stderr_tail(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip()
        return text[-STDERR_SHOWN:] if text else "(nothing)"

    async def send(self, op: str, **args: Any) -> None:
        assert self.process.stdin is not None
        line = json.dumps({"op": op, "args": args}) + "\n"
        await self.process.stdin.send_all(line.encode())

    async def receive(self, what: str) -> Any:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some()
            if not chunk:
                await self.process.wait()
                raise AssertionError(
                    f"the child process {self.name}'s answer to {what}: expected an answer,"
                    f" got its exit (code {self.process.returncode}); its stderr: "
                    + self.stderr_tail()
                )
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply = json.loads(line)
        if "error" in reply:
            raise AssertionError(
                f"the child process {self.name}'s {what}: expected no exception, got "
                + reply["error"]
            )
        return reply["ok"]

    async def call(self, op: str, **args: Any) -> Any:
        await self.send(op, **args)
        return await self.receive(op)

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def exit(self) -> int:
        """Ask the child to close its store and exit; its exit code."""
        await self.send("exit")
        await self.receive("exit (closing its store)")
        return await self.process.wait()


@attrs.define
class _Run:
    """One run of the kit: what opens the store, and the children it started."""

    opener: str
    args: Sequence[Any]
    folder: Path
    prefix: str = attrs.field(factory=lambda: f"kit-{uuid.uuid4().hex[:8]}")
    children: list[_Child] = attrs.Factory(list)
    names: Any = attrs.field(factory=lambda: itertools.count(1))

    def key(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    async def child(self) -> _Child:
        name = f"{self.prefix}-child{next(self.names)}"
        spec = json.dumps({"opener": self.opener, "args": list(self.args), "owner": name})
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the opener's imports
        stderr = tempfile.TemporaryFile(dir=self.folder)  # noqa: SIM115 (closed with the child)
        code = "from soulacy.testing._processes import serve; serve()"
        process = await trio.lowlevel.open_process(
            [sys.executable, "-c", code, spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        child = _Child(name, process, stderr)
        self.children.append(child)
        await child.receive("opening the store")
        return child

    async def stop_children(self) -> None:
        with trio.CancelScope(shield=True):
            for child in self.children:
                if child.process.returncode is None:
                    child.process.kill()  # a stopped process is killed too
                with trio.move_on_after(10):
                    await child.process.wait()
                for stream in (child.process.stdin, child.process.stdout):
                    if stream is not None:
                        await stream.aclose()
                child.stderr.close()
            self.children.clear()

    @asynccontextmanager
    async def store(self) -> AsyncIterator[Any]:
        """The store opened in this process (closed after)."""
        store = await open_store(self.opener, self.args)
        try:
            yield store
        finally:
            with trio.CancelScope(shield=True):
                await _close(store)


def _parent_owner(run: _Run) -> LeaseOwner:
    return LeaseOwner.current(f"{run.prefix}-parent")


async def _wait_expired(store: Any, key: str, seconds: float) -> Lease | None:
    """Poll ``key`` until the store says its lease expired (or ``seconds`` passed)."""
    deadline = trio.current_time() + seconds
    lease: Lease | None = await store.get_lease(key)
    while lease is not None and not lease.expired and trio.current_time() < deadline:
        await trio.sleep(0.05)
        lease = await store.get_lease(key)
    return lease


# -- the checks ---------------------------------------------------------------------------------


async def _exclusive(run: _Run) -> None:
    """Two processes race for one lease: never both hold it, no token granted twice."""
    first, second = await run.child(), await run.child()
    key, rounds = run.key("race"), 30
    marker = str(run.folder / "holder.marker")
    for child in (first, second):  # both start at once
        await child.send("race", key=key, rounds=rounds, ttl=LIVE_TTL, marker=marker, seconds=40)
    results = [await child.receive("race") for child in (first, second)]
    for child, result in zip((first, second), results, strict=True):
        expect(
            result["overlaps"],
            [],
            f"two processes racing for one lease {rounds} times each: the times the process"
            f" {child.name} found the other holding it at once",
        )
        expect(len(result["tokens"]), rounds, f"the grants the process {child.name} got")
        tokens = result["tokens"]
        expect_that(
            all(x < y for x, y in itertools.pairwise(tokens)),
            f"the tokens granted to {child.name}, in order",
            "strictly increasing",
            tokens,
        )
    every = results[0]["tokens"] + results[1]["tokens"]
    expect_that(
        len(set(every)) == len(every),
        "the tokens granted to the two processes",
        "each granted once (a token is never reused)",
        sorted(every),
    )
    async with run.store() as store:
        expect(await store.get_lease(key), None, "the lease after both released it")


async def _expiry_takeover(run: _Run) -> None:
    """A stopped holder keeps its lease until it expires; then another process takes it over
    with a greater token, and the old holder's renewal fails."""
    child = await run.child()
    key = run.key("expiry")
    held = lease_of((await child.call("acquire", key=key, ttl=EXPIRING_TTL, holder="h"))["lease"])
    assert held is not None
    me = _parent_owner(run)
    async with run.store() as store:
        child.signal(signal.SIGSTOP)
        try:
            refused = await store.acquire_lease(key, me, LIVE_TTL, holder="h")
            expect(
                (refused.acquired, refused.lease and refused.lease.owner.pid),
                (False, child.pid),
                f"acquire_lease of a live (stopped) process's lease before its {EXPIRING_TTL}s"
                " expire: (acquired, the holder's pid)",
            )
            expired = await _wait_expired(store, key, EXPIRING_TTL + 10)
            expect(
                expired and expired.expired,
                True,
                f"get_lease of a stopped holder's lease, {EXPIRING_TTL}s on (expired)",
            )
            taken = await store.acquire_lease(key, me, LIVE_TTL, holder="h")
            expect(
                (taken.acquired, taken.took_over_from and taken.took_over_from.owner.pid),
                (True, child.pid),
                "acquire_lease of an expired lease of another process: (acquired,"
                " took_over_from's pid)",
            )
            expect_that(
                taken.lease.token > held.token,
                "the token of the takeover",
                f"greater than the stopped holder's {held.token}",
                taken.lease.token,
            )
        finally:
            child.signal(signal.SIGCONT)
        expect(
            await child.call("renew", key=key, ttl=LIVE_TTL),
            [],
            "renew_leases by the old holder, continued after the takeover (its lease lost)",
        )
        again = await child.call("acquire", key=key, ttl=LIVE_TTL, holder="h")
        expect(
            (again["acquired"], again["lease"] and again["lease"]["token"]),
            (False, taken.lease.token),
            "acquire_lease by the old holder after the takeover: (acquired, the new token)",
        )


async def _stale_writer_fenced(run: _Run) -> None:
    """A holder paused, taken over and continued: its fenced writes are all refused."""
    child = await run.child()
    key, run_id, session = run.key("stale"), run.key("stale-run"), run.key("stale-session")
    token = await child.call(
        "start_leased_run", key=key, run_id=run_id, session=session, ttl=EXPIRING_TTL
    )
    me = _parent_owner(run)
    async with run.store() as store:
        child.signal(signal.SIGSTOP)
        try:
            await _wait_expired(store, key, EXPIRING_TTL + 10)
            taken = await store.acquire_lease(key, me, LIVE_TTL, holder=run_id)
            expect(
                (taken.acquired, taken.took_over_from and taken.took_over_from.token),
                (True, token),
                "the takeover of a stopped process's expired lease: (acquired, the token"
                " taken over)",
            )
        finally:
            child.signal(signal.SIGCONT)
        outcomes = await child.call("fenced_writes", key=key, run_id=run_id, session=session)
        lost = {"lease_lost": token, "current": taken.lease.token}
        for write, outcome in outcomes.items():
            expect(
                outcome,
                lost,
                f"{write} by the continued holder under its lost lease: LeaseLost (its token,"
                " the current one)",
            )
        expect(
            [m.content for m in await store.load_history("kit-agent", session)],
            ["first"],
            "the conversation after the stale holder's refused record_turn (nothing written)",
        )
        expect(await store.load_tool_records(run_id), {}, "the tool records after it")
        stored = await store.get_run(run_id)
        expect(
            (stored is not None, stored and stored.finished_at),
            (True, None),
            "the run after the stale holder's refused finish_run: (stored, finished_at)",
        )
        expect(await store.get_proof(run_id), None, "the proof after a refused finalize_proof")
        expect(await store.load_checkpoints(run_id), [], "the checkpoints after a refused save")
        expect(await store.load_state(f"{run_id}-state"), None, "the state after a refused save")
        expect(await store.get_run(f"{run_id}-new"), None, "a run whose fenced start was refused")


async def _durability(run: _Run) -> None:
    """What a process wrote is read by another that opens the store after it exited."""
    child = await run.child()
    sha = await child.call("write_all", prefix=run.prefix)
    expect(await child.exit(), 0, "the exit code of the child that wrote (it closed its store)")
    written, messages, records = durable_turn(run.prefix)
    async with run.store() as store:
        expect(
            await store.load_history("kit-agent", written.session_id, None, "kit-user"),
            messages,
            "load_history, reopened, of a conversation another process wrote",
        )
        loaded = await store.load_tool_records(written.run_id)
        expect(
            {k: (r.name, dict(r.arguments), r.content, r.is_error) for k, r in loaded.items()},
            {r.call_id: (r.name, dict(r.arguments), r.content, r.is_error) for r in records},
            "load_tool_records, reopened",
        )
        stored = await store.get_run(written.run_id)
        expect(
            (stored and stored.status, stored and stored.attempt),
            ("completed", 1),
            "get_run, reopened, of a run another process finished: (status, attempt)",
        )
        metadata = run_metadata(written, "completed")
        entries = await store.history(written.session_id)
        expect(
            [e.metadata and dict(e.metadata) for e in entries],
            [metadata] * len(messages),
            "the entries' reply metadata, reopened",
        )
        proof = await store.get_proof(written.run_id)
        expect(proof and proof.sha256, sha, "get_proof, reopened: the proof the child stored")
        expect(
            [
                (c.step_id, c.status, c.evidence)
                for c in await store.load_checkpoints(written.run_id)
            ],
            [("step", "completed", {"result": 1})],
            "load_checkpoints, reopened",
        )
        expect(await store.load_state(f"{run.prefix}-state"), {"tick": 7}, "load_state, reopened")
        expect(await store.counter(f"{run.prefix}-cost"), 2.5, "counter(), reopened")
        expect(await store.get_lease(f"{run.prefix}-lease"), None, "the lease it released")


async def _no_interleaving(run: _Run) -> None:
    """Two processes take turns on one conversation through its lease: each turn's messages
    are contiguous, turns in the order of their tokens, both served."""
    first, second = await run.child(), await run.child()
    session, turns, messages = run.key("shared"), 6, 3
    key = ConversationKey("kit-agent", session).lease_key()  # as a kernel serializes turns
    for child in (first, second):
        await child.send(
            "turns", key=key, session=session, turns=turns, messages=messages, ttl=10, pause=0.005
        )
    tokens = [await child.receive("turns") for child in (first, second)]
    async with run.store() as store:
        entries = await store.history(session)
    contents = [e.content for e in entries]
    expect(
        len(contents),
        2 * turns * messages,
        f"the messages stored by two processes of {turns} turns of {messages} messages each",
    )
    groups: list[tuple[str, str, list[str], int]] = []  # (process, turn, message numbers, token)
    for text in contents:
        name, turn, m, token = text.split("|")
        if groups and groups[-1][:2] == (name, turn):
            groups[-1][2].append(m)
        else:
            groups.append((name, turn, [m], int(token)))
    expect_that(
        len(groups) == 2 * turns and all(g[2] == [str(n) for n in range(messages)] for g in groups),
        "the stored conversation, turn by turn (process|turn|message|token)",
        f"{2 * turns} turns of messages 0..{messages - 1}, each turn's contiguous (the lease"
        " held around each turn)",
        contents,
    )
    order = [g[3] for g in groups]
    expect_that(
        all(x < y for x, y in itertools.pairwise(order)),
        "the tokens of the turns in the order stored",
        "strictly increasing (each turn under a new grant)",
        order,
    )
    switches = sum(a[0] != b[0] for a, b in itertools.pairwise(groups))
    expect_that(
        switches >= turns // 2,
        f"the times the conversation passed from one process to the other ({2 * turns} turns,"
        " both asking with queue=True)",
        f"at least {turns // 2} (queued waiters are served in turn)",
        [g[0].rsplit("-", 1)[-1] for g in groups],
    )
    expect(sorted(tokens[0] + tokens[1]), sorted(order), "the tokens the processes were granted")


async def _kill_takeover(run: _Run) -> None:
    """The lease of a process killed with SIGKILL is taken over at once: its owner is
    provably gone; its run reads as interrupted."""
    child = await run.child()
    key, run_id, session = run.key("killed"), run.key("killed-run"), run.key("killed-session")
    token = await child.call(
        "start_leased_run", key=key, run_id=run_id, session=session, ttl=LIVE_TTL
    )
    child.process.kill()
    await child.process.wait()
    async with run.store() as store:
        stored = await store.get_run(run_id)
        expect(
            (stored and stored.status, stored and (stored.lease or {}).get("owner", {}).get("pid")),
            ("interrupted", child.pid),
            "get_run of a run whose process was killed (SIGKILL): (status, the lease's pid)",
        )
        taken = await store.acquire_lease(key, _parent_owner(run), LIVE_TTL, holder=run_id)
        expect(
            (
                taken.acquired,
                who_pid(taken.took_over_from),
                taken.took_over_from and taken.took_over_from.token,
            ),
            (True, child.pid, token),
            f"acquire_lease, at once, of the lease of a killed process (its ttl {LIVE_TTL}s not"
            " passed): (acquired, took_over_from's pid and token)",
        )
        expect_that(
            taken.lease.token > token,
            "the token of the takeover",
            f"greater than the killed holder's {token}",
            taken.lease.token,
        )


def who_pid(lease: Lease | None) -> int | None:
    return lease.owner.pid if lease is not None else None


async def _counters(run: _Run) -> None:
    """Two processes spend against one limit: exactly the limit is granted."""
    first, second = await run.child(), await run.child()
    key = run.key("budget")
    for child in (first, second):
        await child.send("spend", key=key, amount=1, limit=40, times=30)
    results = [await child.receive("spend") for child in (first, second)]
    granted = sorted(r for rs in results for r in rs if r is not None)
    expect(
        granted,
        [float(n) for n in range(1, 41)],
        "the totals granted to two processes spending 1, 30 times each, against a limit of 40",
    )
    async with run.store() as store:
        expect(await store.counter(key), 40, "the counter after both spent")


async def _cancel_requests(run: _Run) -> None:
    """A cancellation requested by one process is seen by the other, and back."""
    child = await run.child()
    async with run.store() as store:
        seen = await store.cancel_requests(0)
        after = max((r.id for r in seen), default=0)
        asked = await child.call("request_cancel", reason=run.key("stop"), run_id=run.key("run"))
        found = await store.cancel_requests(after)
        expect(
            [(r.id, r.reason, r.run_id) for r in found],
            [(asked, run.key("stop"), run.key("run"))],
            "cancel_requests in this process after another process's request_cancel",
        )
        mine = await store.request_cancel(run.key("shutdown"), lease_key=run.key("conv"))
        expect(
            await child.call("cancel_requests", after=after),
            [
                [asked, run.key("stop"), run.key("run"), None],
                [mine.id, run.key("shutdown"), None, run.key("conv")],
            ],
            "cancel_requests in the other process: both requests, oldest first",
        )


async def _run_events(run: _Run) -> None:
    """A run's events appended by one process wake a waiter in another and read the same."""
    child = await run.child()
    run_id = run.key("events")
    async with run.store() as store:
        woke: list[bool] = []

        async def wait() -> None:
            woke.append(await store.wait_run_events(run_id, 0, 30.0))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.sleep(0.2)  # waiting (and, where the store listens, listening) by now
            await child.call("append_run_events", run_id=run_id, ids=[1, 2], restart=True)
        found = await store.run_events(run_id, 0)
        read = (found.principal, [(e.id, e.data) for e in found.events]) if found else None
        expect(
            (woke, read),
            ([True], ("kit", [(1, {"text": f"{run_id}:1"}), (2, {"text": f"{run_id}:2"})])),
            "another process's appended events: (the waiter woke, (principal, events read))",
        )


async def _run_id_race(run: _Run) -> None:
    """Two processes of two principals start the same fresh run ids at the same moment: each
    id is owned by exactly one of them, the other is refused with nothing of it stored, and
    the owner's run (its record, history and ending) is whole."""
    alice, bob = await run.child(), await run.child()
    rounds, every = 12, 0.05
    run_ids = [run.key(f"race-{n}") for n in range(rounds)]
    sessions = {"alice": run.key("alice"), "bob": run.key("bob")}
    start_at = time.time() + 0.5  # both children are waiting by then
    for child, principal in ((alice, "alice"), (bob, "bob")):
        await child.send(
            "claim_runs",
            run_ids=run_ids,
            principal=principal,
            session=sessions[principal],
            start_at=start_at,
            every=every,
        )
    claims = {"alice": await alice.receive("claim_runs"), "bob": await bob.receive("claim_runs")}
    async with run.store() as store:
        histories = {
            who: [e for e in await store.history(session) if e.principal == who]
            for who, session in sessions.items()
        }
        for run_id in run_ids:
            said = {who: claims[who][run_id] for who in claims}
            owners = [who for who, outcome in said.items() if "started" in outcome]
            expect(
                len(owners),
                1,
                f"the processes whose start of the fresh run id {run_id} (raced by alice's and"
                f" bob's processes at once) won: {said}",
            )
            owner = owners[0]
            loser = "bob" if owner == "alice" else "alice"
            expect(
                (said[owner], said[loser]),
                ({"started": 1}, {"refused": ["session_id", "principal"], "owner": owner}),
                f"what the two processes were told of {run_id}: (the owner's attempt, the"
                " other's RunIdTaken (differs, owner))",
            )
            stored = await store.get_run(run_id)
            expect(
                stored and (stored.principal, stored.session_id, stored.status, stored.attempt),
                (owner, sessions[owner], "completed", 1),
                f"get_run of {run_id}: the owner's (principal, session, status, attempt)",
            )
            expect(
                [
                    (e.content, e.metadata and e.metadata.get("status"))
                    for e in histories[owner]
                    if e.run_id == run_id
                ],
                [(f"{owner}'s {run_id}", "completed")],
                f"the owner's history of {run_id}: its message, with its ending",
            )
            expect(
                [e.content for e in histories[loser] if e.run_id == run_id],
                [],
                f"the refused principal's history of {run_id} (nothing of it stored)",
            )


CHECKS: tuple[tuple[str, Callable[[_Run], Awaitable[None]], bool], ...] = (
    ("exclusive", _exclusive, False),
    ("expiry_takeover", _expiry_takeover, True),  # True: needs SIGSTOP
    ("stale_writer_fenced", _stale_writer_fenced, True),
    ("durability", _durability, False),
    ("no_interleaving", _no_interleaving, False),
    ("kill_takeover", _kill_takeover, False),
    ("counters", _counters, False),
    ("cancel_requests", _cancel_requests, False),
    ("run_events", _run_events, False),
    ("run_id_race", _run_id_race, False),
)
PROCESS_CHECK_NAMES: tuple[str, ...] = tuple(name for name, _, _ in CHECKS)


async def check_store_processes(
    opener: str,
    *args: Any,
    seconds_per_check: float = DEFAULT_TIMEOUT,
    only: str | Iterable[str] | None = None,
) -> ProcessKitResult:
    """Run the multi-process checks on the store ``opener(*args)`` opens (``opener`` is
    ``"module:callable"``, ``args`` JSON), with child processes opening it too.

    A store whose class says ``multi_process = False`` is not checked: the result's ``skipped``
    says why (a pytest test calls ``pytest.skip(result.skipped)``). Each check has
    ``seconds_per_check``; its children are killed when it ends, however it ends. A failure raises
    AssertionError naming the check, what was expected and what came back. ``only`` runs the
    checks it names (one name or several, of :data:`PROCESS_CHECK_NAMES`) and no other; a name
    that is not a check's is a ValueError listing the names, raised before the store is opened.
    """
    selected = select_checks("store processes", PROCESS_CHECK_NAMES, only)
    probe = await open_store(opener, args)
    try:
        declared = getattr(type(probe), "multi_process", None)
    finally:
        await _close(probe)
    if declared is not True:
        what = "says multi_process = False" if declared is False else "declares no multi_process"
        return ProcessKitResult(
            skipped=f"{type(probe).__name__} {what}: it serves one process only, so the"
            " multi-process store checks do not apply"
        )
    passed: list[str] = []
    not_run: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="soulacy-kit-") as folder:
        for name, check, needs_stop in CHECKS:
            if name not in selected:
                continue
            if needs_stop and not hasattr(signal, "SIGSTOP"):
                not_run.append((name, "this platform cannot stop a process (no SIGSTOP)"))
                continue
            run = _Run(opener, args, Path(folder))
            started = time.monotonic()
            try:
                with trio.fail_after(seconds_per_check):
                    await check(run)
            except trio.TooSlowError:
                raise AssertionError(
                    f"store processes check {name}: its duration: expected under"
                    f" {seconds_per_check}s, got a timeout after"
                    f" {time.monotonic() - started:.1f}s (a child process or the store hung);"
                    " stderr of its children: "
                    + show([c.stderr_tail() for c in run.children], 4 * STDERR_SHOWN)
                ) from None
            except AssertionError as exc:
                raise AssertionError(f"store processes check {name}: {exc}") from exc
            except Exception as exc:
                raise AssertionError(
                    f"store processes check {name}: a call of the store: expected no exception,"
                    f" got {type(exc).__name__}: {exc}"
                ) from exc
            finally:
                await run.stop_children()
            passed.append(name)
    return ProcessKitResult(tuple(passed), tuple(not_run))
