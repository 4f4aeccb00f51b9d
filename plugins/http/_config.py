"""The ``server:`` section of config.yaml."""

from __future__ import annotations

import attrs


@attrs.frozen
class ServerConfig:
    """Where the HTTP API listens and who may use it.

    ``api_keys`` maps principals to bearer tokens (set them from the environment:
    ``SOULACY_SERVER__API_KEYS__ALICE=…``); ``api_key``, the original system's single key, is
    the principal ``default``. With no key, only loopback clients are served, as ``local``.
    ``admins`` are the principals that may read and change the configuration.
    ``allowed_hosts`` extends the Host names served (localhost, 127.0.0.1, ::1 and ``host``);
    ``allowed_origins`` lists the browser origins that may change state and read answers
    (CORS). See docs/security.md.
    """

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8484
    api_keys: dict[str, str] = attrs.Factory(dict)
    api_key: str | None = None
    admins: list[str] = attrs.Factory(list)
    allowed_hosts: list[str] = attrs.Factory(list)
    allowed_origins: list[str] = attrs.Factory(list)
    max_body_bytes: int = 1_048_576
    max_json_depth: int = 64
    events_per_run: int = 10_000
    finished_runs_kept: int = 1000
    stream_token_ttl: int = 3600  # seconds an events token is good for
