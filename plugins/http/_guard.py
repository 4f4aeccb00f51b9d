"""Browser-grade defences: the Host allow-list, Origin checks and CORS.

- **Host** (DNS rebinding): a page on ``evil.example`` whose name is re-pointed at 127.0.0.1
  reaches this server with ``Host: evil.example``; only names on the allow-list are served
  (421 otherwise). The name decides, not the port: the attack needs a foreign name.
- **Origin** (cross-site request forgery): a browser marks every cross-site ``fetch`` with
  ``Origin``; a state-changing request is served when it has none (not a browser), comes from
  this server's own origin, or from one of ``server.allowed_origins`` (403 otherwise).
- **CORS**: the allowed origins get ``Access-Control-Allow-*`` on preflights and answers, so a
  page there can read them; any other origin gets none and its preflight is a 403.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._asgi import HttpError
from ._config import ServerConfig

STATE_CHANGING = frozenset({"POST", "PATCH", "PUT", "DELETE"})
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
CORS_REQUEST_HEADERS = "Authorization, Content-Type, Last-Event-ID"
CORS_EXPOSED_HEADERS = "Soulacy-Events-Token, Retry-After"
PREFLIGHT_MAX_AGE = "600"


def host_name(host: str) -> str:
    """The name in a Host header: ``[::1]:80`` -> ``::1``, ``Example.com.:8`` -> ``example.com``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    name, colon, port = host.rpartition(":")
    if colon and port.isdigit() and ":" not in name:
        host = name
    return host.removesuffix(".")


class Guard:
    def __init__(self, config: ServerConfig) -> None:
        extra = [host_name(h) for h in config.allowed_hosts]
        self.any_host = "*" in extra
        bind = [] if config.host in ("0.0.0.0", "::", "") else [host_name(config.host)]
        self.hosts = frozenset([*DEFAULT_HOSTS, *bind, *extra])
        self.origins = frozenset(_origin(o) for o in config.allowed_origins)

    def check_host(self, headers: Mapping[str, str]) -> None:
        host = headers.get("host")
        if host is None or self.any_host:  # no Host: HTTP/1.0, not a browser
            return
        if host_name(host) not in self.hosts:
            raise HttpError(
                421,
                "this server does not answer to that Host name (server.allowed_hosts)",
                {"Host": "not in server.allowed_hosts"},
            )

    def check_origin(self, method: str, headers: Mapping[str, str], scheme: str) -> None:
        """Refuse a state-changing request from a browser page of a foreign origin."""
        origin = headers.get("origin")
        if method not in STATE_CHANGING or origin is None:
            return
        if (
            self.listed(origin)
            or _origin(origin) == f"{scheme}://{headers.get('host', '')}".lower()
        ):
            return
        raise HttpError(
            403,
            "cross-origin request refused: its Origin is not in server.allowed_origins",
            {"Origin": "not this server's origin nor in server.allowed_origins"},
        )

    def listed(self, origin: str | None) -> bool:
        return origin is not None and _origin(origin) in self.origins

    def cors_headers(self, headers: Mapping[str, str]) -> list[tuple[str, str]]:
        """Headers that let a listed origin read this answer (none for any other origin)."""
        origin = headers.get("origin")
        if not self.listed(origin):
            return [("vary", "Origin")] if self.origins else []
        assert origin is not None
        return [
            ("access-control-allow-origin", origin),
            ("access-control-expose-headers", CORS_EXPOSED_HEADERS),
            ("vary", "Origin"),
        ]

    def preflight(
        self, headers: Mapping[str, str], methods: Iterable[str]
    ) -> list[tuple[str, str]]:
        """What a preflight from a listed origin gets besides ``cors_headers``; 403 for others."""
        if not self.listed(headers.get("origin")):
            raise HttpError(
                403,
                "cross-origin request refused: its Origin is not in server.allowed_origins",
                {"Origin": "not in server.allowed_origins"},
            )
        return [
            ("access-control-allow-methods", ", ".join(methods)),
            ("access-control-allow-headers", CORS_REQUEST_HEADERS),
            ("access-control-max-age", PREFLIGHT_MAX_AGE),
        ]


def _origin(origin: str) -> str:
    return origin.strip().lower().rstrip("/")
