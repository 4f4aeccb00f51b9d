"""Bounds on what a request may carry and hold, checked before anything acts on it: its body's
size, depth and pace, and how many requests one principal has open."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ._asgi import HttpError

_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)  # linear: no nested quantifiers
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DIGITS = re.compile(r"[0-9]{1,18}")  # ASCII only: "²".isdigit() is true, int("²") raises
_JSON_TYPE = re.compile(r"application/json\s*(;\s*charset\s*=\s*\"?utf-8\"?\s*)?", re.IGNORECASE)


def check_depth(raw: bytes, limit: int) -> None:
    """422 when the JSON text nests arrays and objects deeper than ``limit``.

    Checked on the text, before parsing: Python's parser recurses and 200 KB of ``[`` raise
    RecursionError. Brackets inside strings do not count.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:  # the common case: nothing to scan
        return
    depth = 0
    for char in _STRINGS.sub(b'""', raw).translate(None, _NOT_BRACKETS):
        depth += 1 if char in b"[{" else -1
        if depth > limit:
            raise HttpError(
                422, "invalid request body", {"body": f"nested deeper than {limit} levels"}
            )


def check_unicode(data: Any) -> None:
    """422 when a string of the body is not valid Unicode (a lone surrogate such as ``\ud800``
    is valid JSON but no store can encode it: the run would fail half-recorded)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise HttpError(
            422,
            "invalid request body",
            {"body": "strings must be valid Unicode (no lone surrogates)"},
        ) from None


def check_json_type(headers: Mapping[str, str]) -> None:
    """415 unless ``Content-Type`` is ``application/json`` (optionally ``charset=utf-8``).

    A browser page of any origin may POST ``text/plain`` or a form without a preflight;
    refusing those types closes that cross-site request forgery path for every JSON route.
    """
    if not _JSON_TYPE.fullmatch(headers.get("content-type", "").strip()):
        raise HttpError(415, "expected a JSON body", {"Content-Type": "expected application/json"})


def last_event_id(headers: Mapping[str, str]) -> int:
    """The ``Last-Event-ID`` a reconnecting client sent: 0 when absent or empty.

    Event ids are ASCII digits (this server writes nothing else); anything else is a 400.
    """
    value = headers.get("last-event-id", "")
    if not value:
        return 0
    if not _DIGITS.fullmatch(value):
        raise HttpError(
            400,
            "invalid Last-Event-ID",
            {"Last-Event-ID": "expected an event id: 1 to 18 ASCII digits"},
        )
    return int(value)


REQUESTS_KEY = "server.max_requests_per_principal"


def body_deadline(started: float, received: int, timeout: float, min_rate: float) -> float:
    """When the rest of a body must have arrived: ``timeout`` seconds after its read began, plus
    one second for every ``min_rate`` bytes received so far (``math.inf``: ``timeout`` is 0).

    A client sending at ``min_rate`` or faster is never cut off; one that stops, or trickles
    (one byte a second is never idle), is, once what it sent no longer pays for its time.
    """
    if timeout <= 0:
        return math.inf
    return started + timeout + (received / min_rate if min_rate > 0 else 0.0)


def body_too_slow(timeout: float, min_rate: float) -> HttpError:
    """The 408 of a body that did not arrive in time; the connection is closed after it."""
    rate = (
        f", plus 1 s per {min_rate:g} bytes received (server.body_min_rate)" if min_rate > 0 else ""
    )
    return HttpError(
        408,
        f"the request body did not arrive in time: {timeout:g} s (server.body_timeout){rate}",
        headers={"connection": "close"},
    )


class RequestSlots:
    """How many requests each principal has open (from its authentication until its answer
    ends, streams included), against ``server.max_requests_per_principal``, read at each
    request so that a ``PATCH /config`` of it applies to the next one (0: no cap).

    Without it, one key could hold any number of connections open (slow bodies, streams,
    chats waiting for their answer) and the memory and file descriptors every other principal
    needs. A request without a principal (``/health``, ``/ready``) is not counted.
    """

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self.open: Counter[str] = Counter()

    @contextmanager
    def take(self, principal: str | None) -> Iterator[None]:
        if principal is None:
            yield
            return
        limit = self.limit()
        if limit and self.open[principal] >= limit:
            raise HttpError(
                429,
                f"this principal has {limit} requests open, the most it may ({REQUESTS_KEY});"
                " one frees when one of its requests ends",
                headers={"retry-after": "1"},
                extra={"limit": {"scope": "requests", "max": limit, "key": REQUESTS_KEY}},
            )
        self.open[principal] += 1
        try:
            yield
        finally:
            self.open[principal] -= 1
            if not self.open[principal]:
                del self.open[principal]

    def statistics(self) -> dict[str, int]:
        """The requests each principal has open now."""
        return dict(self.open)
