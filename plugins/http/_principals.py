"""Who a request is: bearer keys map to principals; without keys, loopback clients are ``local``.

No principal name is special once keys are configured: ``local`` exists only in keyless
loopback mode (so no key may be named ``local``), ``server.api_key`` is the principal
``default``, and admin rights come only from ``server.admins``.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping

from soulacy.kernel import ConfigIssue, Location, Settings

from ._asgi import HttpError
from ._config import ServerConfig

LOCAL = "local"  # the principal of loopback clients when no API key is configured
DEFAULT = "default"  # the principal of the single key ``server.api_key``


def principal_keys(config: ServerConfig) -> dict[str, str]:
    """Every principal with its bearer key: ``api_keys`` plus ``api_key`` as ``default``."""
    keys = dict(config.api_keys)
    if config.api_key is not None:
        keys.setdefault(DEFAULT, config.api_key)
    return keys


def key_issues(config: Settings) -> list[ConfigIssue]:
    """Empty keys, a key named ``local``, ``default`` twice, one key for two principals."""
    server: ServerConfig = config.section("server")

    def issue(path: str, message: str, shown: object = None) -> ConfigIssue:
        loc = config.source_of(path) or config.source_of(path.rsplit(".", 1)[0])
        return ConfigIssue(loc or Location(str(config.file)), path, message, shown, True)

    issues = []
    entries: list[tuple[str, str]] = [
        (f"server.api_keys.{p}", k) for p, k in server.api_keys.items()
    ]
    if server.api_key is not None:
        entries.insert(0, ("server.api_key", server.api_key))
        if DEFAULT in server.api_keys:
            issues.append(
                issue(
                    f"server.api_keys.{DEFAULT}",
                    f"server.api_key is the principal {DEFAULT!r}; name this key otherwise",
                )
            )
    if LOCAL in server.api_keys:
        issues.append(
            issue(
                f"server.api_keys.{LOCAL}",
                f"{LOCAL!r} is the principal of keyless loopback mode; name this key otherwise",
            )
        )
    seen: dict[str, str] = {}
    for path, key in entries:
        if not key.strip():
            issues.append(issue(path, "an API key must not be empty or blank", repr(key)))
        elif key in seen:  # values are never shown: only where they are
            issues.append(issue(path, f"the same key as {seen[key]}: one key, one principal"))
        else:
            seen[key] = path
    return issues


class Principals:
    """Turns a request's headers and client address into a principal (or an HttpError)."""

    def __init__(self, config: ServerConfig) -> None:
        self.keys = principal_keys(config)
        self.admins = frozenset(config.admins)
        self._tokens = [(p, k.encode()) for p, k in self.keys.items()]

    @property
    def keyless(self) -> bool:
        return not self._tokens

    def authenticate(self, headers: Mapping[str, str], client: str | None) -> str:
        if self.keyless:
            if is_loopback(client):
                return LOCAL
            raise HttpError(403, "no API key is configured, so only loopback clients are served")
        scheme, _, token = headers.get("authorization", "").partition(" ")
        offered = token.strip().encode()
        found = None
        for principal, key in self._tokens:  # compare with every key: no early exit
            if hmac.compare_digest(offered, key) and offered and scheme.lower() == "bearer":
                found = principal
        if found is None:
            raise HttpError(401, "missing or invalid bearer token")
        return found

    def is_admin(self, principal: str | None) -> bool:
        # Keyless loopback mode has one principal, the machine's own user: it administers.
        return principal is not None and (
            principal in self.admins or (self.keyless and principal == LOCAL)
        )

    def sees_everything(self, principal: str | None) -> bool:
        """Only keyless loopback mode's ``local``: one trusted user, every run is theirs."""
        return self.keyless and principal == LOCAL


def is_loopback(host: str | None) -> bool:
    """A loopback address, IPv4-mapped IPv6 (``::ffff:127.0.0.1``) included; names are not."""
    if host is None:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
