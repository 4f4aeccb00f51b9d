"""Helpers of the AG-UI tests: the official AG-UI client (``@ag-ui/client``, run by node), and a
client of ``/api/v1/agui`` that checks every event it receives with the ``ag-ui-protocol``
package's own pydantic event types and the rules of a run's lifecycle those types cannot check
one event at a time."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
from ag_ui.core import Event, RunAgentInput, UserMessage
from pydantic import TypeAdapter

from soulacy.testing import Workspace

EVENT = TypeAdapter(Event)


@attrs.frozen
class Received:
    id: int
    event: Any  # an ag_ui.core event model
    raw: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.event.type.value)


def run_input(thread_id: str, run_id: str, text: str, **more: Any) -> dict[str, Any]:
    """A ``RunAgentInput`` built with the SDK's model, as a client sends it (camelCase)."""
    message = UserMessage(id=f"{run_id}-user", content=text)
    built = RunAgentInput(
        thread_id=thread_id,
        run_id=run_id,
        messages=[message],
        tools=[],
        context=[],
        state=more.pop("state", {}),
        forwarded_props={},
        **more,
    )
    dumped: dict[str, Any] = built.model_dump(mode="json", by_alias=True)
    return dumped


def parse_sse(body: str) -> list[Received]:
    """The SSE events of ``body`` (the WHATWG rules: ``id`` and ``data`` fields, several
    ``data`` lines joined by a newline, comments ignored), each validated by the SDK."""
    received = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        event_id, data = None, []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "id":
                event_id = int(value)
            elif field == "data":
                data.append(value)
        if data:
            assert event_id is not None, f"an event without an id: {data}"
            text = "\n".join(data)
            received.append(Received(event_id, EVENT.validate_json(text), json.loads(text)))
    return received


class EventReader:
    """The events of a streamed answer, read as they arrive (the answer may stay open); use
    it as an async context manager (it closes what reads the answer)."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._chunks = response.aiter_text()
        self._buffer = ""

    async def __aenter__(self) -> EventReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # httpx reads through a chain of async generators that stay suspended when reading
        # stops early (encode/httpx#3686): closed, the connection's next read ends them all.
        await self._response.aclose()
        with contextlib.suppress(Exception):
            async for _ in self._chunks:
                pass

    async def next(self, count: int) -> list[Received]:
        """The next ``count`` events; fewer when the answer ends first."""
        received: list[Received] = []
        while len(received) < count:
            if "\n\n" in self._buffer:
                block, self._buffer = self._buffer.split("\n\n", 1)
                received += parse_sse(block + "\n\n")
                continue
            chunk = await anext(self._chunks, None)
            if chunk is None:
                return received
            self._buffer += chunk
        return received


async def post_run(
    client: httpx.AsyncClient, agent_id: str, body: dict[str, Any]
) -> tuple[httpx.Response, list[Received]]:
    answer = await client.post(
        f"/agui/{agent_id}", json=body, headers={"accept": "text/event-stream"}
    )
    if answer.status_code != 200:
        return answer, []
    assert answer.headers["content-type"] == "text/event-stream"
    return answer, parse_sse(answer.text)


def check_lifecycle(events: list[Received], ended_before: frozenset[str] = frozenset()) -> None:
    """What the AG-UI 1.0 lifecycle asks of one run's stream: RUN_STARTED first, one terminal
    event last, ids counting from 1, no text message or tool call left open, no tool call
    started inside an open text message, and no result before its call ended (in this run, or
    in an earlier run of the thread: ``ended_before``, as a resumed run's results are)."""
    types = [e.type for e in events]
    assert types[0] == "RUN_STARTED"
    assert types[-1] in ("RUN_FINISHED", "RUN_ERROR")
    assert sum(t in ("RUN_FINISHED", "RUN_ERROR") for t in types) == 1
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    open_message: str | None = None
    open_calls: set[str] = set()
    ended_calls: set[str] = set(ended_before)
    for received in events:
        event = received.event
        if received.type == "TEXT_MESSAGE_START":
            assert open_message is None
            open_message = event.message_id
        elif received.type == "TEXT_MESSAGE_CONTENT":
            assert event.message_id == open_message
        elif received.type == "TEXT_MESSAGE_END":
            assert event.message_id == open_message
            open_message = None
        elif received.type == "TOOL_CALL_START":
            assert open_message is None, "a tool call starts after the text before it ended"
            open_calls.add(event.tool_call_id)
        elif received.type == "TOOL_CALL_END":
            open_calls.remove(event.tool_call_id)
            ended_calls.add(event.tool_call_id)
        elif received.type == "TOOL_CALL_RESULT":
            assert event.tool_call_id in ended_calls
    if types[-1] == "RUN_FINISHED":
        assert open_message is None
        assert not open_calls


def text_of(events: list[Received]) -> str:
    return "".join(e.event.delta for e in events if e.type == "TEXT_MESSAGE_CONTENT")


# The official AG-UI client: @ag-ui/client (TypeScript), pinned by js/package-lock.json and
# installed beside this environment's packages, outside the work tree. Tests that use it skip,
# saying how to install it, when node or the client is missing (as the browser tests do).
CLIENT_DIR = Path(sys.prefix) / "agui-client"
JS = Path(__file__).with_name("js")
INSTALL = (
    f"mkdir -p {CLIENT_DIR} && cp {JS}/package.json {JS}/package-lock.json {CLIENT_DIR}"
    f" && npm ci --prefix {CLIENT_DIR}"
)


def official_client_missing() -> str | None:
    """Why the official client cannot run here (None: it can)."""
    if shutil.which("node") is None:
        return "needs node (Node.js 20 or later) for the official AG-UI client"
    if not (CLIENT_DIR / "node_modules" / "@ag-ui" / "client" / "package.json").exists():
        return f"needs the official AG-UI client: {INSTALL}"
    return None


async def official_client(
    base_url: str,
    agent_id: str,
    key: str | None,
    thread_id: str,
    runs: list[tuple[str, str]],
    mode: str = "run",
    refused: bool = False,
) -> list[dict[str, Any]]:
    """What @ag-ui/client's HttpAgent reports for ``runs`` ((run id, text) pairs) of one
    thread: one dict per line (``kind``: event, finished, run_error, failed, result, rejected,
    then messages). Its own warnings (stderr) are a failure, unless the requests are expected
    to be ``refused`` (it reports the HTTP error there)."""
    config = {
        "clientDir": str(CLIENT_DIR),
        "url": f"{base_url}/api/v1/agui/{agent_id}",
        "eventsUrl": f"{base_url}/api/v1/agui/runs",
        "key": key,
        "threadId": thread_id,
        "mode": mode,
        "runs": [{"runId": run_id, "text": text} for run_id, text in runs],
    }
    with trio.fail_after(120):  # a hang bound: a stream the server never ends
        done = await trio.run_process(
            ["node", str(JS / "run_agent.mjs"), json.dumps(config)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert refused or done.stderr == b"", done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def agents(workspace: Workspace) -> None:
    """Quick, slow (cancelled by the tests long before it answers), with a tool call that has
    text before it, and one that runs out of turns."""
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    workspace.scripted_agent("slow", [{"text": "late", "sleep": 30}], repeat=True)
    workspace.scripted_agent(
        "tooly",
        [{"text": "let me look", "tool": "lookup", "arguments": {"q": "x"}}, {"text": "done"}],
        repeat=True,
    )
    workspace.scripted_agent(
        "short", [{"tool": "lookup", "arguments": {}}, {"text": "never"}], max_turns=1
    )
