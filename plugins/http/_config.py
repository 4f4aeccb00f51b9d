"""The ``server:`` section of config.yaml."""

from __future__ import annotations

import attrs


@attrs.frozen
class ServerConfig:
    """Where the HTTP API listens and who may use it.

    ``api_keys`` maps principals to bearer tokens (set them from the environment:
    ``SOULACY_SERVER__API_KEYS__ALICE=…``). With none, only loopback clients are served.
    ``admins`` are the principals that may read and change the configuration.
    """

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8484
    api_keys: dict[str, str] = attrs.Factory(dict)
    admins: list[str] = attrs.Factory(list)
    max_body_bytes: int = 1_048_576
    events_per_run: int = 10_000
    finished_runs_kept: int = 1000
