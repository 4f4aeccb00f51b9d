"""The allowances of one build (``llm.studio.*``): tokens, spend, attempts and elapsed time.

Studio owns ``llm.studio`` and declares the four allowances as limits of the execution policy
(``soulacy_policy_limits``), so the policy resolves, checks and reports them as it does its own.
A build of an agent that loads resolves them through the policy hook, so that a stricter
deployment policy (a wrapper of ``soulacy_resolve_policy``) applies to builds too. A new agent
has no file to resolve, and a repair usually starts from a file that does not load, so then the
workspace's values are read through the policy plugin's limit reader (``soulacy_workspace_limit``:
plugins do not import each other, and studio keeps no copy of the policy's rules). With the
policy plugin disabled nothing reads them and the declared defaults apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel import Duration, SoulacyError
from soulacy.kernel.policy import DEFAULT, ExecutionPolicy, Limit, PolicyLimit

if TYPE_CHECKING:  # the config section is read before any kernel exists (decision 0038)
    from soulacy.kernel import Kernel

DEFAULT_ATTEMPTS = 32
DEFAULT_ELAPSED = 48 * 3600


@attrs.frozen
class StudioConfig:
    """``llm.studio:`` in config.yaml: allowances of one Studio build."""

    max_build_tokens: int = 0
    max_build_cost_usd: float = 0.0
    max_build_attempts: int = DEFAULT_ATTEMPTS
    max_build_elapsed: Duration = Duration(DEFAULT_ELAPSED)


# The allowances as limits of the execution policy, in the order they are reported.
POLICY_LIMITS = (
    PolicyLimit(
        "max_build_tokens",
        "llm.studio.max_build_tokens",
        None,
        "tokens of one Studio build",
        minimum=0,
        meaning="0 means unlimited",
    ),
    PolicyLimit(
        "max_build_cost_usd",
        "llm.studio.max_build_cost_usd",
        None,
        "US dollars of one Studio build",
        minimum=0,
        meaning="0 means unlimited",
    ),
    PolicyLimit(
        "max_build_attempts",
        "llm.studio.max_build_attempts",
        DEFAULT_ATTEMPTS,
        "attempts (model calls) of one Studio build",
        unlimited_at=-1,
        selects_default=0,
        minimum=-1,
        meaning="-1 means unlimited, 0 selects the default",
    ),
    PolicyLimit(
        "max_build_elapsed",
        "llm.studio.max_build_elapsed",
        float(DEFAULT_ELAPSED),
        "wall time of one Studio build",
        duration=True,
    ),
)
_BY_NAME = {limit.name: limit for limit in POLICY_LIMITS}


@attrs.frozen
class Allowances:
    """The resolved allowances; ``Limit.value`` None is unlimited."""

    max_build_tokens: Limit[int]
    max_build_cost_usd: Limit[float]
    max_build_attempts: Limit[int]
    max_build_elapsed: Limit[float]
    resolved_by: str  # "policy hook" or "config.yaml"

    @classmethod
    def from_policy(cls, policy: ExecutionPolicy, kernel: Kernel) -> Allowances:
        """The allowances the policy resolved; one a replacement policy left out (it does not
        know Studio's limits) is the workspace value."""

        def get(name: str) -> Limit[Any]:
            found = policy.extra.get(name)
            return found if found is not None else _read(kernel, _BY_NAME[name])

        return cls(
            get("max_build_tokens"),
            get("max_build_cost_usd"),
            get("max_build_attempts"),
            get("max_build_elapsed"),
            "policy hook",
        )

    @classmethod
    def from_config(cls, kernel: Kernel) -> Allowances:
        """The workspace's values. ``0`` tokens or dollars: none; attempts ``-1``: unlimited,
        ``0``: the default (32); elapsed ``"0"``: no practical limit."""

        def get(name: str) -> Limit[Any]:
            return _read(kernel, _BY_NAME[name])

        return cls(
            get("max_build_tokens"),
            get("max_build_cost_usd"),
            get("max_build_attempts"),
            get("max_build_elapsed"),
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
            limit.name: getattr(self, limit.name).to_dict(duration=limit.duration)
            for limit in POLICY_LIMITS
        }
        return {**out, "resolved_by": self.resolved_by}


def _read(kernel: Kernel, declared: PolicyLimit) -> Limit[Any]:
    """The workspace value of one allowance as the policy plugin reads it, or the declared
    default when no plugin answers (the policy plugin, which defines the hook, is disabled)."""
    reader = getattr(kernel.hook, "soulacy_workspace_limit", None)
    found = reader(config=kernel.config, declared=declared) if reader is not None else None
    if isinstance(found, Limit):
        return found
    return Limit(declared.default, DEFAULT)


async def resolve_allowances(kernel: Kernel, agent_id: str, exists: bool) -> Allowances:
    """Through the policy hook when the agent's file loads, else from config.yaml."""
    if exists:
        # A kernel of its own: resolving loads the agent file into that kernel's cache, and the
        # caller's kernel must not keep a copy of a file the build is about to change.
        import trio

        from ._scratch import scratch_kernel

        resolver = scratch_kernel(kernel, kernel.workspace)
        try:
            policy = resolver.resolve_policy(agent_id)
        except SoulacyError:  # an invalid file (the usual reason to repair), no policy plugin
            policy = None
        finally:
            with trio.CancelScope(shield=True):
                await resolver.aclose()
        if isinstance(policy, ExecutionPolicy):
            return Allowances.from_policy(policy, kernel)
    return Allowances.from_config(kernel)
