"""The commands that read the store: they need a workspace, never write, work on a read-only
copy, work with whichever store answers the storage hooks, and name it."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.testing import Workspace

NOT_A_WORKSPACE = (
    "is not a Soulacy workspace: a workspace is a folder with config.yaml and/or"
    " agents/ID/SOUL.yaml"
)

Files = dict[str, tuple[int, int, str]]


def files(folder: Path) -> Files:
    """Every file below ``folder``: size, modification time and content hash."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            info = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path.relative_to(folder))] = (info.st_size, info.st_mtime_ns, digest)
    return out


# Root ignores file modes through these capabilities (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
# CAP_FOWNER); a child that drops them from its bounding set (prctl PR_CAPBSET_DROP) loses them
# at exec, and then a file or folder without write permission cannot be written, even by root.
PR_CAPBSET_DROP = 24
FILE_MODE_OVERRIDES = (1, 2, 3)


def _without_file_mode_overrides() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in FILE_MODE_OVERRIDES:
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def can_enforce_read_only() -> bool:
    if os.geteuid() != 0:
        return True
    probe = subprocess.run(
        [sys.executable, "-c", "pass"], preexec_fn=_without_file_mode_overrides, check=False
    )
    return probe.returncode == 0


def soulacy(
    args: list[str], cwd: Path, *, reader: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real launcher; ``reader=True`` runs it so that file modes bind it, root or not."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    clean.update(env or {})
    clean["PYTHONDONTWRITEBYTECODE"] = "1"
    preexec = _without_file_mode_overrides if reader and os.geteuid() == 0 else None
    return subprocess.run(
        [sys.executable, "-m", "soulacy.cli", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=preexec,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo workspace with one stored run, in session 's1'."""
    folder = tmp_path_factory.mktemp("demo") / "ws"
    made = soulacy(["demo", "--keep", str(folder)], folder.parent)
    assert made.returncode == 0, made.stderr
    ran = soulacy(["run", "demo", "again", "--session", "s1", "--run-id", "R1"], folder)
    assert ran.returncode == 0, ran.stderr
    return folder


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """Where read-only copies go; made writable again afterwards, for the clean-up."""
    if not can_enforce_read_only():
        pytest.skip("cannot run a process that file modes bind")
    folder = tmp_path / "ro"
    folder.mkdir()
    yield folder
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def read_only_copy(source: Path, dest: Path, extra: Callable[[Path], None] | None = None) -> Path:
    """``cp -r source dest && chmod -R a-w dest``."""
    shutil.copytree(source, dest)
    if extra:
        extra(dest)
    for path in sorted([dest, *dest.rglob("*")], reverse=True):  # files before their folder
        path.chmod(path.stat().st_mode & ~0o222)
    return dest


# -- a workspace is needed; nothing is created -------------------------------------------------


@pytest.mark.parametrize("command", [["runs"], ["history", "s1"], ["runs", "show", "R1"]])
def test_a_read_command_outside_a_workspace_says_what_a_workspace_is(
    tmp_path: Path, command: list[str]
) -> None:
    result = soulacy(command, tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(f"soulacy: error: {tmp_path} {NOT_A_WORKSPACE}")
    assert result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # no soulacy.db


def test_read_commands_in_a_new_workspace_create_no_database(workspace: Workspace) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    before = files(workspace.path)
    result = soulacy(["runs"], workspace.path)
    assert (result.returncode, result.stderr) == (0, "")
    db = workspace.path / "soulacy.db"
    assert result.stdout == f"no runs (store: sqlite_store at {db})\n"
    result = soulacy(["history", "s1"], workspace.path)
    assert result.stdout == f"no stored messages in session 's1' (store: sqlite_store at {db})\n"
    result = soulacy(["runs", "show", "nope"], workspace.path)
    assert result.returncode == 2
    assert result.stderr == f"soulacy: error: no run 'nope' in the store (sqlite_store at {db})\n"
    assert files(workspace.path) == before


def test_read_commands_change_no_file_of_a_workspace(demo: Path) -> None:
    before = files(demo)
    for command in (["history", "s1"], ["runs"], ["runs", "show", "R1"], ["runs", "--json"]):
        result = soulacy(command, demo)
        assert result.returncode == 0, result.stderr
    assert files(demo) == before  # no -wal, no -shm, no journal, not one byte


# -- a read-only copy ---------------------------------------------------------------------------


def write_into_the_wal(db: Path) -> sqlite3.Connection:
    """Leave a committed run in the -wal file only (a copy taken while a writer is open)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute(
        "INSERT INTO runs (run_id, agent_id, session_id, status, started_at)"
        " VALUES ('WALONLY', 'demo', 's9', 'completed', ?)",
        (time.time(),),
    )
    return conn


@pytest.mark.parametrize("copied", ["closed", "open with -shm", "open without -shm"])
def test_history_and_runs_work_on_a_read_only_copy(
    demo: Path, read_only_dir: Path, copied: str
) -> None:
    """The copy's folder and files cannot be written by the reading process (as root too: it
    runs without the capabilities that override file modes), so SQLite cannot create -shm."""
    conn = write_into_the_wal(demo / "soulacy.db") if copied != "closed" else None
    try:

        def drop_shm(dest: Path) -> None:
            if copied == "open without -shm":
                (dest / "soulacy.db-shm").unlink()

        copy = read_only_copy(demo, read_only_dir / "ws", drop_shm)
    finally:
        if conn is not None:
            conn.execute("DELETE FROM runs WHERE run_id = 'WALONLY'")
            conn.close()
    assert (copy / "soulacy.db-wal").exists() == (copied != "closed")
    before = files(copy)
    history = soulacy(["history", "s1"], copy, reader=True)
    assert history.returncode == 0, history.stderr
    assert "     user: again" in history.stdout
    runs = soulacy(["runs"], copy, reader=True)
    assert runs.returncode == 0, runs.stderr
    assert "R1  demo  session s1  completed" in runs.stdout
    assert ("WALONLY" in runs.stdout) == (copied != "closed")  # the -wal was read too
    assert files(copy) == before


def test_a_write_on_a_read_only_copy_says_read_only(demo: Path, read_only_dir: Path) -> None:
    copy = read_only_copy(demo, read_only_dir / "ws")
    result = soulacy(["run", "demo", "hi", "--session", "s1"], copy, reader=True)
    assert result.returncode == 1
    assert "status: failed (storage_error)" in result.stdout
    assert "read-only" in result.stdout


# -- any store ------------------------------------------------------------------------------------

OTHER_STORE = """
from soulacy.kernel import hookimpl
from soulacy.kernel.store import HistoryEntry, RunRecord

RUN = RunRecord("SEEDED", "demo", "s1", status="completed", verification="unverified")
ENTRY = HistoryEntry(1, "demo", "s1", "SEEDED", "user", "from the other store", None, 0.0)


class OtherStore:
    def describe(self):
        return "a test double"

    async def history(self, session_id, agent_id=None, principal=None):
        return [ENTRY] if session_id == "s1" else []

    async def list_runs(self, limit=50, agent_id=None):
        return [RUN]

    async def get_run(self, run_id):
        return RUN if run_id == "SEEDED" else None

    async def get_proof(self, run_id):
        return None


@hookimpl
def soulacy_store(kernel):
    return OtherStore()
"""


@pytest.fixture
def other_store(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "otherstore.py").write_text(OTHER_STORE)
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}


def test_the_read_commands_work_with_another_store_and_name_it(
    workspace: Workspace, other_store: dict[str, str]
) -> None:
    workspace.scripted_agent("demo", [{"text": "hi"}])
    replaced = ["-p", "no:sqlite_store", "-p", "otherstore"]
    runs = soulacy([*replaced, "runs"], workspace.path, env=other_store)
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout.startswith("SEEDED  demo  session s1  completed")
    shown = soulacy([*replaced, "runs", "show", "SEEDED"], workspace.path, env=other_store)
    assert shown.returncode == 0, shown.stderr
    history = soulacy([*replaced, "history", "s1"], workspace.path, env=other_store)
    assert history.stdout == "     user: from the other store\n"
    missing = soulacy([*replaced, "runs", "show", "nosuch"], workspace.path, env=other_store)
    assert missing.returncode == 2
    assert missing.stderr == (
        "soulacy: error: no run 'nosuch' in the store (otherstore at a test double)\n"
    )
    assert not (workspace.path / "soulacy.db").exists()


def test_without_any_store_plugin_the_read_commands_say_nothing_is_kept(
    workspace: Workspace,
) -> None:
    workspace.scripted_agent("demo", [{"text": "hi"}])
    runs = soulacy(["-p", "no:sqlite_store", "runs"], workspace.path)
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout == (
        "no runs (store: memory: no loaded plugin provides a store, so nothing outlives a"
        " command)\n"
    )
    reconcile = soulacy(
        ["-p", "no:sqlite_store", "runs", "reconcile", "NOPE", "--failed"], workspace.path
    )
    assert reconcile.returncode == 2  # the workflows plugin's command, on the memory store
    assert "run 'NOPE' has no checkpoints" in reconcile.stderr


# -- storage errors in words --------------------------------------------------------------------


def sqlite_error(code: int, text: str) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(text)
    exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize(
    ("exc", "says"),
    [
        (sqlite_error(13, "database or disk is full"), "disk full"),
        (sqlite_error(8 | (6 << 8), "attempt to write a readonly database"), "read-only database"),
        (OSError(errno.ENOSPC, "No space left on device"), "disk full"),
        (OSError(errno.EROFS, "Read-only file system"), "read-only file system"),
    ],
)
def test_storage_errors_say_disk_full_and_read_only(
    tmp_path: Path, exc: BaseException, says: str
) -> None:
    error = SQLiteStore(tmp_path / "s.db")._error("record turn", exc)
    assert f"record turn failed: {says} (" in str(error)


def test_an_io_error_on_a_full_disk_says_disk_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite reports a full disk met at open (sizing -shm) as SQLITE_IOERR_SHMSIZE."""

    class Full:
        f_bavail, f_frsize = 0, 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Full())
    error = SQLiteStore(tmp_path / "s.db")._error("open", sqlite_error(4874, "disk I/O error"))
    assert "open failed: disk full (OperationalError: disk I/O error)" in str(error)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real, tiny and full file system (tmpfs; needs the right to mount, else skipped)."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    finally:
        os.close(fd)


def test_a_full_disk_is_reported_as_disk_full(workspace: Workspace, full_disk: Path) -> None:
    workspace.scripted_agent("a", [{"text": "hello"}])
    workspace.write_config(f"store:\n  path: {full_disk / 'soulacy.db'}\n")
    with pytest.raises(OSError, match="No space left on device"):
        fill(full_disk / "filler")
    result = soulacy(["run", "a", "hi"], workspace.path)
    assert result.returncode == 1
    assert "status: failed (storage_error)" in result.stdout
    assert "disk full" in result.stdout


CLOSING_PLUGIN = """
from pathlib import Path
from soulacy.kernel import hookimpl


@hookimpl
def soulacy_unconfigure(kernel):
    (kernel.config_file.parent / "closed.txt").write_text("closed")
    if (kernel.config_file.parent / "fail-to-close").exists():
        raise RuntimeError("cannot close")
"""


def test_soulacy_run_closes_its_kernel_so_plugins_flush_and_close(
    workspace: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "closing.py").write_text(CLOSING_PLUGIN)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    workspace.scripted_agent("a", [{"text": "hi"}])
    ran = soulacy(["-p", "closing", "run", "a", "go"], workspace.path, env=env)
    assert ran.returncode == 0, ran.stderr
    assert (workspace.path / "closed.txt").read_text() == "closed"
    # A plugin failing to close is a warning: the run's outcome and exit code stand.
    (workspace.path / "fail-to-close").write_text("")
    failed = soulacy(["-p", "closing", "run", "a", "go"], workspace.path, env=env)
    assert failed.returncode == 0, failed.stderr
    assert "closing the kernel after the run failed: RuntimeError: cannot close" in failed.stderr
    assert "Traceback" not in failed.stderr
