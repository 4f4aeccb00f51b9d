"""The distribution: every package folder and the plugin template in the wheel and the sdist,
metadata a package index can show, a wheel that works in a venv of its own, an install from git,
and an install page that says what works."""

from __future__ import annotations

import ast
import email.parser
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tarfile
import time
import tomllib
import zipfile
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import attrs
import httpx
import pytest
from _support.serve_nodes import free_port

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {
    "kernel": "soulacy/kernel",
    "cli": "soulacy/cli",
    "plugins": "soulacy/plugins",
    "contrib": "soulacy/contrib",
    "sdk": "soulacy/sdk",
    "testing": "soulacy/testing",
}
TEMPLATE = ROOT / "plugins" / "core" / "plugin-template"
INSTALL_PAGE = ROOT / "docs" / "install.md"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def copy_sources(dest: Path) -> Path:
    """What a clone holds that a build reads, without bytecode or an editable install's
    egg-info."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, dest / name)
    for folder in MAPPING:
        shutil.copytree(
            ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
    return dest


@attrs.frozen
class Build:
    wheel: Path
    sdist: Path
    log: str  # the build's standard output and error


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The sdist, and the wheel built from it, from a copy of the sources: a build writes
    ``build/`` and ``*.egg-info`` beside them, which two parallel workers (each with this
    module's fixture) would race on, and which the checkout's own editable install uses."""
    out = tmp_path_factory.mktemp("dist")
    source = copy_sources(tmp_path_factory.mktemp("source"))
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("soulacy-*.whl")
    (sdist,) = out.glob("soulacy-*.tar.gz")
    return Build(wheel, sdist, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def wheel(build: Build) -> Path:
    return build.wheel


@pytest.fixture(scope="module")
def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(zf.read(name).decode())


def expected_files() -> set[str]:
    found = set()
    for folder, target in MAPPING.items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".typed") and "__pycache__" not in path.parts:
                found.add(f"{target}/{path.relative_to(ROOT / folder).as_posix()}")
    return found


def template_files() -> set[str]:
    """The template's files, relative to ``plugins/``."""
    return {
        path.relative_to(ROOT / "plugins").as_posix()
        for path in TEMPLATE.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and not any(part.endswith(".egg-info") for part in path.parts)
    }


def test_every_source_file_of_every_package_folder_is_in_the_wheel(wheel_files: set[str]) -> None:
    missing = sorted(expected_files() - wheel_files)
    assert not missing, f"not in the wheel (add the package to pyproject.toml): {missing}"


def test_the_wheel_is_typed_and_has_no_top_level_init(wheel_files: set[str]) -> None:
    for target in MAPPING.values():
        assert f"{target}/py.typed" in wheel_files
    assert "soulacy/__init__.py" not in wheel_files  # soulacy is a namespace package


def test_the_wheel_and_the_sdist_carry_the_whole_plugin_template(
    build: Build, wheel_files: set[str]
) -> None:
    expected = template_files()
    assert "core/plugin-template/rename.py" in expected
    missing = {f"soulacy/plugins/{f}" for f in expected} - wheel_files
    assert not missing, f"template files not in the wheel (see package-data): {sorted(missing)}"
    with tarfile.open(build.sdist) as tf:
        in_sdist = {name.split("/", 1)[1] for name in tf.getnames() if "/" in name}
    missing = {f"plugins/{f}" for f in expected} - in_sdist
    assert not missing, f"template files not in the sdist: {sorted(missing)}"
    compiled = sorted(n for n in wheel_files if n.endswith(".pyc") or "__pycache__" in n)
    assert not compiled, f"expected no bytecode in the wheel, got {compiled}"


def test_the_metadata_names_the_license_by_its_spdx_expression(
    wheel: Path, wheel_files: set[str]
) -> None:
    meta = metadata(wheel)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert "License" not in meta, "the legacy License field is replaced by License-Expression"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel_files)


def test_the_metadata_links_the_source_the_docs_the_issues_and_the_changelog(
    wheel: Path,
) -> None:
    urls = dict(entry.split(", ", 1) for entry in metadata(wheel).get_all("Project-URL") or [])
    assert {"Source", "Documentation", "Issues", "Changelog"} <= urls.keys(), urls
    assert urls["Issues"] == urls["Source"] + "/issues"
    for label in ("Documentation", "Changelog"):
        prefix = urls["Source"] + "/blob/main/"
        assert urls[label].startswith(prefix), f"{label}: {urls[label]} is not in the repository"
        assert (ROOT / urls[label].removeprefix(prefix)).is_file(), f"{label}: no such file"


