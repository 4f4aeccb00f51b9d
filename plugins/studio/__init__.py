"""Studio builds: generate or repair an agent's SOUL.yaml with a model until it validates and
its checks pass, within the workspace's build allowances (``llm.studio.*`` in config.yaml).

Studio owns ``llm.studio`` and declares its allowances as limits of the execution policy
(``soulacy_policy_limits``: ``max_build_tokens``, ``max_build_cost_usd``, ``max_build_attempts``,
``max_build_elapsed``); with ``-p no:studio`` they do not exist.

``soulacy build SPEC.yaml`` on the command line; ``await build(kernel, spec)`` in Python.
Generated agents inherit the workspace policy: limits the model embeds are removed, and limits
the person set (in the file, or under ``limits:`` of the spec) are kept exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from soulacy.kernel import CliCommand, ConfigSection
from soulacy.kernel.policy import PolicyLimit

from ._allowances import POLICY_LIMITS, Allowances, StudioConfig
from ._build import BuildResult, build
from ._cli import command
from ._spec import LIMIT_PATHS, BuilderModel, BuildSpec, Check, Expectation, as_spec, load_spec

__all__ = [
    "LIMIT_PATHS",
    "POLICY_LIMITS",
    "Allowances",
    "BuildResult",
    "BuildSpec",
    "BuilderModel",
    "Check",
    "Expectation",
    "StudioConfig",
    "as_spec",
    "build",
    "load_spec",
]


def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection("llm.studio", StudioConfig, doc="allowances of one Studio build")]


def soulacy_policy_limits() -> Sequence[PolicyLimit]:
    return POLICY_LIMITS


def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [command()]
