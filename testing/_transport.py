"""The transport conformance kit: what every transport promises, whatever its wire protocol.

A transport (the builtin ``http`` plugin, or a service of yours from ``soulacy_services``)
carries runs between clients and the kernel. Its wire protocol is its own, so the kit drives it
through a small adapter its author writes, a :class:`TransportAdapter`: start a run, read its
events (again, after a dropped connection), cancel it. Then one test proves the promises::

    await check_transport(MyAdapter(url), "echo", principals=("alice", "bob"), slow_agent_id="slow")

``agent_id`` names an agent of the served workspace that answers with text at once;
``slow_agent_id``, one that takes long enough to be cancelled (the cancel check needs it);
``principals``, two clients the adapter can act as (the isolation check needs them). A failure
is an AssertionError ``transport check <name>: <what>: expected <E>, got <G>``. ``only=``
runs the checks it names (of :data:`TRANSPORT_CHECK_NAMES`) and no other::

    await check_transport(MyAdapter(url), "echo", only="reconnect")
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs
import trio

from ._store import check_name, expect, expect_that, select_checks, show

__all__ = [
    "TRANSPORT_CHECKS",
    "TRANSPORT_CHECK_NAMES",
    "RefusalKind",
    "TransportAdapter",
    "TransportEvent",
    "TransportRefused",
    "check_transport",
]

RefusalKind = Literal["not_found", "invalid", "conflict", "busy", "unauthorized"]
RESULT = "result"  # the name of the terminal event of every run
RESULT_KEYS = ("reply", "run_id", "session_id", "status")
NOT_FOUND: tuple[RefusalKind, ...] = ("not_found",)  # what another principal's run is, too
UNKNOWN_AGENT: tuple[RefusalKind, ...] = ("not_found", "invalid")


class TransportRefused(Exception):
    """A transport's clear refusal of a request, as the adapter reports it: ``kind`` is what
    was wrong (HTTP: 404 ``not_found``; 400, 413, 415 and 422 ``invalid``; 409 ``conflict``;
    429 ``busy``; 401 and 403 ``unauthorized``), ``message`` what the transport said."""

    def __init__(self, kind: RefusalKind, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@attrs.frozen
class TransportEvent:
    """One event of a run as a client receives it: an ``id`` to resume after (unique within
    the run, in order), a ``name`` (``result`` for the terminal event) and its ``data``."""

    id: str
    name: str
    data: Mapping[str, Any] = attrs.field(factory=dict)


class TransportAdapter(Protocol):
    """What the kit needs of a transport, written once by its author for its wire protocol.

    ``principal`` names a client the adapter acts as (it holds that client's credentials);
    None is the adapter's one client. A request the transport refuses raises
    :class:`TransportRefused`; anything else raised is a crash, and a failure of the check.
    """

    async def start_run(
        self,
        agent_id: str,
        text: str,
        *,
        principal: str | None = None,
        run_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """Start a run of ``agent_id`` through the transport and return its run id as soon as
        the transport has accepted it (the run has started); do not wait for its end."""
        ...

    async def events(
        self, run_id: str, *, principal: str | None = None, after: str | None = None
    ) -> list[TransportEvent]:
        """The run's events as a client that connects now receives them: after the event with
        id ``after`` (None: from the start), up to and including the terminal ``result``
        event, waiting for it; [] when ``after`` is the result's id."""
        ...

    async def cancel(self, run_id: str, *, principal: str | None = None) -> bool:
        """Ask the transport to cancel the run: True when a running run was cancelled, False
        when it had already ended."""
        ...

    def malformed(self) -> Sequence[tuple[str, Callable[[], Awaitable[object]]]]:
        """Requests broken at the wire level, as (what, call): a body that does not parse, a
        field of the wrong type… Each call must end in a refusal, never a crash. May be []."""
        ...


@attrs.frozen
class _Kit:
    adapter: TransportAdapter
    agent_id: str
    principals: tuple[str, str] | None
    slow_agent_id: str | None
    token: str = attrs.field(factory=lambda: uuid.uuid4().hex[:10])

    def id(self, name: str) -> str:
        return f"kit-{self.token}-{name}"

    @property
    def me(self) -> str | None:
        return self.principals[0] if self.principals else None

    async def run(self, what: str, **options: Any) -> tuple[str, list[TransportEvent]]:
        """A run of the text agent through the transport, and every event it ends with."""
        options.setdefault("principal", self.me)
        run_id = await self.adapter.start_run(self.agent_id, f"hello ({what})", **options)
        events = await self.adapter.events(run_id, principal=options["principal"])
        _ends_with_one_result(events, what, run_id)
        return run_id, events


def _ends_with_one_result(events: Sequence[TransportEvent], run: str, run_id: str) -> None:
    """The events of ``run`` (a description) end with its one result, every event with an id."""
    names = [event.name for event in events]
    expect_that(bool(events), f"the events of {run}", "events ending with a result", events)
    expect(names.count(RESULT), 1, f"the number of {RESULT!r} events of {run}")
    expect(names[-1], RESULT, f"the name of the last event of {run}")
    ids = [event.id for event in events]
    expect_that(
        all(isinstance(i, str) and i for i in ids),
        f"the ids of the events of {run}",
        "an id on every event (a client resumes after it)",
        ids,
    )
    expect(len(set(ids)), len(ids), f"the number of distinct ids of the events of {run} ({ids})")
    result = events[-1].data
    expect_that(
        isinstance(result, Mapping) and all(key in result for key in RESULT_KEYS),
        f"the data of the result of {run}",
        f"a mapping with {', '.join(RESULT_KEYS)}",
        result,
    )
    expect(result["run_id"], run_id, f"the run_id of the result of {run}")


async def _refused(
    what: str, call: Callable[[], Awaitable[object]], kinds: Collection[RefusalKind] = ()
) -> TransportRefused:
    """``call`` must end in a clear refusal (of one of ``kinds``, when given)."""
    wanted = f"a refusal ({' or '.join(kinds)})" if kinds else "a refusal"
    try:
        got = await call()
    except TransportRefused as exc:
        expect_that(not kinds or exc.kind in kinds, what, wanted, f"a refusal ({exc.kind})")
        expect_that(bool(str(exc.message).strip()), f"the message of {what}", "a text", exc)
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{what}: expected {wanted}, got {type(exc).__name__}: {show(str(exc))}"
            " (a crash, not a clear error)"
        ) from exc
    raise AssertionError(f"{what}: expected {wanted}, got the answer {show(got)}")