def test_the_build_warns_of_nothing_deprecated(build: Build) -> None:
    """setuptools warned that the ``project.license`` table must go by 2027-02-18."""
    lines = [line for line in build.log.splitlines() if re.search("deprecat", line, re.I)]
    assert not lines, f"expected no deprecation warning from the build, got {lines}"
    assert "project.license" not in build.log


def test_the_wheel_declares_the_launcher_and_no_pytest_plugin(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(name).decode()
    assert "soulacy = soulacy.cli:main" in text
    # The testing plugin is opt-in (pytest_plugins = ["soulacy.testing.pytest_plugin"], decision
    # 0028): installing Soulacy adds no fixture to other projects' test runs.
    assert "pytest11" not in text


def test_the_test_dependencies_include_what_building_a_wheel_needs() -> None:
    """A stock venv (setuptools 65, no wheel) must pass the suite: the wheel tests build
    without isolation, so the build backend's requirements are test dependencies."""
    from packaging.requirements import Requirement

    test_extra = {
        Requirement(r).name: Requirement(r)
        for r in PROJECT["project"]["optional-dependencies"]["test"]
    }
    for needed in map(Requirement, PROJECT["build-system"]["requires"]):
        assert needed.name in test_extra, (
            f"{needed.name} is needed to build but not a test dependency"
        )
        assert str(needed.specifier) in str(test_extra[needed.name].specifier), (
            f"the test extra asks {test_extra[needed.name]}, building needs {needed}"
        )


def test_the_build_requirement_supports_the_license_expression() -> None:
    """PEP 639's ``license = "SPDX"`` and ``license-files`` need setuptools 77."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    (setuptools,) = [
        r for r in map(Requirement, PROJECT["build-system"]["requires"]) if r.name == "setuptools"
    ]
    assert not setuptools.specifier.contains(Version("76.1")), setuptools
    assert isinstance(PROJECT["project"]["license"], str)


# -- the SDK: in the one distribution, loading httpx and sniffio only -------------------------


SDK_NEEDS = {"httpx", "sniffio"}  # sniffio: which event loop runs the async client


def _imports(node: ast.AST, lazy: bool = False) -> Iterator[tuple[int, str, bool]]:
    """(line, module, imported inside a function) for every absolute import under ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            yield from ((child.lineno, alias.name, lazy) for alias in child.names)
        elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
            yield child.lineno, child.module, lazy
        inside = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _imports(child, inside)


def test_the_sdk_imports_only_the_standard_library_httpx_and_sniffio() -> None:
    """``soulacy`` without extras is the SDK's install (docs/install.md): what an application
    loads is the SDK, httpx and sniffio (and Trio only when it runs under Trio). Checked in the
    source, imports inside functions included, so that the SDK can become a distribution of its
    own with two dependencies."""
    foreign = []
    for path in sorted((ROOT / "sdk").glob("*.py")):
        for line, name, lazy in _imports(ast.parse(path.read_text(), str(path))):
            top = name.split(".")[0]
            allowed = sys.stdlib_module_names | SDK_NEEDS | ({"trio"} if lazy else set())
            if top not in allowed and not name.startswith("soulacy.sdk"):
                foreign.append(f"{path.name}:{line}: {name}")
    assert not foreign, f"expected the SDK to import only {sorted(SDK_NEEDS)}, got {foreign}"


def test_the_sdk_needs_are_dependencies_of_soulacy_itself() -> None:
    from packaging.requirements import Requirement

    names = {Requirement(r).name for r in PROJECT["project"]["dependencies"]}
    assert names >= SDK_NEEDS, f"the SDK needs {SDK_NEEDS - names}, which no extra-less install has"


# -- installing: a wheel in a venv of its own, git, the docs -------------------------------------


def _venv_with_the_wheel(wheel: Path, venv: Path) -> Path:
    """A venv holding the wheel, which then also sees this environment's packages as plain
    folders: Soulacy's dependencies without an index, but not this checkout's editable install
    (its .pth is not read). Returns the venv's Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    inner = venv / "bin" / "python"
    # Installed before the outer packages are visible: pip sees an empty venv, and never the
    # editable install of the environment running this test.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(inner), "install", "--quiet", "--no-deps",
         "--no-index", str(wheel)],
        check=True,
        timeout=300,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    purelib = subprocess.run(
        [str(inner), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], *site.getsitepackages()])
    Path(purelib, "outer-packages.pth").write_text("".join(f"{path}\n" for path in outer))
    return inner


def _environment(tmp: Path, venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    env.update(
        VIRTUAL_ENV=str(venv),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(tmp),
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env


@pytest.mark.processes  # a venv, pip, and soulacy commands in processes of their own
def test_an_installed_wheel_starts_plugins_runs_the_demo_and_serves(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    inner = _venv_with_the_wheel(wheel, venv)
    env = _environment(tmp_path, venv)
    soulacy = str(venv / "bin" / "soulacy")
    work = tmp_path / "work"
    work.mkdir()

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
        return done

    where = run(
        str(inner), "-c", "import soulacy.plugins.core as m, soulacy.sdk; print(m.__file__)"
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), (
        f"expected Soulacy imported from the wheel in {venv}, got {where.stdout}"
    )

    run(soulacy, "plugin", "new", "acme")
    project = work / "soulacy-acme"
    assert (project / "src" / "soulacy_acme" / "__init__.py").is_file()
    assert 'acme = "soulacy_acme"' in (project / "pyproject.toml").read_text()
    assert (project / "tests" / "test_acme.py").is_file()
    assert not (project / "rename.py").exists()

    demo = run(soulacy, "demo")
    assert "status: completed" in demo.stdout, demo.stdout

    # docs/install.md: where Soulacy is installed, pip adds an extra without asking an index
    # for Soulacy (here no index at all; the extra's packages are this environment's).
    extra = run(str(inner), "-m", "pip", "install", "soulacy[postgres]")
    assert "already satisfied: soulacy" in extra.stdout, extra.stdout

    port = free_port()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    server = subprocess.Popen(
        [soulacy, "--workspace", str(workspace), "serve", "--port", str(port)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"serve exited: {server.communicate()[1]}"
            assert time.monotonic() < deadline, "serve did not answer /api/v1/health in 60 s"
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2)
                portal = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert health.json() == {"status": "ok"}
        assert portal.status_code == 200, portal.text
        assert "<html" in portal.text.lower(), "expected the portal's page at /"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            _, stderr = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            _, stderr = server.communicate()
    assert server.returncode == 0, stderr


@pytest.mark.processes  # git and pip in processes of their own
def test_pip_builds_soulacy_from_a_git_repository(tmp_path: Path) -> None:
    """The form docs/install.md gives for a local clone; ``git+https://`` is the same path in
    pip with another transport. Without build isolation: this environment has the backend."""
    repo = copy_sources(tmp_path / "repo")
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    for command in (["init", "--quiet"], ["add", "--all"], ["commit", "--quiet", "-m", "x"]):
        subprocess.run([*git, *command], cwd=repo, env=env, check=True)
    url = f"git+file://localhost{repo}"
    assert "git+file://localhost/" in INSTALL_PAGE.read_text()
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(out), f"soulacy[postgres] @ {url}"],
        env={**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("soulacy-*.whl")
    with zipfile.ZipFile(built) as zf:
        assert "soulacy/plugins/core/plugin-template/rename.py" in zf.namelist()


def test_the_install_page_names_the_wheel_a_build_makes(wheel: Path) -> None:
    page = INSTALL_PAGE.read_text()
    assert wheel.name in page, f"docs/install.md should name {wheel.name} (the version changed?)"
    for command in ("pip wheel --no-deps -w dist", "soulacy plugin new", "-m build"):
        assert command in page, f"expected docs/install.md to give `{command}`"


def test_every_soulacy_extra_the_docs_name_exists_and_its_page_links_the_install_page() -> None:
    """Soulacy is on no package index: a page that says ``pip install 'soulacy[x]'`` says where
    it comes from."""
    extras = PROJECT["project"]["optional-dependencies"].keys()
    problems = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        for match in re.finditer(r"soulacy\[([\w,-]+)\]", text):
            unknown = set(match[1].split(",")) - extras
            if unknown:
                problems.append(f"{page.name}: soulacy[{match[1]}] names no extra {unknown}")
        mentioned = re.search(r"pip install '?soulacy\[", text) and page != INSTALL_PAGE
        if mentioned and "install.md" not in text:
            problems.append(f"{page.name}: `pip install 'soulacy[…]'` without install.md")
    assert not problems, problems


def test_the_repository_address_is_the_one_in_the_metadata() -> None:
    source = PROJECT["project"]["urls"]["Source"]
    pages = [INSTALL_PAGE, ROOT / "README.md", TEMPLATE / "README.md"]
    for page in pages:
        for url in re.findall(r"https://github\.com/soulacy/[\w-]+", page.read_text()):
            assert url == source, f"{page}: {url}, but pyproject.toml says {source}"
    assert source in INSTALL_PAGE.read_text()


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
