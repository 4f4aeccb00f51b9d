"""A principal's conversations, kept on the server: the portal's list on every device.

A conversation is a session id of one principal (the store keys history by agent, session,
principal and user; the portal's chat uses one session per conversation). Nothing new is
stored of it but what a person chose: the list is read from the store's runs and history,
and a title given by a rename, or a deletion, is a small state of the store
(``portal.conversation:<digest of principal and session>``, see :func:`state_key`) — no
schema change, the same on every store.

- **List** (``GET /conversations?q=``): the principal's conversations among its newest runs
  (:data:`SCAN` of them), newest activity first: title, agents, last activity, the status of
  its newest run, whether a run of it is going on. The title is the one given, else the
  first message the person sent (from history; while the first turn is not stored yet, from
  the run this process is running), else the session id. ``q`` keeps those whose title,
  agent or session id contains it (case-insensitive).
- **Rename** (``PATCH /conversations/{session_id}``, ``{"title": ...}``, white space collapsed;
  ``null``, or white space only, gives the first message back).
- **Delete** (``DELETE /conversations/{session_id}``): the conversation leaves its
  principal's list on every device and no longer opens in the portal. A conversation with a
  run going on (or waiting for an approval) is refused with 409: cancel the run first — as
  retention, which never deletes anything of a run that is not finished. The store's history
  is append-only and is deleted by retention only (docs/storage.md, Retention): a deletion
  here is a mark, kept with the conversation's newest run (retention deletes it with that
  run); the messages stay in the store until retention deletes them.

Every read and write is of the request's principal: another principal's conversation with the
same session id is another conversation, and one it does not have is not found (404).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from soulacy.kernel import Kernel
from soulacy.kernel.store import RunRecord
from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse

from . import _timeline

PREFIX = "portal.conversation:"
SCAN = 500  # the principal's newest runs a list reads: older conversations are not listed
LIST_LIMIT = 200
TITLE_CHARS = 200  # the longest title a rename gives
SHOWN_TITLE = 80  # characters of a first message shown as a title


def state_key(principal: str | None, session_id: str) -> str:
    """The state of one principal's conversation (a digest: no principal name in a key)."""
    pair = json.dumps([principal, session_id], ensure_ascii=False)
    return PREFIX + hashlib.sha256(pair.encode()).hexdigest()[:40]


