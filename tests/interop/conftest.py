"""The interop suite: the OpenAI-compatible provider against model servers it did not write.

Opt-in, because it starts real servers (and may build llama.cpp's, about 13 minutes on two
cores, once): it runs when it is named on the command line (``python -m pytest tests/interop``,
or a file or test in it) or when ``SOULACY_INTEROP=1``; the default ``python -m pytest``, which
CI runs, deselects it. What it needs is the ``interop`` extra (``pip install -e '.[interop]'``);
a part whose server cannot be had is skipped with the reason, never faked.

- ``SOULACY_LLAMA_SERVER``: a ``llama-server`` binary to use instead of the cached build
  (``~/.cache/soulacy-interop``, or ``SOULACY_INTEROP_CACHE``).
- ``SOULACY_INTEROP_BUILD=0``: skip the llama.cpp tests rather than build the server.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent.resolve()


def _named_here(config: pytest.Config) -> bool:
    """Was this folder, or something in it, named on the command line?"""
    for arg in config.invocation_params.args:
        if arg.startswith("-"):
            continue
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SOULACY_INTEROP") == "1" or _named_here(config):
        return
    ours = [item for item in items if item.get_closest_marker("interop")]
    if ours:
        config.hook.pytest_deselected(items=ours)
        left = set(map(id, ours))
        items[:] = [item for item in items if id(item) not in left]
