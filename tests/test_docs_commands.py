"""Every shell block of README.md and docs/*.md marked runnable runs, as a new user would paste it.

A block is marked by an HTML comment on the line right before its fence::

    <!-- runnable -->            every command exits 0 (the block runs under bash -e -o pipefail)
    <!-- runnable exit=2 -->     the block ends with exit code 2
    <!-- runnable venv -->       in a venv of its own that sees this environment's packages, so
                                 that a block which pip-installs something leaves this one alone

    ```sh
    soulacy demo
    ```

Each block runs in a fresh temporary folder, with ``soulacy`` and ``python`` on PATH from the
interpreter running the tests and no SOULACY_* variables. Keep marked blocks fast and offline:
the scripted model only, no network.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!--\s*runnable(?P<options>(\s+[\w=]+)*)\s*-->\s*$")
FENCE = re.compile(r"^```(sh|bash|shell)\s*$")
TIMEOUT = 240  # seconds per block, on a slow shared machine


@attrs.frozen
class Block:
    file: Path
    line: int  # of the first command, 1-based
    script: str
    exit: int = 0
    venv: bool = False

    @property
    def where(self) -> str:
        shown = self.file.relative_to(ROOT) if self.file.is_relative_to(ROOT) else self.file
        return f"{shown}:{self.line}"


def blocks_of(path: Path) -> tuple[list[Block], list[str]]:
    """The marked blocks of a markdown file, and the problems of markers that mark nothing."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, problems = [], []
    for n, line in enumerate(lines):
        marker = MARKER.match(line)
        if marker is None:
            continue
        options = {}
        for option in marker["options"].split():
            key, _, value = option.partition("=")
            options[key] = value
        unknown = set(options) - {"exit", "venv"}
        if unknown:
            problems.append(f"{path}:{n + 1}: unknown runnable option(s) {sorted(unknown)}")
            continue
        if n + 1 >= len(lines) or not FENCE.match(lines[n + 1]):
            problems.append(f"{path}:{n + 1}: <!-- runnable --> is not right before a ```sh fence")
            continue
        body = []
        for end in range(n + 2, len(lines)):
            if lines[end].strip() == "```":
                break
            body.append(lines[end])
        else:
            problems.append(f"{path}:{n + 2}: the runnable block's fence is never closed")
            continue
        found.append(
            Block(
                path,
                n + 3,
                "\n".join(body) + "\n",
                int(options.get("exit") or 0),
                "venv" in options,
            )
        )
    return found, problems


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _environment(tmp: Path, venv: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    env.pop("VIRTUAL_ENV", None)
    bin_dir = Path(sys.executable).parent
    if venv:
        bin_dir = _isolated_venv(tmp / ".venv")
        env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_BUILD_ISOLATION="0")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(tmp / ".home")  # nothing of the user's own configuration
    return env


def _isolated_venv(venv: Path) -> Path:
    """A venv (no pip of its own) that sees this environment's packages through a .pth, with
    ``pip`` and ``soulacy`` commands: what is installed into it stays in it."""
    import site
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    inner = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(inner), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    lines = [f"import site; site.addsitedir({path!r})" for path in dict.fromkeys(outer)]
    Path(purelib, "outer-environment.pth").write_text("\n".join(lines) + "\n")
    for name, module in (("pip", "pip"), ("soulacy", "soulacy.kernel.cli")):
        shim = venv / "bin" / name
        shim.write_text(f'#!/bin/sh\nexec "{inner}" -m {module} "$@"\n')
        shim.chmod(0o755)
    return venv / "bin"


def run_block(block: Block, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run one block in ``tmp`` (a fresh folder) and return what it did."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / ".home").mkdir(exist_ok=True)
    env = _environment(tmp, block.venv)
    work = tmp / "work"
    work.mkdir()
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def check_block(block: Block, tmp: Path) -> None:
    done = run_block(block, tmp)
    assert done.returncode == block.exit, (
        f"{block.where}: expected the runnable block to exit {block.exit}, got"
        f" {done.returncode}\n--- block ---\n{block.script}--- stdout ---\n{done.stdout[-3000:]}"
        f"--- stderr ---\n{done.stderr[-3000:]}"
    )


def _collect() -> list[Block]:
    return [block for path in documents() for block in blocks_of(path)[0]]


@pytest.mark.parametrize("block", _collect(), ids=lambda b: b.where)
def test_a_runnable_doc_block_runs(block: Block, tmp_path: Path) -> None:
    check_block(block, tmp_path)


def test_every_runnable_marker_marks_a_block() -> None:
    problems = [p for path in documents() for p in blocks_of(path)[1]]
    assert problems == [], f"expected every <!-- runnable --> to mark a ```sh block, got {problems}"


def test_the_docs_have_runnable_blocks() -> None:
    marked = {block.file.name for block in _collect()}
    for name in ("storage.md", "running.md", "plugins.md"):
        assert name in marked, f"expected a runnable block in docs/{name}, got blocks in {marked}"


# -- the runner itself ----------------------------------------------------------------------------

SAMPLE = """# A page

```sh
soulacy this-block-is-not-marked
```

<!-- runnable -->
```sh
soulacy --help > /dev/null
echo "fine"
```

<!-- runnable -->
```sh
soulacy no-such-command
echo "never reached"
```

<!-- runnable exit=2 -->
```sh
soulacy run nosuch hi
```

<!-- runnable -->
```sh
false
echo "a failing command in the middle fails the block"
```

<!-- runnable -->

```sh
echo "a marker separated from its fence"
```
"""


def test_the_runner_fails_a_broken_block_and_passes_a_good_one(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(SAMPLE)
    blocks, problems = blocks_of(page)
    assert [b.line for b in blocks] == [9, 15, 21, 26], (
        f"expected the 4 marked blocks, got {blocks}"
    )
    assert [b.exit for b in blocks] == [0, 0, 2, 0]
    assert len(problems) == 1, f"expected the stray marker reported, got {problems}"
    assert "not right before" in problems[0], f"expected the stray marker reported, got {problems}"
    good, broken, expected_two, stops_early = blocks
    check_block(good, tmp_path / "good")
    check_block(expected_two, tmp_path / "two")
    for n, bad in enumerate((broken, stops_early)):
        with pytest.raises(
            AssertionError, match=r"expected the runnable block to exit 0, got [12]"
        ):
            check_block(bad, tmp_path / f"bad{n}")
    assert "never reached" not in run_block(broken, tmp_path / "again").stdout


def test_a_block_runs_in_a_scratch_folder_without_soulacy_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOULACY_WORKSPACE", str(ROOT))
    block = Block(tmp_path / "x.md", 1, 'test -z "${SOULACY_WORKSPACE:-}"\npwd\nls -A\n')
    done = run_block(block, tmp_path / "scratch")
    assert done.returncode == 0, f"expected a clean environment, got {done.stderr}"
    assert done.stdout.splitlines() == [str(tmp_path / "scratch" / "work")], (
        f"expected an empty scratch folder as cwd, got {done.stdout!r}"
    )