@attrs.define
class Conversation:
    session_id: str
    runs: list[RunRecord] = attrs.Factory(list)  # newest first
    title: str | None = None
    renamed: bool = False

    @property
    def newest(self) -> RunRecord:
        return self.runs[0]

    @property
    def running(self) -> bool:
        return any(r.status == "running" for r in self.runs)

    def last_activity(self) -> float:
        return max(max(r.started_at, r.finished_at or 0.0) for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        newest = self.newest
        return {
            "session_id": self.session_id,
            "title": self.title or self.session_id,
            "renamed": self.renamed,
            "agent_id": newest.agent_id,
            "agents": list(dict.fromkeys(r.agent_id for r in self.runs)),
            "last_activity": self.last_activity(),
            "started_at": min(r.started_at for r in self.runs),
            "status": newest.status,
            "running": self.running,
            "runs": len(self.runs),
            "last_run_id": newest.run_id,
        }


def _shown(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SHOWN_TITLE else line[: SHOWN_TITLE - 1] + "…"


async def _first_message(kernel: Kernel, principal: str | None, conv: Conversation) -> str:
    """The first message the person sent in it: from history, else from the run going on
    here (its first turn is stored when it ends)."""
    for found in await kernel.store().history(conv.session_id, principal=principal):
        if found.role == "user" and found.content.strip():
            return _shown(found.content)
    for record in reversed(conv.runs):  # oldest first
        text = _timeline.asked(kernel, record.run_id)
        if text:
            return _shown(text)
    return ""


async def _titled(kernel: Kernel, principal: str | None, conv: Conversation) -> Conversation | None:
    """``conv`` with its title, or None when it was deleted."""
    state = await kernel.store().load_state(state_key(principal, conv.session_id))
    if state and state.get("deleted_at") is not None:
        return None
    if state and isinstance(state.get("title"), str) and state["title"]:
        conv.title, conv.renamed = state["title"], True
    else:
        conv.title = await _first_message(kernel, principal, conv) or None
    return conv


async def listed(kernel: Kernel, principal: str | None) -> list[Conversation]:
    """The principal's conversations among its newest runs, newest activity first, untitled."""
    found: dict[str, Conversation] = {}
    for record in await kernel.store().list_runs(SCAN, principal=principal):
        found.setdefault(record.session_id, Conversation(record.session_id)).runs.append(record)
    return sorted(found.values(), key=lambda c: c.last_activity(), reverse=True)


async def one(kernel: Kernel, principal: str | None, session_id: str) -> Conversation:
    """The principal's conversation ``session_id`` with every run of it, titled; 404 when the
    principal has none (or deleted it)."""
    store = kernel.store()
    runs: dict[str, RunRecord] = {}
    for record in await store.list_runs(SCAN, principal=principal):  # a run just started
        if record.session_id == session_id:
            runs[record.run_id] = record
    for entry in await store.history(session_id, principal=principal):  # older ones
        if entry.run_id and entry.run_id not in runs:
            stored = await store.get_run(entry.run_id)
            if stored is not None and stored.principal == principal:
                runs[entry.run_id] = stored
    if not runs:
        raise HttpError(404, f"no conversation {session_id!r}")
    conv = Conversation(session_id, sorted(runs.values(), key=lambda r: -r.started_at))
    titled = await _titled(kernel, principal, conv)
    if titled is None:
        raise HttpError(404, f"no conversation {session_id!r}")
    return titled


def _limit(request: HttpRequest) -> int:
    raw = request.query_value("limit")
    if raw is None:
        return 50
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= LIST_LIMIT):
        raise HttpError(
            422, "invalid query", {"limit": f"expected an integer from 1 to {LIST_LIMIT}"}
        )
    return int(raw)


def _matches(conv: Conversation, words: Sequence[str]) -> bool:
    text = " ".join([conv.title or "", conv.session_id, *(r.agent_id for r in conv.runs)])
    return all(word in text.casefold() for word in words)


class Conversations:
    """The routes: every one acts on the request's principal's conversations only."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    async def list(self, request: HttpRequest) -> HttpResponse:
        limit = _limit(request)
        words = (request.query_value("q") or "").casefold().split()
        shown: list[dict[str, Any]] = []
        more = False
        for conv in await listed(self.kernel, request.principal):
            titled = await _titled(self.kernel, request.principal, conv)
            if titled is None or not _matches(titled, words):
                continue
            if len(shown) == limit:
                more = True
                break
            shown.append(titled.to_dict())
        return HttpResponse.json(
            {"conversations": shown, "more": more, "scanned_runs": SCAN},
            headers={"cache-control": "no-store"},
        )

    async def get(self, request: HttpRequest) -> HttpResponse:
        conv = await one(self.kernel, request.principal, request.params["session_id"])
        return HttpResponse.json(conv.to_dict(), headers={"cache-control": "no-store"})

    async def rename(self, request: HttpRequest) -> HttpResponse:
        session_id = request.params["session_id"]
        body = await request.json()
        if not isinstance(body, Mapping):
            raise HttpError(422, "invalid request body", {"body": "expected a JSON object"})
        problems = {key: "unknown field" for key in sorted(set(body) - {"title"})}
        title = body.get("title")
        if "title" not in body:
            problems["title"] = "required: the new title, or null for the first message"
        elif title is not None and not (isinstance(title, str) and 1 <= len(title) <= TITLE_CHARS):
            problems["title"] = f"expected a text of 1 to {TITLE_CHARS} characters, or null"
        if problems:
            raise HttpError(422, "invalid request body", problems)
        conv = await one(self.kernel, request.principal, session_id)
        value: dict[str, Any] = {"principal": request.principal, "session_id": session_id}
        shown = " ".join(str(title or "").split())
        if shown:  # white space only, as null: the first message is the title again
            value["title"] = shown
        await self.kernel.store().save_state(
            state_key(request.principal, session_id), value, run_id=conv.newest.run_id
        )
        return HttpResponse.json((await one(self.kernel, request.principal, session_id)).to_dict())

    async def delete(self, request: HttpRequest) -> HttpResponse:
        session_id = request.params["session_id"]
        conv = await one(self.kernel, request.principal, session_id)
        if conv.running:
            raise HttpError(
                409,
                f"conversation {session_id!r} has a run going on: cancel it (or let it end),"
                " then delete the conversation",
            )
        value = {
            "principal": request.principal,
            "session_id": session_id,
            "deleted_at": time.time(),
        }
        await self.kernel.store().save_state(
            state_key(request.principal, session_id), value, run_id=conv.newest.run_id
        )
        return HttpResponse.json({"session_id": session_id, "deleted": True})
