"""The allowances of one build (``llm.studio.*``): tokens, spend, attempts and elapsed time.

A build of an agent that loads resolves them through the policy hook, so that a stricter
deployment policy (a wrapper of ``soulacy_resolve_policy``) applies to builds too. A new agent
has no file to resolve, and a repair usually starts from a file that does not load, so then the
workspace configuration is read directly with the same semantics as the builtin policy
(plugins do not import each other).
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from soulacy.kernel import Kernel, Settings, SoulacyError
from soulacy.kernel.policy import CONFIG, DEFAULT, ENVIRONMENT, ExecutionPolicy, Limit

from ._scratch import scratch_kernel

DEFAULT_ATTEMPTS = 32
# The defaults of the seed's table, used when no plugin owns ``llm.studio`` (policy disabled).
_DEFAULTS: dict[str, Any] = {
    "max_build_tokens": 0,
    "max_build_cost_usd": 0.0,
    "max_build_attempts": DEFAULT_ATTEMPTS,
    "max_build_elapsed": 48 * 3600.0,
}


@attrs.frozen
class Allowances:
    """The resolved allowances; ``Limit.value`` None is unlimited."""

    max_build_tokens: Limit[int]
    max_build_cost_usd: Limit[float]
    max_build_attempts: Limit[int]
    max_build_elapsed: Limit[float]
    resolved_by: str  # "policy hook" or "config.yaml"

    @classmethod
    def from_policy(cls, policy: ExecutionPolicy) -> Allowances:
        return cls(
            policy.max_build_tokens,
            policy.max_build_cost_usd,
            policy.max_build_attempts,
            policy.max_build_elapsed,
            "policy hook",
        )

    @classmethod
    def from_config(cls, config: Settings) -> Allowances:
        """``0`` tokens or dollars: none; attempts ``-1``: unlimited, ``0``: the default (32);
        elapsed ``"0"``: no practical limit."""
        attempts = _read(config, "max_build_attempts", unlimited_at=-1)
        if attempts.value == 0:
            attempts = attrs.evolve(
                attempts, value=DEFAULT_ATTEMPTS, reason="0 selects the default"
            )
        return cls(
            _read(config, "max_build_tokens"),
            _read(config, "max_build_cost_usd"),
            attempts,
            _read(config, "max_build_elapsed"),
            "config.yaml",
        )

    def exhausted(self, tokens: int, cost_usd: float, attempts: int | None = None) -> str | None:
        """The allowance that leaves no room for another attempt (or, without ``attempts``,
        another check run), if any."""
        if self.max_build_tokens.value is not None and tokens >= self.max_build_tokens.value:
            return "max_build_tokens"
        cost_limit = self.max_build_cost_usd.value
        if cost_limit is not None and cost_usd >= cost_limit:
            return "max_build_cost_usd"
        attempts_limit = self.max_build_attempts.value
        if attempts is not None and attempts_limit is not None and attempts >= attempts_limit:
            return "max_build_attempts"
        return None

    def to_dict(self) -> dict[str, Any]:
        out = {
            name: getattr(self, name).to_dict(duration=name == "max_build_elapsed")
            for name in _DEFAULTS
        }
        return {**out, "resolved_by": self.resolved_by}


def _read(config: Settings, name: str, *, unlimited_at: Any = 0) -> Limit[Any]:
    path = f"llm.studio.{name}"
    try:
        value = config.get(path)
    except KeyError:  # no loaded plugin owns llm.studio
        value = _DEFAULTS[name]
    raw = float(value.seconds) if hasattr(value, "seconds") else value
    loc = config.source_of(path)
    if loc is None:
        source = DEFAULT
    else:
        source = ENVIRONMENT if loc.file.startswith("environment") else CONFIG
    return Limit(None if raw == unlimited_at else raw, source, str(loc) if loc else None)


async def resolve_allowances(kernel: Kernel, agent_id: str, exists: bool) -> Allowances:
    """Through the policy hook when the agent's file loads, else from config.yaml."""
    if exists:
        # A kernel of its own: resolving loads the agent file into that kernel's cache, and the
        # caller's kernel must not keep a copy of a file the build is about to change.
        resolver = scratch_kernel(kernel, kernel.workspace)
        try:
            policy = resolver.resolve_policy(agent_id)
        except SoulacyError:  # an invalid file (the usual reason to repair), no policy plugin
            policy = None
        finally:
            with trio.CancelScope(shield=True):
                await resolver.aclose()
        if isinstance(policy, ExecutionPolicy):
            return Allowances.from_policy(policy)
    return Allowances.from_config(kernel.config)
