"""The ``server:`` section of config.yaml, and the HTTP deadline the plugin declares as a limit
of the execution policy (``http_timeout``, read from ``runtime.timeouts.http``)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import attrs

from soulacy.kernel import ConfigIssue, Duration, Location, Settings, format_duration
from soulacy.kernel.policy import DEFAULT, ExecutionPolicy, Limit, PolicyLimit


def _no_key_if_empty(key: str | None) -> str | None:
    """``server.api_key: ""`` is the original system's "no key, loopback only" (its first-run
    template left it so); a blank key and an empty ``api_keys`` entry stay errors."""
    return None if key == "" else key


@attrs.frozen
class ServerConfig:
    """Where the HTTP API listens and who may use it.

    ``api_keys`` maps principals to bearer tokens (set them from the environment:
    ``SOULACY_SERVER__API_KEYS__ALICE=…``); ``api_key``, the original system's single key, is
    the principal ``default``; ``api_key: ""``, the original's "no key", is no key. With no key,
    only loopback clients are served, as ``local``.
    ``admins`` are the principals that may read and change the configuration.
    ``allowed_hosts`` extends the Host names served (localhost, 127.0.0.1, ::1 and ``host``);
    ``allowed_origins`` lists the browser origins that may change state and read answers
    (CORS). See docs/security.md. ``shutdown_grace`` is how long a stopping server lets its
    runs finish before it interrupts them (``0``: no wait; docs/http.md).

    What one request may hold (docs/security.md#limits-and-their-defaults): a body must arrive
    within ``body_timeout`` plus one second for every ``body_min_rate`` bytes received (408
    otherwise; ``body_timeout: 0``: no deadline; ``body_min_rate: 0``: the whole body within
    ``body_timeout``); one principal may have
    ``max_requests_per_principal`` requests open at once, streams included (429 beyond it;
    ``0``: no cap).
    """

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8484
    api_keys: dict[str, str] = attrs.Factory(dict)
    api_key: str | None = attrs.field(default=None, converter=_no_key_if_empty)
    admins: list[str] = attrs.Factory(list)
    allowed_hosts: list[str] = attrs.Factory(list)
    allowed_origins: list[str] = attrs.Factory(list)
    max_body_bytes: int = 1_048_576
    max_json_depth: int = 64
    events_per_run: int = 10_000
    finished_runs_kept: int = 1000
    stream_token_ttl: int = 3600  # seconds an events token is good for
    max_streams_per_principal: int = 100  # SSE streams open at once per principal; 0: no cap
    # Write runs' SSE events to the store when processes share it, so that any of them serves
    # a stream that reconnects (docs/deploy.md); off: each process serves its own runs only.
    share_events: bool = True
    # A request's body must arrive within body_timeout, plus one second per body_min_rate bytes
    # received: a client at the minimum rate is never cut off, a trickle (one byte a second:
    # never idle) is. body_timeout 0: no deadline; body_min_rate 0: the whole body within
    # body_timeout.
    body_timeout: Duration = Duration(30)
    body_min_rate: int = 500  # bytes per second
    # Requests one principal may have open at once, SSE streams and chats waiting for their
    # answer included; above max_streams_per_principal plus the runs one principal may have
    # (runtime.max_concurrent_sessions_per_principal: 50). 0: no cap.
    max_requests_per_principal: int = 200
    # How long a stopping server lets its runs finish (new runs get 503 meanwhile); those
    # still running then end ``interrupted`` (``shutdown``), resumable by a same-id retry.
    shutdown_grace: Duration = Duration(30)


# -- the HTTP deadline, a limit of the execution policy ----------------------------------------
#
# Where the file format puts it, in the policy plugin's ``runtime.timeouts``; what it means (the
# limit ``http_timeout``, its rule and its check) is this plugin's, declared through
# ``soulacy_policy_limits``. With ``-p no:http`` the limit does not exist.

DEFAULT_HTTP_TIMEOUT = 48 * 3600 + 60.0
ACCOMMODATED = "accommodates run"
TIMEOUT_KEY = "runtime.timeouts.http"


def accommodate(http: Limit[Any], policy: ExecutionPolicy) -> Limit[Any]:
    """The HTTP deadline must outlast the run it carries: raised to the run timeout plus one
    minute (to unlimited for an unlimited run), with the reason said."""
    run = policy.run_timeout
    if http.value is None:
        return http
    if run.value is None:
        return Limit(
            None, ACCOMMODATED, http.location, "raised to unlimited to carry an unlimited run"
        )
    if run.value >= http.value:
        return Limit(
            run.value + 60.0,
            ACCOMMODATED,
            http.location,
            "raised to the run timeout plus one minute to carry the run",
        )
    return http


def timeout_issues(config: Settings) -> list[ConfigIssue]:
    """In config.yaml, the HTTP timeout must outlast the run timeout (equal would cut the reply
    off as the run ends); ``"0"`` (no deadline) accommodates any run."""
    try:
        run, http = config.get("runtime.timeouts.run"), config.get(TIMEOUT_KEY)
    except (KeyError, AttributeError):  # the policy plugin, which parses the keys, is blocked
        return []
    if http.seconds == 0 or (run.seconds != 0 and run.seconds < http.seconds):
        return []
    if run.seconds == 0:
        want, shown = '"0"', "no deadline"
    else:
        later = format_duration(Fraction(run.nanoseconds, 10**9) + 60)
        want, shown = f'longer than {run} (e.g. "{later}")', str(run)
    message = (
        f"the HTTP timeout cannot accommodate the run timeout ({shown}):"
        f" a reply would be cut off while the run goes on; set it to {want}"
        ' ("0" means unlimited)'
    )
    where = config.source_of(TIMEOUT_KEY) or Location(str(config.file))
    return [ConfigIssue(where, TIMEOUT_KEY, message, str(http), True)]


HTTP_TIMEOUT = PolicyLimit(
    "http_timeout",
    TIMEOUT_KEY,
    DEFAULT_HTTP_TIMEOUT,
    "how long a chat waits for its run's answer; it always outlasts the run",
    duration=True,
    adjust=accommodate,
    check=timeout_issues,
)


def chat_deadline(policy: ExecutionPolicy) -> float:
    """Seconds a chat waits for its answer (``math.inf``: no deadline). A policy that does not
    hold the limit (a replacement that does not know it) gets the default, carrying the run."""
    limit = policy.extra.get(HTTP_TIMEOUT.name)
    if limit is None:
        limit = accommodate(Limit(DEFAULT_HTTP_TIMEOUT, DEFAULT), policy)
    return math.inf if limit.value is None else float(limit.value)
