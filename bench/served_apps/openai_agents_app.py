"""A FastAPI app around the OpenAI Agents SDK for bench/served.py: the chat, streamed as SSE.

    uvicorn openai_agents_app:app --app-dir bench/served_apps   # in the peers' venv

``POST /chat/stream`` with JSON ``{"text", "session_id"}`` runs one ``agents.Agent`` with
``Runner.run_streamed`` on the session's ``SQLiteSession`` (the SDK's own durable history, one
file, ``synchronous=NORMAL`` as bench/peers gives it; ``$SERVED_DB``) and writes one SSE event
for each item the SDK streams (``tool_called``, ``tool_output``, ``message_output_created``),
one ``delta`` per text delta, and a final ``result`` event with the answer. The model is the
SDK's own ``agents.testing.ScriptedModel`` on a copy of the agent per chat (``Agent.clone``):
a call of the async ``@function_tool`` ``step(i=1)``, then the answer ``done``. Tracing is
off. The response is a plain FastAPI ``StreamingResponse`` of hand-formatted events.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

DB = os.environ.get("SERVED_DB", "openai_agents.db")
set_tracing_disabled(True)
CONFIG = RunConfig(tracing_disabled=True)


class Session(SQLiteSession):
    """The SDK's SQLite session, its connections given ``synchronous=NORMAL`` (as bench/peers)."""

    @staticmethod
    def _configure_connection(conn: sqlite3.Connection) -> None:
        SQLiteSession._configure_connection(conn)
        conn.execute("PRAGMA synchronous=NORMAL")


@function_tool
async def step(i: int) -> str:
    """A trivial tool."""
    return f"ok-{i}"


AGENT = Agent(name="chat", instructions=None, tools=[step])


class Chat(BaseModel):
    text: str
    session_id: str


def sse(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


async def events(chat: Chat) -> AsyncIterator[bytes]:
    model = ScriptedModel(
        [[function_call("step", {"i": 1}, call_id="call-1")], [assistant_message("done")]]
    )
    session = Session(chat.session_id, DB)
    try:
        result = Runner.run_streamed(
            AGENT.clone(model=model), chat.text, session=session, run_config=CONFIG
        )
        async for item in result.stream_events():
            if item.type == "run_item_stream_event":
                raw = item.item.raw_item
                data = raw.model_dump() if hasattr(raw, "model_dump") else raw
                yield sse(item.name, data)
            elif item.type == "raw_response_event" and item.data.type.endswith("text.delta"):
                yield sse("delta", {"text": item.data.delta})
        yield sse("result", {"reply": result.final_output, "session_id": chat.session_id})
    finally:
        session.close()


app = FastAPI()


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/chat/stream")
async def chat_stream(chat: Chat) -> StreamingResponse:
    return StreamingResponse(events(chat), media_type="text/event-stream")
