"""Where the client connects, with what key, and how long it waits: shared by both clients."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "KEY_VARIABLE",
    "URL_VARIABLE",
    "Settings",
]

DEFAULT_URL = "http://127.0.0.1:8484"
DEFAULT_TIMEOUT = 172_860.0  # 48 hours plus one minute: the server's own HTTP deadline, and more
URL_VARIABLE = "SOULACY_URL"
KEY_VARIABLE = "SOULACY_API_KEY"
USER_AGENT = "soulacy-python-sdk"


@dataclass(frozen=True, slots=True)
class Settings:
    """The resolved connection settings of a client."""

    base_url: str
    api_key: str | None
    timeout: float | None  # seconds; None waits without limit

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        api_key: str | None,
        timeout: float | None,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Arguments first, then ``SOULACY_URL`` / ``SOULACY_API_KEY``, then the defaults.

        ``timeout`` None or 0 means no limit; a negative or NaN timeout is a ValueError.
        """
        env = os.environ if environ is None else environ
        url = (base_url or env.get(URL_VARIABLE) or DEFAULT_URL).rstrip("/")
        key = api_key if api_key is not None else env.get(KEY_VARIABLE)
        if timeout is not None and (math.isnan(timeout) or timeout < 0):
            raise ValueError(f"timeout must be positive, 0 or None (no limit), not {timeout!r}")
        return cls(url, key or None, float(timeout) if timeout else None)

    @property
    def headers(self) -> dict[str, str]:
        """The headers of every request: the bearer token when there is a key."""
        headers = {"user-agent": USER_AGENT, "accept": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    @property
    def client_options(self) -> dict[str, Any]:
        """The arguments of ``httpx.Client`` and ``httpx.AsyncClient``, but ``transport``."""
        return {"base_url": self.base_url, "headers": self.headers, "timeout": self.httpx_timeout}

    @property
    def httpx_timeout(self) -> httpx.Timeout:
        """The same limit for connecting, reading, writing and waiting for a pooled connection."""
        return httpx.Timeout(self.timeout)
