"""The reference pages say what the program does (issue 38, observation 12): docs/configuration.md
names every key the builtin plugins declare, docs/cli.md's sample of `soulacy plugins` lists what
that command prints, and docs/running.md shows the progress-only rule as the source has it.
(cli.md's `demo` and `policy show` samples are transcripts that test_docs_commands.py runs.)"""

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


def _python_block(page: Path, first: str) -> str:
    text = page.read_text(encoding="utf-8")
    start = text.index(f"```python\n{first}") + len("```python\n")
    return text[start : text.index("\n```", start) + 1]


def test_running_md_shows_the_progress_only_rule_as_the_source_has_it() -> None:
    import soulacy.plugins.classic._loop as loop

    shown = _python_block(ROOT / "docs" / "running.md", "_PROGRESS_ONLY = re.compile(")
    source = Path(loop.__file__).read_text(encoding="utf-8")
    assert shown in source, "docs/running.md's _PROGRESS_ONLY is not the one of the source"


def _outputs(page: Path, command: str) -> list[list[str]]:
    """What the page shows after each ``$ COMMAND`` line (its comment aside), in order."""
    found: list[list[str]] = []
    output: list[str] | None = None
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith(("$ ", "```")):
            output = None
            if line.startswith(f"$ {command}") and line[2:].split("#")[0].strip() == command:
                output = []
                found.append(output)
        elif output is not None:
            output.append(line)
    return found


def test_contrib_postgres_md_shows_the_store_copy_that_deploy_md_runs() -> None:
    shown = _outputs(ROOT / "docs" / "contrib-postgres.md", "soulacy store copy")
    run = _outputs(ROOT / "docs" / "deploy.md", "soulacy store copy")
    assert len(shown) == 2, f"expected the copy and the refused copy, got {shown}"
    assert shown == run, (
        "docs/contrib-postgres.md's `soulacy store copy` differs from deploy.md's, which runs"
    )
