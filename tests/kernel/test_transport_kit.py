"""The transport kit tests the contract of every transport, not one plugin's routes.

A throwaway transport with no HTTP at all (requests are messages on a Trio memory channel, as
in the transport seam of test_seams.py, grown to carry principals, event ids and cancellation)
passes the kit through an adapter of a dozen lines, with the ``http`` plugin blocked; and each
promise the kit checks is proven by a planted bug in that transport, caught by that check run
alone (``only=``) with a message that names the check and says what was expected and what came
back.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import (
    TRANSPORT_CHECK_NAMES,
    TRANSPORT_CHECKS,
    TransportEvent,
    TransportRefused,
    Workspace,
    check_transport,
    throwaway_plugin,
)

# "transport check <name>: <what>: expected <E>, got <G>", neither part empty.
MESSAGE = re.compile(r"^transport check \w+: .*\S.*: expected \S.*, got \S.*", re.DOTALL)
OPS = {"start": ("agent_id", "text"), "events": ("run_id",), "cancel": ("run_id",)}


@attrs.define(eq=False)
class RunLog:
    principal: str | None
    events: list[TransportEvent] = attrs.Factory(list)
    started: trio.Event = attrs.Factory(trio.Event)
    done: trio.Event = attrs.Factory(trio.Event)


@attrs.define(eq=False)
class QueueTransport:
    """A throwaway transport: each request is a message on a memory channel, with the channel
    its answer goes back on; each run's kernel events are kept, numbered, for any reader.
    ``bug`` switches one planted mistake on."""

    kernel: Kernel
    bug: str = "none"
    name: str = "queue"
    requests: trio.MemorySendChannel[Any] | None = None
    logs: dict[str, RunLog] = attrs.Factory(dict)
    latest: str = ""

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        send, receive = trio.open_memory_channel[Any](16)
        self.requests = send
        events = self.kernel.events.subscribe(buffer=math.inf)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._observe, events)
            task_status.started(self)
            async for message, reply in receive:
                nursery.start_soon(self._answer, nursery, message, reply)

    # -- the kernel's events, kept per run ------------------------------------------------------

    async def _observe(self, events: trio.MemoryReceiveChannel[Any]) -> None:
        async for event in events:
            log = self.logs.get(event.run_id or "")
            if log is None or log.done.is_set():
                continue
            if event.type != "run.completed":
                self._append(log, event.type, dict(event.data))
                log.started.set()
                continue
            data = dict(event.data)
            run_id = self.latest if self.bug == "results name the latest run" else event.run_id
            result = {
                "reply": data.pop("reply", ""),
                "run_id": "another-run" if self.bug == "result names another run" else run_id,
                "session_id": data.get("session_id"),
                "status": data.get("status"),
                "metadata": data,
            }
            for _ in range({"no result": 0, "two results": 2}.get(self.bug, 1)):
                self._append(log, "result", result)
            log.started.set()
            log.done.set()

    def _append(self, log: RunLog, name: str, data: Mapping[str, Any]) -> None:
        number = "" if self.bug == "no ids" else str(len(log.events) + 1)
        log.events.append(TransportEvent(number, name, data))

    # -- requests -------------------------------------------------------------------------------

    async def _answer(self, nursery: trio.Nursery, message: Any, reply: Any) -> None:
        async with reply:
            try:
                answer = {"ok": await self._handle(nursery, message)}
            except TransportRefused as exc:
                answer = {"refused": exc.kind, "message": exc.message}
            except Exception as exc:  # what a transport must never do with bad input
                answer = {"crash": f"{type(exc).__name__}: {exc}"}
            await reply.send(answer)

    async def _handle(self, nursery: trio.Nursery, message: Mapping[str, Any]) -> Any:
        if self.bug != "malformed crashes":
            required = OPS.get(message.get("op"))  # type: ignore[arg-type]
            if required is None:
                raise TransportRefused("invalid", f"no operation {message.get('op')!r}")
            for key in required:
                if not isinstance(message.get(key), str):
                    raise TransportRefused("invalid", f"{key}: expected a string")
        handler = {"start": self._start, "events": self._events, "cancel": self._cancel}
        return await handler[message["op"]](nursery, message)

    def _visible(self, log: RunLog | None, principal: str | None) -> bool:
        if log is None:
            return False
        return self.bug == "others see runs" or log.principal == principal

    async def _start(self, nursery: trio.Nursery, message: Mapping[str, Any]) -> str:
        agent_id, principal = message["agent_id"], message.get("principal")
        if self.bug == "bad agent crashes":
            self.kernel.agent(agent_id)  # raises for an unknown agent: a crash here
        elif agent_id not in self.kernel.agent_ids():
            raise TransportRefused("not_found", f"no agent {agent_id!r}")
        run_id = message.get("run_id") or uuid.uuid4().hex
        current = self.logs.get(run_id)
        if current is not None and not self._visible(current, principal):
            raise TransportRefused("not_found", f"no run {run_id!r}")
        if current is not None and not current.done.is_set():
            raise TransportRefused("conflict", f"run {run_id!r} is still running")
        session = None if self.bug == "session ignored" else message.get("session_id")
        log = self.logs[run_id] = RunLog(principal)
        self.latest = run_id
        nursery.start_soon(self._run, log, agent_id, message["text"], run_id, session, principal)
        await log.started.wait()
        return str(run_id)

    async def _run(
        self,
        log: RunLog,
        agent_id: str,
        text: str,
        run_id: str,
        session: str | None,
        principal: str | None,
    ) -> None:
        try:
            await self.kernel.run(
                agent_id, text, run_id=run_id, session_id=session, principal=principal
            )
        except Exception as exc:
            if not log.done.is_set():
                failed = {"run_id": run_id, "status": "failed", "reply": "", "error": str(exc)}
                self._append(log, "result", {**failed, "session_id": session})
                log.started.set()
                log.done.set()

    async def _events(self, nursery: trio.Nursery, message: Mapping[str, Any]) -> Any:
        log = self.logs.get(message["run_id"])
        if log is None and self.bug == "unknown run found":
            return []
        if log is None or not self._visible(log, message.get("principal")):
            raise TransportRefused("not_found", f"no run {message['run_id']!r}")
        if self.bug == "never ends":
            await trio.sleep_forever()
        await log.done.wait()
        events = list(log.events)
        after = message.get("after")
        if after is not None and self.bug != "replay ignores after":
            ids = [event.id for event in events]
            if after not in ids:
                raise TransportRefused("invalid", f"no event {after!r} in run {message['run_id']}")
            events = events[ids.index(after) + 1 :]
        return events

    async def _cancel(self, nursery: trio.Nursery, message: Mapping[str, Any]) -> bool:
        log = self.logs.get(message["run_id"])
        if not self._visible(log, message.get("principal")):
            raise TransportRefused("not_found", f"no run {message['run_id']!r}")
        assert log is not None
        if log.done.is_set():
            return False
        if self.bug == "cancel ignored":
            return True
        return self.kernel.cancel_run(message["run_id"])


@attrs.define
class QueueAdapter:
    """The kit's adapter for QueueTransport: a request is one message and its answer."""

    transport: QueueTransport

    async def ask(self, **message: Any) -> Any:
        send, receive = trio.open_memory_channel[Any](1)
        assert self.transport.requests is not None
        await self.transport.requests.send((message, send))
        answer = await receive.receive()
        if "refused" in answer:
            raise TransportRefused(answer["refused"], answer["message"])
        if "crash" in answer:
            raise RuntimeError(answer["crash"])
        return answer["ok"]

    async def start_run(
        self,
        agent_id: str,
        text: str,
        *,
        principal: str | None = None,
        run_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        return str(
            await self.ask(
                op="start",
                agent_id=agent_id,
                text=text,
                principal=principal,
                run_id=run_id,
                session_id=session_id,
            )
        )

    async def events(
        self, run_id: str, *, principal: str | None = None, after: str | None = None
    ) -> list[TransportEvent]:
        return list(await self.ask(op="events", run_id=run_id, principal=principal, after=after))

    async def cancel(self, run_id: str, *, principal: str | None = None) -> bool:
        return bool(await self.ask(op="cancel", run_id=run_id, principal=principal))

    def malformed(self) -> Sequence[tuple[str, Callable[[], Awaitable[object]]]]:
        return [
            ("a start without an agent", lambda: self.ask(op="start", text="hi")),
            ("a text that is not a string", lambda: self.ask(op="start", agent_id="a", text=5)),
            ("an operation that does not exist", lambda: self.ask(op="explode")),
        ]


@pytest.fixture
async def serve(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> AsyncIterator[Callable[[str], Awaitable[QueueAdapter]]]:
    """``await serve(bug)``: a kernel serving a QueueTransport with ``bug``, and no HTTP."""
    workspace.scripted_agent("echo", [{"text": "hello"}], repeat=True)
    workspace.scripted_agent("slow", [{"text": "late", "sleep": 30}], repeat=True)
    async with trio.open_nursery() as nursery:
        stops: list[trio.Event] = []

        async def start(bug: str) -> QueueAdapter:
            plugin = throwaway_plugin(
                "queue", soulacy_services=lambda kernel: [QueueTransport(kernel, bug)]
            )
            kernel = make_kernel(plugins=["no:http", "no:sqlite_store"], extra_plugins=[plugin])
            stop = trio.Event()
            stops.append(stop)
            ready: trio.Event = trio.Event()
            box: dict[str, QueueTransport] = {}

            async def run() -> None:
                async with open_kernel(kernel=kernel) as running:
                    box["transport"] = running.started["queue"]
                    ready.set()
                    await stop.wait()

            nursery.start_soon(run)
            await ready.wait()
            assert [s.name for s in kernel.services()] == ["queue"]  # no HTTP anywhere
            return QueueAdapter(box["transport"])

        yield start
        for stop in stops:
            stop.set()


async def test_a_transport_without_http_passes_the_kit(
    serve: Callable[[str], Awaitable[QueueAdapter]],
) -> None:
    adapter = await serve("none")
    await check_transport(adapter, "echo", principals=("alice", "bob"), slow_agent_id="slow")


async def test_the_checks_that_need_principals_or_a_slow_agent_are_optional(
    serve: Callable[[str], Awaitable[QueueAdapter]],
) -> None:
    """Without principals the runs are the adapter's one client's; without a slow agent,
    nothing is cancelled: a transport with neither still passes the rest."""
    adapter = await serve("none")
    await check_transport(adapter, "echo")
    assert {log.principal for log in adapter.transport.logs.values()} == {None}


# (planted bug, the check that catches it)
BUGS = [
    ("two results", "result"),
    ("no result", "result"),
    ("result names another run", "result"),
    ("session ignored", "result"),
    ("no ids", "result"),
    ("never ends", "result"),
    ("replay ignores after", "reconnect"),
    ("unknown run found", "unknown_runs"),
    ("bad agent crashes", "bad_input"),
    ("malformed crashes", "bad_input"),
    ("others see runs", "principals"),
    ("cancel ignored", "cancel"),
    ("results name the latest run", "concurrent_runs"),
]


def test_every_check_is_proven_by_a_planted_bug() -> None:
    names = {check.__name__.strip("_") for check in TRANSPORT_CHECKS}
    assert names == {check for _, check in BUGS} == set(TRANSPORT_CHECK_NAMES)


@pytest.mark.parametrize(("bug", "check"), BUGS, ids=[bug for bug, _ in BUGS])
async def test_the_kit_catches(
    bug: str,
    check: str,
    serve: Callable[[str], Awaitable[QueueAdapter]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    adapter = await serve(bug)
    with pytest.raises(AssertionError) as info:
        await check_transport(
            adapter, "echo", principals=("alice", "bob"), slow_agent_id="slow", only=check
        )
    message = str(info.value)
    assert message.startswith(f"transport check {check}: "), message
    assert MESSAGE.match(message), message


async def test_the_kit_runs_only_the_checks_it_is_given(
    serve: Callable[[str], Awaitable[QueueAdapter]], autojump_clock: trio.testing.MockClock
) -> None:
    """A transport whose one bug is in the cancel check passes the others, run alone; its runs
    are those of the checks asked for."""
    adapter = await serve("cancel ignored")

    async def check(only: str | list[str]) -> None:
        await check_transport(
            adapter, "echo", principals=("alice", "bob"), slow_agent_id="slow", only=only
        )

    await check("unknown_runs")
    assert adapter.transport.logs == {}  # unknown_runs starts no run
    await check(["result", "reconnect"])
    assert len(adapter.transport.logs) == 3  # two runs of result, one of reconnect
    with pytest.raises(AssertionError, match=r"^transport check cancel: "):
        await check("cancel")


async def test_the_kit_refuses_a_check_it_has_not_or_cannot_run() -> None:
    adapter: Any = object()  # refused before the adapter is used
    unknown = "transport kit: only= selects no check named 'reconnects';"
    with pytest.raises(ValueError, match=unknown) as info:
        await check_transport(adapter, "echo", only="reconnects")
    assert all(name in str(info.value) for name in TRANSPORT_CHECK_NAMES), info.value
    with pytest.raises(ValueError, match="the check principals needs principals="):
        await check_transport(adapter, "echo", slow_agent_id="slow", only="principals")
    with pytest.raises(ValueError, match="the check cancel needs slow_agent_id="):
        await check_transport(adapter, "echo", principals=("a", "b"), only=["result", "cancel"])
