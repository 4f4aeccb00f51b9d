"""The ``RunAgentInput`` a client POSTs, read into what a Soulacy run needs.

``threadId`` is the conversation (the run's session id), ``runId`` the run's id, and the last
message, which must be the user's, the run's text; or, with ``resume``, the answers to the
interrupts of the thread's interrupted run (then the messages are not read). Soulacy keeps each
conversation's history itself, so the earlier messages a client sends are not read again. Whatever
cannot be served is refused with a 422 naming the field, before any run starts (the SSE binding's
"input rejected before the run starts is an HTTP error status").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NoReturn

import attrs

from soulacy.plugins.http import HttpError

# The ids of the HTTP API's own runs and sessions: no "/" (they appear in URL paths).
_ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")
_ID_RULE = "expected 1-200 characters: letters, digits and ._:@-"


@attrs.frozen
class Answer:
    """One resume entry: the decision on the tool call an interrupt named."""

    interrupt_id: str
    approved: bool
    note: str | None = None


@attrs.frozen
class RunInput:
    thread_id: str
    run_id: str
    text: str  # empty for a resume: it answers interrupts, it asks nothing new
    state: Mapping[str, Any]
    resume: tuple[Answer, ...] = ()


def read_input(body: Any) -> RunInput:
    """``body`` (parsed JSON) as a run's input, or an ``HttpError`` 422 naming the field."""
    if not isinstance(body, dict):
        _refuse("body", "expected a JSON object: an AG-UI RunAgentInput")
    thread_id = _id(body, "threadId")
    run_id = _id(body, "runId")
    state = body.get("state")
    if state is None:
        state = {}
    elif not isinstance(state, dict):
        _refuse("state", "expected an object: Soulacy adds the run's progress under state.soulacy")
    resume = body.get("resume")
    if resume not in (None, []):
        answers = _answers(resume)
        return RunInput(thread_id, run_id, "", state, answers)
    return RunInput(thread_id, run_id, _last_user_text(body.get("messages")), state)


def _answers(resume: Any) -> tuple[Answer, ...]:
    """``resume``: the answers to the interrupts of the run it continues. ``resolved`` with
    ``payload.approved`` decides the call; ``cancelled`` (the person dismissed it) refuses it."""
    if not isinstance(resume, list):
        _refuse("resume", "expected an array of resume entries")
    answers = []
    for index, entry in enumerate(resume):
        where = f"resume.{index}"
        if not isinstance(entry, dict):
            _refuse(where, "expected a resume entry: {interruptId, status, payload}")
        interrupt_id = entry.get("interruptId")
        if not isinstance(interrupt_id, str) or not interrupt_id:
            _refuse(f"{where}.interruptId", "expected the id of an interrupt")
        status = entry.get("status")
        if status == "cancelled":
            answers.append(Answer(interrupt_id, False, "dismissed"))
            continue
        if status != "resolved":
            _refuse(f"{where}.status", "expected 'resolved' or 'cancelled'")
        payload = entry.get("payload")
        approved = payload.get("approved") if isinstance(payload, dict) else None
        if not isinstance(approved, bool):
            _refuse(f"{where}.payload.approved", "expected true or false: the call runs or not")
        assert isinstance(payload, dict)
        note = payload.get("note")
        if note is not None and not isinstance(note, str):
            _refuse(f"{where}.payload.note", "expected a string")
        answers.append(Answer(interrupt_id, approved, note))
    if len({a.interrupt_id for a in answers}) != len(answers):
        _refuse("resume", "expected one entry per interrupt")
    return tuple(answers)


def _id(body: Mapping[str, Any], field: str) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not _ID.fullmatch(value):
        _refuse(field, _ID_RULE)
    return value


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        _refuse("messages", "expected a non-empty array whose last message is the user's")
    where = f"messages.{len(messages) - 1}"
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        _refuse(
            f"{where}.role",
            "expected 'user': the last message is the run's input (results of tools the client"
            " runs are not supported)",
        )
    content = last.get("content")
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                _refuse(f"{where}.content.{index}", "expected a text part: only text is read")
            if not isinstance(part.get("text"), str):
                _refuse(f"{where}.content.{index}.text", "expected a string")
            texts.append(part["text"])
        content = "\n".join(texts)
    if not isinstance(content, str) or not content.strip():
        _refuse(f"{where}.content", "expected the user's text (a non-empty string or text parts)")
    return content


def _refuse(field: str, why: str) -> NoReturn:
    raise HttpError(422, "invalid AG-UI run input", {field: why})
