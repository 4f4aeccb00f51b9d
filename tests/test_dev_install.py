"""``python3 dev.py demo`` on a first run says what it installs, how long that takes, and how
far it has got, in a few lines (pip's whole output goes to a log file instead).

pip itself is replaced by a script printing a recorded transcript of its output (as pip prints
it to a pipe): the real install takes a minute and the network.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

TRANSCRIPT = """\
Obtaining file:///work/main
  Installing build dependencies: started
  Installing build dependencies: finished with status 'done'
  Checking if build backend supports build_editable: started
  Checking if build backend supports build_editable: finished with status 'done'
  Getting requirements to build editable: started
  Getting requirements to build editable: finished with status 'done'
  Preparing editable metadata (pyproject.toml): started
  Preparing editable metadata (pyproject.toml): finished with status 'done'
Collecting pluggy>=1.5 (from soulacy==0.1.0)
  Downloading pluggy-1.6.0-py3-none-any.whl.metadata (4.8 kB)
Collecting trio>=0.25 (from soulacy==0.1.0)
  Downloading trio-0.30.0-py3-none-any.whl.metadata (8.5 kB)
Collecting attrs>=23 (from soulacy==0.1.0)
  Using cached attrs-25.3.0-py3-none-any.whl.metadata (10 kB)
Downloading pluggy-1.6.0-py3-none-any.whl (20 kB)
Downloading trio-0.30.0-py3-none-any.whl (499 kB)
   ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 499.2/499.2 kB 12.1 MB/s eta 0:00:00
Building wheels for collected packages: soulacy
  Building editable for soulacy (pyproject.toml): started
  Building editable for soulacy (pyproject.toml): finished with status 'done'
  Created wheel for soulacy: filename=soulacy-0.1.0-0.editable-py3-none-any.whl size=9000
Successfully built soulacy
Installing collected packages: pluggy, attrs, trio, soulacy
Successfully installed attrs-25.3.0 pluggy-1.6.0 soulacy-0.1.0 trio-0.30.0
"""


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_under_test", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = load_dev()
    script = tmp_path / "fake_pip.py"
    script.write_text(
        "import sys\n"
        f"sys.stdout.write({TRANSCRIPT!r})\n"
        "sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)\n"
    )
    monkeypatch.setattr(module, "VENV", tmp_path / "venv")
    (tmp_path / "venv").mkdir()
    monkeypatch.setattr(module, "pip_install_command", lambda: [sys.executable, str(script)])
    return module


def test_a_first_install_says_what_it_does_how_long_and_how_far(
    dev: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    dev.install(first=True)
    _out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0].startswith(
        "dev.py: installing soulacy and its test dependencies into .venv"
        " (about a minute on a first run"
    ), err
    assert all(line.startswith("dev.py: ") for line in lines), err
    assert 3 <= len(lines) <= 8, err  # each top-level step, not pip's every line
    assert "dev.py:   collecting packages: 1 so far" in lines, err  # how far it has got
    assert any("installing 4 packages" in line for line in lines), err
    assert "installed 4 packages in" in lines[-1], err
    assert "\r" not in err  # stderr is not a terminal: no line rewritten in place
    assert "━" not in err
    assert "Downloading" not in err
    log = dev.VENV / "pip-install.log"
    assert log.read_text() == TRANSCRIPT  # pip's whole output is kept


def test_a_failed_install_shows_the_end_of_pips_output_and_exits(
    dev: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    command = dev.pip_install_command()
    monkeypatch.setattr(dev, "pip_install_command", lambda: [*command, "1"])
    with pytest.raises(SystemExit) as exited:
        dev.install(first=False)
    _out, err = capsys.readouterr()
    assert exited.value.code == 1
    assert "Successfully installed attrs-25.3.0" in err  # the end of pip's output, as it was
    assert "pip-install.log" in err
    assert "Traceback" not in err


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    dev = load_dev()
    out = io.StringIO()
    progress = dev.PipProgress(out, tty=True)
    for line in TRANSCRIPT.splitlines(keepends=True):
        progress.feed(line)
    progress.end()
    text = out.getvalue()
    assert "\r" in text
    assert text.endswith("\n")
    assert textwrap.dedent(text).count("\n") <= 4
