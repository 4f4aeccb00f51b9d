"""Redaction: secrets never leave in a printout, an API answer, an event or an error message.

A value is secret when its key names a secret (``api_key``, ``Authorization``, ``cookie`` …) at
any depth, headers included. Names are matched as words so that settings such as
``max_build_tokens`` or ``chars_per_token`` stay visible. Free text (an error a provider
returned, say) is scrubbed of bearer tokens and ``key=value`` secrets.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"

# A key is secret when one of its words (split at _ - . and case changes) is one of these, or
# when it ends in one of the compound names. "tokens" alone is a secret (a map of tokens);
# "max_tokens" is a count: a word before "tokens" that makes it a count keeps it visible.
_SECRET_WORDS = frozenset(
    {
        "authorization",
        "apikey",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "bearer",
        "jwt",
        "pat",
        "secret",
        "secrets",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "dsn",
        "auth",
        "signature",
    }
)
# Names that hold a whole connection string (a password may be inside).
_SECRET_NAMES = frozenset({"database_url", "db_url", "connection_string", "conn_str", "dsn"})
_SECRET_COMPOUNDS = (
    "api_key",
    "api_keys",
    "access_token",
    "refresh_token",
    "auth_token",
    "private_key",
    "client_secret",
    "set_cookie",
    "x_api_key",
    "session_token",
)
_COUNT_WORDS = frozenset({"max", "min", "input", "output", "per", "build", "chars", "total", "num"})
# Before "tokens" (plural), these make it a collection of credentials rather than a count.
_CREDENTIAL_WORDS = frozenset({"api", "access", "refresh", "auth", "bearer", "session", "id"})


@functools.lru_cache(maxsize=4096)  # asked of every tool call's argument names, every turn
def is_secret_key(key: str) -> bool:
    """True when ``key`` names a secret (``Authorization``, ``api_keys``, ``x-api-key`` …)."""
    if not key:
        return False
    normal = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower().replace("-", "_").replace(".", "_")
    words = [w for w in normal.split("_") if w]
    if any(w in _SECRET_WORDS or w.endswith(("password", "passwd")) for w in words):
        return True  # PGPASSWORD, X-Custom-Auth, db_password
    if normal in _SECRET_NAMES:
        return True
    if any(normal == c or normal.endswith("_" + c) for c in _SECRET_COMPOUNDS):
        return True
    if words and words[-1] in ("key", "keys"):
        # alone, or a kind of key: access_key, signing_key, x-functions-key, subscription_key
        return True
    if len(words) > 1 and words[-2] == "key" and words[-1] in ("id", "secret"):
        return True  # AWS_ACCESS_KEY_ID
    if words and words[-1] == "token":
        # alone, or after a word that does not make it a count: bearer_token, hf_token
        return len(words) == 1 or words[-2] not in _COUNT_WORDS
    if words and words[-1] == "tokens":
        # a map of tokens (tokens, api_tokens), not a count (max_tokens, overhead_tokens)
        return len(words) == 1 or words[-2] in _CREDENTIAL_WORDS
    return False


def masks_members(key: str) -> bool:
    """Whether every value of the mapping under ``key`` is a secret, whatever its name: a
    collector's or a provider's ``headers`` (x-honeycomb-team) and an MCP server's ``env``
    (GH_PAT) carry credentials under names no word list knows."""
    normal = key.lower().replace("-", "_")
    return normal.endswith("headers") or normal == "env" or normal.endswith("_env")


def redact(data: Any, key: str = "") -> Any:
    """A copy of ``data`` with the value of every secret-named key replaced by ``***``."""
    if isinstance(data, dict):
        # A mapping of secrets (api_keys: {principal: token}), or of headers: a collector's
        # or a provider's headers carry credentials under vendor names (x-honeycomb-team).
        if is_secret_key(key) or masks_members(key):
            return {k: MASK if v else v for k, v in data.items()}
        return {k: redact(v, str(k)) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact(v, key) for v in data]
    if is_secret_key(key) and data not in (None, "", 0, False):
        return MASK
    if isinstance(data, str):
        return redact_text(data)
    return data


_WORD_START = r"(?<![A-Za-z0-9])"  # not \b: "_" is a word character, and access_token=… counts
_IN_TEXT = re.compile(
    # Authorization: Bearer xyz / Proxy-Authorization: Basic xyz — the scheme word is kept
    r"(?i)(" + _WORD_START + r"(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:bearer|basic|token|digest)\s+)?)[^\s\"',;&]{4,}"
    r"|(" + _WORD_START + r"bearer\s+)[A-Za-z0-9._~+/=-]{4,}"
    r"|("
    + _WORD_START
    + r"(?:[a-z]+[_-])?(?:api[_-]?key|token|key|sig|"
    + "|".join(sorted(_SECRET_WORDS - {"authorization", "apikey", "dsn"}, key=len, reverse=True))
    + r")"
    r"(?![A-Za-z0-9])[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]{4,}"
    r"|(" + _WORD_START + r"[a-z][a-z0-9+.-]*://[^\s/:@]+:)[^\s/@]+(?=@)"  # URL userinfo password
    r"|" + _WORD_START + r"(sk|pk|rk)-[A-Za-z0-9_-]{8,}"
)


def redact_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as events, history and proofs keep them: every secret-named
    value masked, at any depth, and secrets in free text scrubbed (the tool itself gets the
    real values). Ids (``session_id``, ``run_id``) stay visible."""
    return {name: redact(value, str(name)) for name, value in arguments.items()}


def redact_text(text: str) -> str:
    """``text`` with bearer tokens, ``api_key=…`` style secrets and ``sk-…`` keys masked."""
    if not text:
        return text

    def mask(match: re.Match[str]) -> str:
        prefix = match.group(1) or match.group(2) or match.group(3) or match.group(4)
        if prefix:
            return prefix + MASK
        return f"{match.group(5)}-{MASK}"

    return _IN_TEXT.sub(mask, text)
