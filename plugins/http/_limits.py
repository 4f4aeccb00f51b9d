"""Bounds on what a request may carry, checked before anything acts on it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
