"""Fixtures shared by the tests of the builtin execution-policy plugin (``soulacy.plugins.policy``).

The kernel's own testing plugin (``workspace``, ``make_kernel``, ``kernel``) is opted into by
tests/conftest.py (``pytest_plugins``); these fixtures build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pytest

from soulacy.cli import main
from soulacy.kernel import Kernel
from soulacy.kernel.policy import PolicyLimit, declared_limits
from soulacy.plugins.policy import ExecutionPolicy, ModelCapacity
from soulacy.testing import Workspace, throwaway_plugin

Content = str | Mapping[str, Any]
# The environment of in-process CLI runs: no entry-point plugins, nothing from the real shell.
CLI_ENVIRON = {"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1"}


def make_capacity_plugin(
    capacity: ModelCapacity | None, calls: list[tuple[str | None, str | None]] | None = None
) -> Any:
    """A throwaway plugin that reports ``capacity`` for every model (and records the asks)."""

    def soulacy_model_capacity(
        kernel: Kernel, provider: str | None, model: str | None
    ) -> ModelCapacity | None:
        if calls is not None:
            calls.append((provider, model))
        return capacity

    return throwaway_plugin("model-capacity", soulacy_model_capacity=soulacy_model_capacity)


@pytest.fixture(scope="session")
def capacity_plugin() -> Callable[..., Any]:
    """``capacity_plugin(ModelCapacity(...), calls=None)``: a model-capacity plugin."""
    return make_capacity_plugin


@pytest.fixture
def resolve_policy(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> Callable[..., ExecutionPolicy]:
    """Write config.yaml and ``agents/a/SOUL.yaml``, load a kernel and resolve agent ``a``.

    ``resolve_policy(config=None, agent=None, overrides=None, capacity=None, plugins=())``;
    an agent of None writes an agent file without any policy key.
    """

    def resolve(
        config: Content | None = None,
        agent: Content | None = None,
        overrides: Mapping[str, Any] | None = None,
        capacity: ModelCapacity | None = None,
        plugins: Sequence[object] = (),
    ) -> ExecutionPolicy:
        if config is not None:
            workspace.write_config(config)
        workspace.write_agent("a", agent if agent is not None else {"id": "a"})
        extra = [*plugins, make_capacity_plugin(capacity)] if capacity else [*plugins]
        policy: ExecutionPolicy = make_kernel(extra_plugins=extra).resolve_policy("a", overrides)
        return policy

    return resolve


@pytest.fixture(scope="session")
def load_kernel(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Kernel]:
    """Build a kernel on a fresh workspace of its own (session-scoped: usable under hypothesis).

    ``load_kernel(config=None, agents=None, environ=None, plugins=())``.
    """

    def load(
        config: Content | None = None,
        agents: Mapping[str, Content] | None = None,
        environ: Mapping[str, str] | None = None,
        plugins: Sequence[object] = (),
    ) -> Kernel:
        ws = Workspace(tmp_path_factory.mktemp("policy-ws"))
        if config is not None:
            ws.write_config(config)
        for agent_id, content in (agents or {}).items():
            ws.write_agent(agent_id, content)
        return Kernel.load(
            ws.path, autoload=False, environ=dict(environ or {}), extra_plugins=plugins
        )

    return load


@pytest.fixture(scope="session")
def declared(load_kernel: Callable[..., Kernel]) -> tuple[PolicyLimit, ...]:
    """The limits the builtin plugins declare (studio's allowances, the HTTP deadline), for the
    pure ``resolve`` to resolve them as the kernel's hook does."""
    return tuple(declared_limits(load_kernel()).values())


@attrs.frozen
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def soulacy_cli(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> Callable[..., CliResult]:
    """Run ``soulacy -w WORKSPACE ARGS...`` in-process; returns exit code, stdout and stderr."""

    def run(*args: str) -> CliResult:
        code = main(["-w", str(workspace.path), *args], environ=CLI_ENVIRON)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
