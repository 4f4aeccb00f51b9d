"""The allowances of one build (``llm.studio.*``): tokens, spend, attempts and elapsed time.

A build of an agent that loads resolves them through the policy hook, so that a stricter
deployment policy (a wrapper of ``soulacy_resolve_policy``) applies to builds too. A new agent
has no file to resolve, and a repair usually starts from a file that does not load, so then the
workspace's values are read through the policy plugin's limit reader (``soulacy_workspace_limit``:
plugins do not import each other, and studio keeps no copy of the policy's rules). With the
policy plugin disabled nothing owns ``llm.studio`` and the defaults below apply.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from soulacy.kernel import Kernel, SoulacyError
from soulacy.kernel.policy import DEFAULT, ExecutionPolicy, Limit

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
    def from_config(cls, kernel: Kernel) -> Allowances:
        """The workspace's values. ``0`` tokens or dollars: none; attempts ``-1``: unlimited,
        ``0``: the default (32); elapsed ``"0"``: no practical limit."""
        attempts = _read(kernel, "max_build_attempts", unlimited_at=-1)
        if attempts.value == 0:
            attempts = attrs.evolve(
                attempts, value=DEFAULT_ATTEMPTS, reason="0 selects the default"
            )
        return cls(
            _read(kernel, "max_build_tokens"),
            _read(kernel, "max_build_cost_usd"),
            attempts,
            _read(kernel, "max_build_elapsed"),
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


def _read(kernel: Kernel, name: str, *, unlimited_at: Any = 0) -> Limit[Any]:
    """``llm.studio.<name>`` as the policy plugin reads it, or the default when no plugin
    answers (the policy plugin, which owns the section and defines the hook, is disabled)."""
    reader = getattr(kernel.hook, "soulacy_workspace_limit", None)
    found = None
    if reader is not None:
        found = reader(config=kernel.config, path=f"llm.studio.{name}", unlimited_at=unlimited_at)
    if isinstance(found, Limit):
        return found
    value = _DEFAULTS[name]
    return Limit(None if value == unlimited_at else value, DEFAULT)


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
    return Allowances.from_config(kernel)
