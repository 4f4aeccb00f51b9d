"""The reference pages say what the program does (issue 38, observation 12): docs/configuration.md
names every key the builtin plugins declare, and docs/cli.md's samples of `soulacy plugins`,
`demo` and `policy show` list what those commands print, in their order."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soulacy.kernel import Kernel, converter

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
CLI = ROOT / "docs" / "cli.md"


def _leaves(node: Any, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, (*prefix, str(key)))
    elif prefix:
        yield ".".join(prefix)


def _table_keys(text: str) -> set[str]:
    """The backticked names in the first column of the page's tables."""
    keys: set[str] = set()
    for line in text.splitlines():
        if line.startswith("| "):
            keys.update(re.findall(r"`([^`]+)`", line.split(" | ")[0]))
    return keys


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Kernel:
    return Kernel.load(tmp_path_factory.mktemp("empty"), autoload=False, environ={})


def test_configuration_md_has_a_row_for_every_key_of_config_yaml(kernel: Kernel) -> None:
    rows = _table_keys(CONFIGURATION.read_text(encoding="utf-8"))
    missing = [key for key in _leaves(kernel.config.to_dict()) if key not in rows]
    assert not missing, f"docs/configuration.md has no row for {missing}"


def test_configuration_md_has_a_row_for_every_key_of_soul_yaml(kernel: Kernel) -> None:
    rows = _table_keys(CONFIGURATION.read_text(encoding="utf-8"))
    agent = kernel.check_agent("a", {}, kernel.workspace / "agents" / "a" / "SOUL.yaml")
    declared = converter.unstructure(dict(agent.settings.values))
    missing = [key for key in declared if key not in rows]
    assert not missing, f"docs/configuration.md's SOUL.yaml table has no row for {missing}"


def _console_sample(page: Path, command: str) -> list[str]:
    """The lines printed after ``$ COMMAND`` in the page's first console sample of it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"$ {command}"))
    out = []
    for line in lines[start + 1 :]:
        if line.startswith(("$ ", "```")):
            break
        out.append(line)
    return out


def _soulacy(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "soulacy.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    return done.stdout


def test_the_plugins_sample_is_what_soulacy_plugins_prints(tmp_path: Path) -> None:
    sample = _console_sample(CLI, "soulacy plugins")
    assert sample == _soulacy("plugins", cwd=tmp_path).splitlines(), (
        "docs/cli.md's `soulacy plugins` sample differs from the command's output"
    )


def _limit_names(lines: list[str], pattern: str) -> list[str]:
    return [m[1] for line in lines if (m := re.match(pattern, line))]


def test_the_demo_and_policy_samples_list_the_limits_in_their_order(tmp_path: Path) -> None:
    printed = _soulacy("demo", "--keep", str(tmp_path / "demo"), cwd=tmp_path).splitlines()
    limit = r"  (\w+): "
    assert _limit_names(_console_sample(CLI, "soulacy demo"), limit) == _limit_names(
        printed, limit
    ), "docs/cli.md's `soulacy demo` sample lists other limits than the command"
    shown = _soulacy("policy", "show", "demo", cwd=tmp_path / "demo").splitlines()
    row = r"  (\w+) +\S"
    assert _limit_names(_console_sample(CLI, "soulacy policy show"), row) == _limit_names(
        shown, row
    ), "docs/cli.md's `soulacy policy show` sample lists other limits than the command"
