"""A2A push notifications: a task's updates POSTed to URLs its client names, among those the
operator allows (config.yaml ``a2a.push_urls``, the trust root: the server fetches these URLs,
so a client may not name any other).

A client names a URL for one of its own tasks (``CreateTaskPushNotificationConfig``, or the
``taskPushNotificationConfig`` of the message that starts it); from then on each status update
of the task, and its whole reply (not the chunks it streamed), is POSTed there as A2A's
``StreamResponse`` JSON, with the config's token in ``X-A2A-Notification-Token`` and its
``authentication`` as ``Authorization``. Deliveries go one at a time, in order, each bounded by
:data:`PUSH_TIMEOUT`; one that fails is logged and not retried. Configs live with the task in
this process's memory (a task read from the store has none).
"""

from __future__ import annotations

import logging
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import httpx
import trio

from . import _wire as wire

logger = logging.getLogger("soulacy.a2a")

PUSH_TIMEOUT = 10.0  # seconds one POST may take
MAX_CONFIGS = 10  # configs one task may have
QUEUED = 256  # updates waiting for delivery; beyond, an update is dropped (and logged)
TOKEN_HEADER = "X-A2A-Notification-Token"


def pushed(event: Mapping[str, Any]) -> bool:
    """Status updates, and the whole reply (the last chunk): not each chunk of text."""
    update = event.get("artifactUpdate")
    return "statusUpdate" in event or (
        isinstance(update, Mapping) and bool(update.get("lastChunk"))
    )


def url_allowed(url: str, allowed: Sequence[str]) -> bool:
    """``url`` begins with one of the ``allowed`` URLs: the same scheme, host and port, and a
    path below the allowed one (``https://hooks.example.com/a2a`` allows
    ``https://hooks.example.com/a2a/alice``, not ``…/a2a-other`` nor another host)."""
    found = _parts(url)
    if found is None:
        return False
    for prefix in allowed:
        wanted = _parts(prefix)
        if wanted is None or found[:3] != wanted[:3]:
            continue
        base = wanted[3].rstrip("/")
        if found[3] == base or found[3].startswith(base + "/"):
            return True
    return False


def _parts(url: str) -> tuple[str, str, int, str] | None:
    try:
        split = urllib.parse.urlsplit(url.strip())
        port = split.port
    except ValueError:
        return None
    if split.scheme not in ("http", "https") or not split.hostname or split.username:
        return None
    segments = urllib.parse.unquote(split.path).split("/")
    if any(segment in (".", "..") for segment in segments):
        return None  # a client's ``/a2a/../admin`` would leave the allowed path once resolved
    default = 443 if split.scheme == "https" else 80
    return split.scheme, split.hostname.lower(), port or default, split.path or "/"


def read_config(given: Any, task_id: str, allowed: Sequence[str], field: str) -> dict[str, Any]:
    """A ``TaskPushNotificationConfig`` as sent, checked, with its id (given or made up)."""
    if not isinstance(given, Mapping):
        raise wire.invalid_params(field or "params", "expected a TaskPushNotificationConfig")
    where = f"{field}." if field else ""
    url = given.get("url")
    if not isinstance(url, str) or not url.strip():
        raise wire.invalid_params(f"{where}url", "expected the URL to POST the task's updates to")
    if not url_allowed(url, allowed):
        raise wire.invalid_params(
            f"{where}url", "expected a URL under one of the server's a2a.push_urls"
        )
    config_id = wire.optional_id(given, "id", f"{where}id") or uuid.uuid4().hex
    found: dict[str, Any] = {"id": config_id, "taskId": task_id, "url": url.strip()}
    token = given.get("token")
    if token not in (None, ""):
        if not isinstance(token, str) or len(token) > 1000:
            raise wire.invalid_params(f"{where}token", "expected a string")
        found["token"] = token
    authentication = given.get("authentication")
    if authentication is not None:
        scheme = authentication.get("scheme") if isinstance(authentication, Mapping) else None
        if not isinstance(scheme, str) or not scheme.isascii() or not scheme.isalnum():
            raise wire.invalid_params(
                f"{where}authentication.scheme", "expected an HTTP auth scheme such as Bearer"
            )
        assert isinstance(authentication, Mapping)
        credentials = authentication.get("credentials", "")
        if not isinstance(credentials, str) or any(c in credentials for c in "\r\n"):
            raise wire.invalid_params(f"{where}authentication.credentials", "expected a string")
        found["authentication"] = {"scheme": scheme, "credentials": credentials}
    return found


@attrs.define(eq=False)
class Pushes:
    """One task's push configs and the queue of its updates to deliver."""

    task_id: str
    configs: dict[str, dict[str, Any]] = attrs.Factory(dict)
    _send: trio.MemorySendChannel[dict[str, Any]] | None = None
    _receive: trio.MemoryReceiveChannel[dict[str, Any]] | None = None

    def __attrs_post_init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[dict[str, Any]](QUEUED)

    def add(self, config: dict[str, Any]) -> None:
        if config["id"] not in self.configs and len(self.configs) >= MAX_CONFIGS:
            raise wire.invalid_params("id", f"a task has at most {MAX_CONFIGS} push configs")
        self.configs[config["id"]] = config

    def offer(self, event: Mapping[str, Any]) -> None:
        if self._send is None or not self.configs or not pushed(event):
            return
        try:
            self._send.send_nowait(dict(event))
        except trio.WouldBlock:
            logger.warning(
                "A2A task %s: a push notification was dropped (queue full)", self.task_id
            )

    def close(self) -> None:
        """The task ended: its last update is queued; the delivery ends once it is sent."""
        if self._send is not None:
            self._send.close()
            self._send = None

    async def deliver(self) -> None:
        """POST each queued update to every config of the task, in order, until it ended."""
        assert self._receive is not None
        timeout = httpx.Timeout(PUSH_TIMEOUT)
        async with self._receive, httpx.AsyncClient(timeout=timeout) as http:
            async for event in self._receive:
                for config in list(self.configs.values()):
                    with trio.move_on_after(PUSH_TIMEOUT):
                        await self._post(http, config, event)

    async def _post(
        self, http: httpx.AsyncClient, config: Mapping[str, Any], event: Mapping[str, Any]
    ) -> None:
        headers = {}
        if config.get("token"):
            headers[TOKEN_HEADER] = str(config["token"])
        authentication = config.get("authentication")
        if isinstance(authentication, Mapping) and authentication.get("credentials"):
            headers["Authorization"] = f"{authentication['scheme']} {authentication['credentials']}"
        try:  # no redirects: a redirect could lead anywhere the allow-list does not name
            answer = await http.post(str(config["url"]), json=event, headers=headers)
            answer.raise_for_status()
        except httpx.HTTPError as exc:
            logger.warning(
                "A2A task %s: push notification %s was not delivered: %s",
                self.task_id,
                config["id"],
                type(exc).__name__,
            )
