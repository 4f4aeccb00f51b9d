"""The hook the HTTP plugin defines for other plugins (added with ``soulacy_addhooks``), and the
public types its routes are made of.

A plugin adds routes to the server by answering ``soulacy_http_routes`` with
:class:`HttpRoute` objects; it imports only this module's names (re-exported from
``soulacy.plugins.http``), never the plugin's private modules. Mark the implementation
``@hookimpl(optionalhook=True)`` so that it still loads with the HTTP plugin disabled::

    from soulacy.kernel import hookimpl

    @hookimpl(optionalhook=True)
    def soulacy_http_routes(kernel):
        from soulacy.plugins.http import HttpResponse, HttpRoute

        async def hello(request):
            return HttpResponse.json({"hello": request.principal})

        return [HttpRoute("GET", "/hello", hello)]

A route added this way is served exactly as the plugin's own: the ``Host`` allow-list, the
``Origin`` check of state-changing requests, CORS, the bearer keys and their principals, the
body limits of :meth:`HttpRequest.json`, and the JSON error format (``raise HttpError(...)``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from soulacy.kernel import hookspec

from ._asgi import HttpError

if TYPE_CHECKING:
    from soulacy.kernel import Kernel

__all__ = ["HttpError", "HttpRequest", "HttpResponse", "HttpRoute", "RouteAuth", "StreamWriter"]

PREFIX = "/api/v1"
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
RouteAuth = Literal["none", "key", "admin"]


StreamWriter = Callable[[bytes], Awaitable[None]]
"""Sends one chunk of a streamed answer (:meth:`HttpResponse.streamed`) at once."""


@attrs.frozen
class HttpResponse:
    """What a route answers: a status, a body and headers (``content-type`` among them), or
    with ``stream`` an answer written as it is produced (:meth:`streamed`)."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    stream: Callable[[StreamWriter], Awaitable[None]] | None = attrs.field(default=None, repr=False)

    @classmethod
    def streamed(
        cls,
        produce: Callable[[StreamWriter], Awaitable[None]],
        headers: Mapping[str, str] | None = None,
        status: int = 200,
    ) -> HttpResponse:
        """An answer written as it is produced, such as Server-Sent Events: once the status and
        ``headers`` are sent (no ``content-length``), ``await produce(write)`` sends each chunk
        with ``await write(chunk)``, and the answer ends when it returns. It is cancelled when
        the client disconnects; an exception it raises is logged and ends the answer (its
        status is sent already). It counts as one of the principal's event streams
        (``server.max_streams_per_principal``: a 429 when it has its most open)."""
        return cls(status, b"", dict(headers or {}), produce)

    @classmethod
    def json(
        cls, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> HttpResponse:
        """``data`` as a JSON answer (``default=str``, as the plugin's own answers)."""
        payload = json.dumps(data, default=str).encode()
        return cls(status, payload, {"content-type": "application/json", **(headers or {})})


@attrs.frozen
class HttpRequest:
    """One request to a contributed route, as the HTTP plugin has checked it.

    ``principal`` is who the bearer key says (keyless loopback mode: ``local``; ``None`` on a
    route with ``auth="none"``); ``is_admin`` whether it is listed in ``server.admins`` (or is
    keyless mode's ``local``); :meth:`sees` whether it may see what ``owner`` owns.
    """

    method: str
    path: str
    params: Mapping[str, str]
    query: Mapping[str, Sequence[str]]
    headers: Mapping[str, str]
    principal: str | None
    is_admin: bool
    sees_everything: bool
    read_json: Callable[[], Awaitable[Any]] = attrs.field(repr=False)

    async def json(self) -> Any:
        """The JSON body: ``application/json``, at most ``server.max_body_bytes``, nested at most
        ``server.max_json_depth``, valid Unicode; an :class:`HttpError` (415, 413, 400, 422)
        otherwise. A body can be read once."""
        return await self.read_json()

    def query_value(self, name: str) -> str | None:
        """The last value of the query parameter ``name``, or None."""
        values = self.query.get(name)
        return values[-1] if values else None

    def sees(self, owner: str | None) -> bool:
        """A principal sees its own runs and conversations; keyless mode's ``local``, all."""
        return self.sees_everything or (owner is not None and owner == self.principal)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


@attrs.frozen
class HttpRoute:
    """One route a plugin adds.

    ``path`` is a regular expression matched against the whole path, its named groups becoming
    ``request.params``; with ``api=True`` (the default) it is relative to ``/api/v1`` and
    answers JSON like the plugin's own routes, with ``api=False`` it is a page of the server's
    root (a web UI: ``/``, ``/portal/app.js``), which may not start with ``/api/``.
    ``auth``: ``"key"`` needs a principal (a bearer key, or keyless loopback mode),
    ``"admin"`` a principal of ``server.admins``, ``"none"`` nothing (static files).
    A route of the HTTP plugin's own with the same method and path, or another plugin's, is an
    error naming both.
    """

    method: str
    path: str
    handler: Handler = attrs.field(repr=False)
    auth: RouteAuth = "key"
    api: bool = True

    @property
    def name(self) -> str:
        return f"{self.method} {PREFIX if self.api else ''}{self.path}"

    def problems(self) -> list[str]:
        """What is wrong with this route's declaration (empty when nothing is)."""
        found = []
        if self.method not in METHODS:
            found.append(f"method {self.method!r} is not one of {', '.join(sorted(METHODS))}")
        if not self.path.startswith("/"):
            found.append("the path must start with '/'")
        if not self.api and (self.path.startswith("/api/") or self.path == "/api"):
            found.append("a page (api=False) may not be under /api/")
        if self.auth not in ("none", "key", "admin"):
            found.append(f"auth {self.auth!r} is not 'none', 'key' or 'admin'")
        try:
            re.compile(self.path)
        except re.error as exc:
            found.append(f"the path is not a regular expression: {exc}")
        return found


@hookspec
def soulacy_http_routes(kernel: Kernel) -> Sequence[HttpRoute]:
    """Contribute routes to the HTTP server of ``kernel``, as :class:`HttpRoute` objects: API
    routes under ``/api/v1`` and pages at the server's root.

    Called once when the HTTP service starts; every plugin's list is collected. Each route goes
    through the same guards as the HTTP plugin's own (Host, Origin, CORS, keys and principals,
    body limits). Two routes with the same method and path are an error naming both plugins.
    Mark an implementation ``@hookimpl(optionalhook=True)`` so that it still loads with the HTTP
    plugin disabled.
    """
