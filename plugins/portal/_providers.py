"""The workspace provider an editor over HTTP may choose: only one that exists.

``llm.default.provider`` is declared with :meth:`ConfigSection.trust_root` and an ``allow``
check, the one hook ``PATCH /config`` gives a plugin to refuse a change before anything is
written: a configured entry (``llm.providers``) or a loaded provider type is accepted, any other
name is refused naming the field (a misspelt ``locl`` would fail every chat of every agent that
names no provider, and be written into each agent created after it). Written in config.yaml by
hand it loads as before; clearing it (``null``) is accepted.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from soulacy.kernel import ConfigSection

KEY = "llm.default.provider"


def known_providers(kernel: Any) -> list[str]:
    """The names a provider may be given: configured entries, then loaded provider types."""
    configured = kernel.config.values.get("llm.providers") or {}
    try:
        types = kernel.provider_types()
    except Exception:  # no registry: only the configured entries are known
        types = {}
    return sorted(set(configured)) + sorted(set(types) - set(configured))


def unknown_provider(kernel: Any, name: str) -> str | None:
    """Why ``name`` is no provider, with a did-you-mean; None when it is one."""
    known = known_providers(kernel)
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"unknown provider {name!r}{hint} (configured under llm.providers or a provider type:"
        f" {', '.join(known) or 'none'}); nothing was saved"
    )


def _allow(kernel: Any, agent_id: str | None, value: Any, saved: Any) -> Mapping[str, str]:
    if value is None or value == saved:
        return {}
    if not isinstance(value, str) or not value.strip():
        return {"": "expected the name of a provider, or null to clear it"}
    why = unknown_provider(kernel, value)
    return {"": why} if why else {}


def sections() -> list[ConfigSection]:
    return [
        ConfigSection.trust_root(
            KEY, doc="the provider of every agent that names none", allow=_allow
        )
    ]
