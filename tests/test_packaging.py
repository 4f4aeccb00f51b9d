"""The wheel carries every package folder: a package missing from the mapping fails here."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {
    "kernel": "soulacy/kernel",
    "plugins": "soulacy/plugins",
    "contrib": "soulacy/contrib",
    "sdk": "soulacy/sdk",
    "testing": "soulacy/testing",
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the sources: a build writes ``build/`` and ``*.egg-info`` beside
    them, which two parallel workers (each with this module's fixture) would race on, and
    which the checkout's own editable install uses."""
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for folder in MAPPING:
        shutil.copytree(
            ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = out.glob("soulacy-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def expected_files() -> set[str]:
    found = set()
    for folder, target in MAPPING.items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".typed") and "__pycache__" not in path.parts:
                found.add(f"{target}/{path.relative_to(ROOT / folder).as_posix()}")
    return found


def test_every_source_file_of_every_package_folder_is_in_the_wheel(wheel_files: set[str]) -> None:
    missing = sorted(expected_files() - wheel_files)
    assert not missing, f"not in the wheel (add the package to pyproject.toml): {missing}"


def test_the_wheel_is_typed_and_has_no_top_level_init(wheel_files: set[str]) -> None:
    for target in MAPPING.values():
        assert f"{target}/py.typed" in wheel_files
    assert "soulacy/__init__.py" not in wheel_files  # soulacy is a namespace package


def test_the_wheel_declares_the_launcher_and_no_pytest_plugin(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(name).decode()
    assert "soulacy = soulacy.kernel.cli:main" in text
    # The testing plugin is opt-in (pytest_plugins = ["soulacy.testing.pytest_plugin"], decision
    # 0028): installing Soulacy adds no fixture to other projects' test runs.
    assert "pytest11" not in text


def test_the_test_dependencies_include_what_building_a_wheel_needs() -> None:
    """A stock venv (setuptools 65, no wheel) must pass the suite: the wheel tests build
    without isolation, so the build backend's requirements are test dependencies."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    test_extra = {
        Requirement(r).name: Requirement(r)
        for r in project["project"]["optional-dependencies"]["test"]
    }
    for needed in map(Requirement, project["build-system"]["requires"]):
        assert needed.name in test_extra, (
            f"{needed.name} is needed to build but not a test dependency"
        )
        assert str(needed.specifier) in str(test_extra[needed.name].specifier), (
            f"the test extra asks {test_extra[needed.name]}, building needs {needed}"
        )


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 dev.py demo" in readme
    assert "python3 dev.py test" in readme
    commands = [
        line.strip() for line in ci.splitlines() if line.strip() and not line.startswith("#")
    ]
    assert "python3 dev.py test" in commands
    installs = [c for c in commands if re.search(r"\bpip\b|apt-get", c)]
    assert not installs, f"CI installs nothing the README does not: {installs}"