# -- the checks ---------------------------------------------------------------------------------


async def _result(kit: _Kit) -> None:
    """A run ends with exactly one terminal result: its reply, run id, session and status."""
    session = kit.id("session")
    _, events = await kit.run("a run in a session", session_id=session)
    result = events[-1].data
    expect(result["session_id"], session, "the session_id of the result of a run in a session")
    expect(result["status"], "completed", "the status of the result of a text agent's run")
    expect_that(
        isinstance(result["reply"], str) and bool(result["reply"]),
        "the reply of the result of a text agent's run",
        "the agent's text",
        result["reply"],
    )
    _, events = await kit.run("a run without a session")
    session_id = events[-1].data["session_id"]
    expect_that(
        isinstance(session_id, str) and bool(session_id),
        "the session_id of the result of a run started without one",
        "a session id the transport chose",
        session_id,
    )


async def _reconnect(kit: _Kit) -> None:
    """A client that reconnects after a dropped connection gets each missed event once, then
    the result; one that saw the result gets nothing more."""
    run_id, full = await kit.run("a run read twice")
    again = await kit.adapter.events(run_id, principal=kit.me)
    expect(again, full, "the events of a finished run, read again from the start")
    for cut in sorted({0, len(full) // 2, len(full) - 2} - {-1}):
        rest = await kit.adapter.events(run_id, principal=kit.me, after=full[cut].id)
        expect(
            [(e.id, e.name) for e in rest],
            [(e.id, e.name) for e in full[cut + 1 :]],
            f"the events after reconnecting after event {cut + 1} of {len(full)} (its id"
            f" {full[cut].id!r}): each missed event once, then the result",
        )
        expect(rest, full[cut + 1 :], f"the data of the events after event {cut + 1}")
    after_end = await kit.adapter.events(run_id, principal=kit.me, after=full[-1].id)
    expect(after_end, [], "the events after the result (the client has seen the end)")


async def _unknown_runs(kit: _Kit) -> None:
    """A run that does not exist is a clear 'not found', never an empty success."""
    missing = kit.id("no-such-run")
    await _refused(
        "the events of a run that does not exist",
        lambda: kit.adapter.events(missing, principal=kit.me),
        NOT_FOUND,
    )
    await _refused(
        "cancelling a run that does not exist",
        lambda: kit.adapter.cancel(missing, principal=kit.me),
        NOT_FOUND,
    )


async def _bad_input(kit: _Kit) -> None:
    """Bad input is a clear error, not a crash, and the transport goes on serving."""
    unknown = {
        "an agent that does not exist": kit.id("no-such-agent"),
        "an agent id that is a path": f"../{kit.agent_id}",
        "an empty agent id": "",
    }
    for what, agent_id in unknown.items():
        start = functools.partial(kit.adapter.start_run, agent_id, "hi", principal=kit.me)
        await _refused(f"starting a run of {what} ({agent_id!r})", start, UNKNOWN_AGENT)
    for what, call in kit.adapter.malformed():
        await _refused(f"a malformed request: {what}", call)
    await kit.run("a run after the bad requests (the transport goes on serving)")


async def _principals(kit: _Kit) -> None:
    """A principal's runs are not visible to another: to it they do not exist."""
    if kit.principals is None:
        return
    owner, other = kit.principals
    run_id, full = await kit.run(f"{owner}'s run", run_id=kit.id("owned"), principal=owner)
    await _refused(
        f"{other} reading the events of {owner}'s run",
        lambda: kit.adapter.events(run_id, principal=other),
        NOT_FOUND,
    )
    await _refused(
        f"{other} resuming {owner}'s run after its first event",
        lambda: kit.adapter.events(run_id, principal=other, after=full[0].id),
        NOT_FOUND,
    )
    await _refused(
        f"{other} cancelling {owner}'s run",
        lambda: kit.adapter.cancel(run_id, principal=other),
        NOT_FOUND,
    )
    await _refused(
        f"{other} starting a run with the id of {owner}'s run",
        lambda: kit.adapter.start_run(kit.agent_id, "mine", principal=other, run_id=run_id),
        NOT_FOUND,
    )
    expect(
        await kit.adapter.events(run_id, principal=owner),
        full,
        f"the events of {owner}'s run after {other} tried to reach it",
    )


async def _cancel(kit: _Kit) -> None:
    """Cancelling a running run ends it with a 'cancelled' result; an ended one stays ended."""
    if kit.slow_agent_id is None:
        return
    run_id = await kit.adapter.start_run(kit.slow_agent_id, "take your time", principal=kit.me)
    cancelled = await kit.adapter.cancel(run_id, principal=kit.me)
    expect(cancelled, True, "cancel of a running run (whether it was cancelled)")
    events = await kit.adapter.events(run_id, principal=kit.me)
    _ends_with_one_result(events, "a cancelled run", run_id)
    expect(events[-1].data["status"], "cancelled", "the status of a cancelled run's result")
    again = await kit.adapter.cancel(run_id, principal=kit.me)
    expect(again, False, "cancel of a run that has ended (whether it was cancelled)")


async def _concurrent_runs(kit: _Kit) -> None:
    """Runs at the same time each end with their own result."""
    sessions = {kit.id(f"together-{n}"): kit.id(f"session-{n}") for n in range(1, 4)}
    found: dict[str, list[TransportEvent]] = {}
    failed: list[Exception] = []

    async def one(run_id: str) -> None:
        try:
            await kit.adapter.start_run(
                kit.agent_id, run_id, principal=kit.me, run_id=run_id, session_id=sessions[run_id]
            )
            found[run_id] = await kit.adapter.events(run_id, principal=kit.me)
        except Exception as exc:  # raised below as it is, not as an exception group
            failed.append(exc)

    async with trio.open_nursery() as nursery:
        for run_id in sessions:
            nursery.start_soon(one, run_id)
    if failed:
        raise failed[0]
    for run_id, session in sessions.items():
        what = f"{run_id}, run alongside others"
        _ends_with_one_result(found[run_id], what, run_id)
        expect(
            found[run_id][-1].data["session_id"], session, f"the session_id of the result of {what}"
        )


TRANSPORT_CHECKS: tuple[Callable[[_Kit], Awaitable[None]], ...] = (
    _result,
    _reconnect,
    _unknown_runs,
    _bad_input,
    _principals,
    _cancel,
    _concurrent_runs,
)
TRANSPORT_CHECK_NAMES: tuple[str, ...] = tuple(map(check_name, TRANSPORT_CHECKS))


async def check_transport(
    adapter: TransportAdapter,
    agent_id: str,
    *,
    principals: tuple[str, str] | None = None,
    slow_agent_id: str | None = None,
    time_per_check: float = 60.0,
    only: str | Iterable[str] | None = None,
) -> None:
    """Check that a transport keeps the promises of every transport, through ``adapter``.

    Every run started through it ends with exactly one terminal ``result`` event (reply, run
    id, session id, status), each event with an id; a client that reconnects after a dropped
    connection gets each missed event once, then the result; a run that does not exist, or
    another principal's run (given ``principals``), is a clear "not found" and is left
    untouched; bad input (unknown agents, the adapter's ``malformed`` requests) is a clear
    error, not a crash, and the transport goes on serving; a run can be cancelled (given
    ``slow_agent_id``); runs at the same time each end with their own result. Each check has
    ``time_per_check`` seconds: a transport that never ends a run fails, it does not hang the
    test.

    ``only`` runs the checks it names (one name or several, of :data:`TRANSPORT_CHECK_NAMES`)
    and no other. A name that is not a check's is a ValueError listing the names, and so is
    selecting ``principals`` without ``principals`` or ``cancel`` without ``slow_agent_id``
    (run whole, the kit passes over those two checks then).
    """
    selected = select_checks("transport", TRANSPORT_CHECK_NAMES, only)
    needs = (("principals", "principals", principals), ("cancel", "slow_agent_id", slow_agent_id))
    for name, option, given in needs:
        if only is not None and name in selected and given is None:
            raise ValueError(f"transport kit: the check {name} needs {option}=")
    kit = _Kit(adapter, agent_id, principals, slow_agent_id)
    for check in TRANSPORT_CHECKS:
        name = check_name(check)
        if name not in selected:
            continue
        try:
            with trio.fail_after(time_per_check):
                await check(kit)
        except trio.TooSlowError:
            raise AssertionError(
                f"transport check {name}: its requests: expected answers within"
                f" {time_per_check:g}s, got none (is a run never ended, or a request never"
                " answered?)"
            ) from None
        except AssertionError as exc:
            raise AssertionError(f"transport check {name}: {exc}") from exc
        except Exception as exc:
            raise AssertionError(
                f"transport check {name}: a call of the adapter: expected no exception,"
                f" got {type(exc).__name__}: {show(str(exc))}"
            ) from exc
