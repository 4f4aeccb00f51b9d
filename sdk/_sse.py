"""Server-sent events, parsed one line at a time (the WHATWG event-stream format)."""

from __future__ import annotations

import json
from typing import Any

from ._models import StreamEvent

__all__ = ["SseDecoder"]


class SseDecoder:
    """Turns the lines of an event stream (without their line ends) into :class:`StreamEvent`.

    An event is complete at the blank line that ends it; a stream that stops before that blank
    line loses the unfinished event, as the format requires. Comments (``: keep-alive``) and
    ``retry:`` are ignored. ``data`` is JSON; data that is not a JSON object is wrapped as
    ``{"value": ...}`` (or ``{"text": ...}`` when it is not JSON at all).
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._id: str | None = None
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> StreamEvent | None:
        """Take one line; returns the event that it completes, if any."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> StreamEvent | None:
        raw_id, name, data = self._id, self._event or "message", self._data
        self._reset()
        if not data:
            return None
        event_id = int(raw_id) if raw_id is not None and raw_id.isdigit() else None
        return StreamEvent(event_id, name, _parse("\n".join(data)))


def _parse(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    return value if isinstance(value, dict) else {"value": value}
