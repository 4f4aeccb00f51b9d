"""Studio builds: generate or repair an agent's SOUL.yaml with a model until it validates and
its checks pass, within the workspace's build allowances (``llm.studio.*`` in config.yaml).

``soulacy build SPEC.yaml`` on the command line; ``await build(kernel, spec)`` in Python.
Generated agents inherit the workspace policy: limits the model embeds are removed, and limits
the person set (in the file, or under ``limits:`` of the spec) are kept exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from soulacy.kernel import CliCommand

from ._allowances import Allowances
from ._build import BuildResult, build
from ._cli import command
from ._spec import LIMIT_PATHS, BuilderModel, BuildSpec, Check, Expectation, as_spec, load_spec

__all__ = [
    "LIMIT_PATHS",
    "Allowances",
    "BuildResult",
    "BuildSpec",
    "BuilderModel",
    "Check",
    "Expectation",
    "as_spec",
    "build",
    "load_spec",
]


def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [command()]
