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
from typing import TYPE_CHECKING

from soulacy.kernel import CliCommand, lazy_exports

if TYPE_CHECKING:
    from soulacy.kernel import ConfigSection
    from soulacy.kernel.policy import PolicyLimit

    from ._allowances import POLICY_LIMITS, Allowances, StudioConfig
    from ._build import BuildResult, build
    from ._spec import (
        LIMIT_PATHS,
        BuilderModel,
        BuildSpec,
        Check,
        Expectation,
        as_spec,
        load_spec,
    )

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

# Imported on first use (PEP 562): declaring the plugin's hooks and ``soulacy build`` imports
# no part of a build (decision 0036).
_LAZY = {
    "POLICY_LIMITS": "._allowances",
    "Allowances": "._allowances",
    "StudioConfig": "._allowances",
    "BuildResult": "._build",
    "build": "._build",
    "LIMIT_PATHS": "._spec",
    "BuilderModel": "._spec",
    "BuildSpec": "._spec",
    "Check": "._spec",
    "Expectation": "._spec",
    "as_spec": "._spec",
    "load_spec": "._spec",
}


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, _LAZY)


def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection

    from ._allowances import StudioConfig

    return [ConfigSection("llm.studio", StudioConfig, doc="allowances of one Studio build")]


def soulacy_policy_limits() -> Sequence[PolicyLimit]:
    from ._allowances import POLICY_LIMITS

    return POLICY_LIMITS


def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand(
            "build",
            "generate or repair an agent with a model until it validates and its checks pass",
            "soulacy.plugins.studio._cli:_build",
            "soulacy.plugins.studio._cli:_configure",
        )
    ]
