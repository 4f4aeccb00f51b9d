"""The anthropic contrib plugin is off by default and loads when enabled."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

from soulacy.kernel import ConfigError, Kernel
from soulacy.testing import Workspace

PLUGIN = "soulacy.contrib.anthropic"
PROVIDER = "llm:\n  providers:\n    claude:\n      type: anthropic\n      model: m\n"


def test_it_is_not_loaded_by_default(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel()
    assert not kernel.pm.has_plugin(PLUGIN)
    assert "anthropic" not in kernel.provider_types()
    workspace.write_config(PROVIDER)
    with pytest.raises(ConfigError, match="no loaded plugin provides this provider type"):
        make_kernel()


def test_minus_p_loads_it(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> None:
    workspace.write_config(PROVIDER)
    kernel = make_kernel(plugins=[PLUGIN])
    assert kernel.pm.has_plugin(PLUGIN)
    assert kernel.providers.provider("claude").name == "claude"
    assert type(kernel.providers.provider("claude")).__module__ == PLUGIN


def test_config_yaml_enable_loads_it_and_minus_p_no_blocks_it(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(f"plugins:\n  enable: [{PLUGIN}]\n" + PROVIDER)
    assert "anthropic" in make_kernel().provider_types()
    with pytest.raises(ConfigError, match="no loaded plugin provides this provider type"):
        make_kernel(plugins=[f"no:{PLUGIN}"])


def test_the_command_line_lists_it_only_when_enabled(
    workspace: Workspace, soulacy_cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    env = {"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1"}
    plain = soulacy_cli(["plugins", "--json"], cwd=workspace.path, env=env)
    assert plain.returncode == 0, plain.stderr
    assert PLUGIN not in {p["name"] for p in json.loads(plain.stdout)}
    enabled = soulacy_cli(["-p", PLUGIN, "plugins", "--json"], cwd=workspace.path, env=env)
    assert enabled.returncode == 0, enabled.stderr
    (entry,) = [p for p in json.loads(enabled.stdout) if p["name"] == PLUGIN]
    assert entry["origin"] == "command line"
    assert entry["hooks"] == ["soulacy_provider_types"]
