"""The builtin HTTP/SSE transport: the API under /api/v1, served by ``soulacy serve``.

Listens on 127.0.0.1:8484 by default (``server:`` in config.yaml). Every SSE event carries an
``id:``; a client that reconnects to ``/api/v1/runs/{run_id}/events`` with ``Last-Event-ID``
gets what it missed and the terminal ``result`` event. See docs/http.md.

The chat deadline is the limit ``http_timeout`` of the execution policy, which this plugin
declares (``soulacy_policy_limits``): read from ``runtime.timeouts.http``, it always outlasts
the run it carries.

Other plugins add routes (API routes under /api/v1, pages at the root) by answering the hook
``soulacy_http_routes`` (``hookspecs.py``) with :class:`HttpRoute` objects; they are served
behind the same guards as this plugin's own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from soulacy.kernel import (
    ConfigIssue,
    ConfigSection,
    Location,
    Settings,
    StashKey,
    hookimpl,
    lazy_exports,
)
from soulacy.kernel.policy import PolicyLimit

from . import hookspecs
from ._config import HTTP_TIMEOUT, ServerConfig
from ._principals import key_issues
from .hookspecs import HttpError, HttpRequest, HttpResponse, HttpRoute, RouteAuth, StreamWriter

if TYPE_CHECKING:  # the app, the service and the run logs import trio (decision 0038)
    import pluggy

    from soulacy.kernel import Kernel, Service
    from soulacy.kernel.engine import Run

    from ._app import Api
    from ._runlog import RunLogs
    from ._service import HttpService

__all__ = [
    "Api",
    "HttpError",
    "HttpRequest",
    "HttpResponse",
    "HttpRoute",
    "HttpService",
    "RouteAuth",
    "RunLogs",
    "ServerConfig",
    "StreamWriter",
]
# Names imported on first use (PEP 562): registering the plugin imports none of them.
_LAZY = {"Api": "._app", "HttpService": "._service", "RunLogs": "._runlog"}


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, _LAZY)


ORIGIN = re.compile(r"https?://[^/\s]+")  # what a browser sends as Origin
_logs_key = StashKey["RunLogs"]("http run logs")  # only kernels that serve HTTP have them


def run_logs(kernel: Kernel) -> RunLogs:
    logs = kernel.stash.get(_logs_key, None)
    if logs is None:
        from ._runlog import STREAMED, RunLogs

        config: ServerConfig = kernel.config.section("server")
        logs = kernel.stash[_logs_key] = RunLogs(config.events_per_run, config.finished_runs_kept)
        # Only the streamed types, and only in kernels that serve HTTP: a run of any other
        # kernel builds none of its events for these logs.
        kernel.events.observe(logs.observe, STREAMED)
    return logs


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)  # soulacy_http_routes, for other plugins


# The trust root of the ``server:`` section: who is trusted and where the API listens. An
# editor outside it (PATCH /config) refuses them; config.yaml sets them (docs/security.md).
TRUSTED = {
    "who is trusted": ("api_keys", "api_key", "admins"),
    "who may reach the API": ("allowed_hosts", "allowed_origins"),
    "where the API listens": ("enabled", "host", "port"),
}


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [
        ConfigSection("server", ServerConfig, doc="the HTTP API"),
        *(
            ConfigSection.trust_root(f"server.{key}", doc=why)
            for why, keys in TRUSTED.items()
            for key in keys
        ),
    ]


@hookimpl
def soulacy_policy_limits() -> Sequence[PolicyLimit]:
    return [HTTP_TIMEOUT]


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    server: ServerConfig = config.section("server")
    checks = [
        ("port", server.port, 0, 65535),
        ("max_body_bytes", server.max_body_bytes, 1, None),
        ("max_json_depth", server.max_json_depth, 1, 10_000),
        ("stream_token_ttl", server.stream_token_ttl, 1, 7 * 24 * 3600),
        ("events_per_run", server.events_per_run, 1, None),
        ("finished_runs_kept", server.finished_runs_kept, 0, None),
        ("max_streams_per_principal", server.max_streams_per_principal, 0, None),
        ("max_requests_per_principal", server.max_requests_per_principal, 0, None),
        ("body_min_rate", server.body_min_rate, 0, None),
    ]
    issues = []
    for key, value, low, high in checks:
        if value < low or (high is not None and value > high):
            path = f"server.{key}"
            loc = config.source_of(path) or Location(str(config.file))
            expected = (
                f"expected {low} to {high}" if high is not None else (f"expected {low} or more")
            )
            issues.append(ConfigIssue(loc, path, expected, value, True))
    issues += key_issues(config)
    for index, origin in enumerate(server.allowed_origins):
        if not ORIGIN.fullmatch(origin.strip()):
            path = f"server.allowed_origins.{index}"
            where = config.source_of(path) or config.source_of("server.allowed_origins")
            message = "expected an origin: scheme://host[:port], no path"
            where = where or Location(str(config.file))
            issues.append(ConfigIssue(where, path, message, origin, True))
    return issues


@hookimpl
def soulacy_run_participants(kernel: Kernel, run: Run) -> None:
    """Takes no part in the turns: a kernel that shares its runs' events through the store
    gives each run's log the lease the run holds, the fence of the log's shared copy (a stale
    owner's events are refused). Called once per run, after its ``run.started``."""
    logs = kernel.stash.get(_logs_key, None)
    if logs is not None and logs.publish is not None:
        logs.hold(run.run_id, run.held)


@hookimpl
def soulacy_services(kernel: Kernel) -> Sequence[Service]:
    from ._service import HttpService

    config: ServerConfig = kernel.config.section("server")
    return [HttpService(kernel, config, run_logs(kernel))] if config.enabled else []
