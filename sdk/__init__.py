"""The Python client of Soulacy's HTTP/SSE API (httpx only).

::

    from soulacy.sdk import Client

    with Client() as client:  # $SOULACY_URL (http://127.0.0.1:8484), $SOULACY_API_KEY
        print(client.chat("assistant", "Hello!"))

:class:`Client` is synchronous; :class:`AsyncClient` has the same methods, awaitable, under Trio
or asyncio. ``chat`` returns the reply; ``chat_response`` the reply with the run's metadata;
``stream`` the run's events (resumed with ``Last-Event-ID`` when a connection drops); failures
raise :class:`SoulacyError`. See docs/sdk.md.
"""

from __future__ import annotations

from ._async import AsyncClient, AsyncEventStream
from ._client import Client, EventStream
from ._errors import SoulacyError
from ._models import RESULT, ChatResponse, HistoryEntry, StreamEvent
from ._settings import DEFAULT_TIMEOUT, DEFAULT_URL, KEY_VARIABLE, URL_VARIABLE

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "KEY_VARIABLE",
    "RESULT",
    "URL_VARIABLE",
    "AsyncClient",
    "AsyncEventStream",
    "ChatResponse",
    "Client",
    "EventStream",
    "HistoryEntry",
    "SoulacyError",
    "StreamEvent",
]
