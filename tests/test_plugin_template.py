"""The plugin template renders, installs into a venv beside Soulacy and passes its own tests."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # pip and pytest in processes of their own
ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "plugins" / "core" / "plugin-template"  # package data of soulacy.plugins.core


def test_the_template_renders_installs_and_passes_its_tests(tmp_path: Path) -> None:
    project = tmp_path / "soulacy-acme"
    shutil.copytree(TEMPLATE, project, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "rename.py", "acme"], cwd=project, check=True)
    assert (project / "src" / "soulacy_acme" / "__init__.py").is_file()
    assert not (project / "rename.py").exists()
    assert "hello" not in (project / "pyproject.toml").read_text()

    # A venv of its own that sees this environment's packages (Soulacy and its dependencies):
    # the plugin is installed into it, not into the environment running this test.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    inner = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(inner), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    # An import line in a .pth runs at start-up: addsitedir also processes the outer .pth files
    # (Soulacy's editable install is one).
    lines = [f"import site; site.addsitedir({path!r})" for path in dict.fromkeys(outer)]
    Path(purelib, "outer-environment.pth").write_text("\n".join(lines) + "\n")
    subprocess.run(
        [
            str(inner),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-e",
            str(project),
        ],
        check=True,
        timeout=300,
    )

    listed = subprocess.run(
        [str(inner), "-m", "soulacy.cli", "plugins", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert '"distribution": "soulacy-acme"' in listed.stdout
    tests = subprocess.run(
        [str(inner), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout
