"""An SSE event's JSON is encoded once for its frame and for the store's shared copy, and
another process's stream writes the stored text as it is (decision 0050)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from soulacy.kernel import Kernel, hookimpl
from soulacy.kernel.store import RunEvent, RunEventBatch
from soulacy.plugins.http._asgi import sse
from soulacy.plugins.http._runlog import RunLog, frame_of
from soulacy.plugins.http._shared import Publisher, pump_stored
from soulacy.plugins.sqlite_store._store import SQLiteStore
from soulacy.plugins.sqlkit import decode_events

UNSORTED = {"b": 1, "a": [2, "x"]}  # json.dumps keeps this order; sort_keys would not


class Sent:
    def __init__(self) -> None:
        self.body = b""

    async def __call__(self, message: dict[str, Any]) -> None:
        self.body += message["body"]


def published(store: SQLiteStore) -> tuple[Publisher, RunLog]:
    """Alice's run log r1, its events written to the store by a publisher."""
    publisher = Publisher(store, 100)
    return publisher, RunLog("r1", "alice", 100, publish=publisher.add)


def stored_text(tmp_path: Path, run_id: str) -> list[str]:
    with sqlite3.connect(tmp_path / "store.db") as conn:
        rows = conn.execute(
            "SELECT id, last_id, name, data FROM run_events WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [e.json or "" for row in rows for e in decode_events(row, 0)]  # as kept


async def test_the_store_writes_the_given_text_and_reads_it_back(
    store: SQLiteStore, tmp_path: Path
) -> None:
    text = '{"b": 1, "a": [2, "x"]}'
    events = [RunEvent(1, "delta", UNSORTED, text), RunEvent(2, "result", {"reply": "r"})]
    await store.append_run_events([RunEventBatch("r1", "alice", events, True)], 100)
    assert stored_text(tmp_path, "r1") == [text, '{"reply": "r"}']  # no json: encoded
    found = await store.run_events("r1", 0)
    assert found is not None
    assert [(e.id, e.name, e.data, e.json) for e in found.events] == [
        (1, "delta", UNSORTED, text),
        (2, "result", {"reply": "r"}, '{"reply": "r"}'),
    ]
    assert found.events[0] == RunEvent(1, "delta", UNSORTED)  # the text is not compared


async def test_another_principal_s_events_with_text_are_still_refused(
    store: SQLiteStore, tmp_path: Path
) -> None:
    mine = [RunEvent(1, "delta", {"text": "alice"}, '{"text": "alice"}')]
    theirs = [RunEvent(1, "delta", {"text": "bob"}, '{"text": "bob"}')]
    await store.append_run_events([RunEventBatch("r1", "alice", mine, True)], 100)
    await store.append_run_events([RunEventBatch("r1", "bob", theirs, True)], 100)
    found = await store.run_events("r1", 0)
    assert found is not None
    assert found.principal == "alice"
    assert [(e.data, e.json) for e in found.events] == [({"text": "alice"}, '{"text": "alice"}')]
    assert stored_text(tmp_path, "r1") == ['{"text": "alice"}']


async def test_the_publisher_stores_the_frame_s_json(store: SQLiteStore, tmp_path: Path) -> None:
    publisher, log = published(store)
    log.append("delta", UNSORTED)  # framed by a stream before the flush
    frame = frame_of(log.events[0])
    log.append("delta", {"text": "w2"})  # not streamed yet: the publisher encodes it
    log.append("result", {"reply": "done", "metadata": {"z": 1, "y": 2}})
    await publisher.flush()
    texts = stored_text(tmp_path, "r1")
    assert texts == [
        '{"b": 1, "a": [2, "x"]}',  # the frame's text, in the data's own order
        '{"text": "w2"}',
        '{"reply": "done", "metadata": {"z": 1, "y": 2}}',
    ]
    assert frame == f"id: 1\nevent: delta\ndata: {texts[0]}\n\n".encode()
    assert log.events[1].json == texts[1]  # kept: a stream frames it without encoding
    assert frame_of(log.events[1]) == sse(2, "delta", {"text": "w2"})


async def test_data_json_refuses_is_still_the_store_s_to_refuse(
    store: SQLiteStore, tmp_path: Path
) -> None:
    publisher, log = published(store)
    circular: dict[str, Any] = {}
    circular["self"] = circular
    log.append("delta", circular)
    with pytest.raises(ValueError, match="Circular reference"):  # as before 0050
        await publisher.flush()
    assert log.events[0].json is None  # nothing half-made kept for a stream


async def test_a_stored_stream_writes_the_same_bytes_as_the_run_s_own(
    store: SQLiteStore, tmp_path: Path
) -> None:
    publisher, log = published(store)
    log.append("run", {"run_id": "r1"})
    log.append("delta", UNSORTED)
    log.append("result", {"reply": "done", "metadata": {"z": 1, "y": 2}})
    await publisher.flush()
    local = b"".join(frame_of(e) for e in log.after(0)[1])
    found = await store.run_events("r1", 0)
    assert found is not None
    sent = Sent()

    async def final() -> None:
        return None

    with trio.fail_after(5):
        await pump_stored(sent, store, found, 0, final)
    assert sent.body == local
    resumed = Sent()
    again = await store.run_events("r1", 1)
    assert again is not None
    with trio.fail_after(5):
        await pump_stored(resumed, store, again, 1, final)  # Last-Event-ID: 1
    assert resumed.body == b"".join(frame_of(e) for e in log.after(1)[1])


class Heard:
    def __init__(self) -> None:
        self.types: list[str] = []

    @hookimpl
    async def soulacy_event(self, kernel: Kernel, event: Any) -> None:
        await trio.lowlevel.checkpoint()
        self.types.append(event.type)


async def test_emit_calls_a_plugin_that_comes_and_goes(tmp_path: Path) -> None:
    kernel = Kernel.load(tmp_path, plugins=["no:http"], environ={})
    try:
        seen: list[tuple[str, str]] = []

        async def observer(event: Any) -> None:
            seen.append(("observer", event.type))

        kernel.events.observe(observer, ["text.delta"])
        await kernel.events.emit("text.delta", {"text": "a"}, "r1")  # no plugin hears it
        heard = Heard()
        kernel.pm.register(heard)
        try:
            await kernel.events.emit("text.delta", {"text": "b"}, "r1")
            await kernel.events.emit("other", None, "r1")
        finally:
            kernel.pm.unregister(heard)
        await kernel.events.emit("text.delta", {"text": "c"}, "r1")
        assert heard.types == ["text.delta", "other"]
        assert seen == [("observer", "text.delta")] * 3
    finally:
        await kernel.aclose()
