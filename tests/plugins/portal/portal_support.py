"""Helpers of the portal's tests: keys for three principals (root is the only admin), a
config.yaml with every advanced value set and commented, agents on the scripted model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _support.http_server import KEYS

from soulacy.testing import Workspace

# Every advanced value set, with comments: a basic edit must leave all of it byte-for-byte.
ADVANCED_CONFIG = """\
# The team's workspace: every limit here was chosen on purpose.
llm:
  default:
    provider: scripted   # the workspace provider
  providers:
    local:
      type: scripted
      context_window: 8192      # what the box can take
      max_output_tokens: 2048
  studio:
    max_build_tokens: 50000     # Studio build allowances
    max_build_cost_usd: 2.5
    max_build_attempts: 12
    max_build_elapsed: 30m
runtime:
  default_max_turns: 300        # generous
  max_turns_ceiling: 1000
  default_budget: {max_tokens: 400000, max_llm_calls: 90}
  max_budget:
    max_tokens: 2000000
    max_llm_calls: 500
  timeouts:
    tool: 90s
    llm: 4m
    step: 8m
    run: 12h
    http: 12h1m
  no_progress_limit: 25
costs:
  default_max_output_tokens: 8000
  max_output_tokens_ceiling: 32000
  max_run_cost_usd: 3.0         # cost policy
  max_daily_cost_usd: 40.0
  pricing:                      # price metadata
    - {provider: local, model: "*", input_per_mtok: 0.5, output_per_mtok: 1.5}
rate_limit:
  tokens_per_hour: 5000000
compaction:
  keep_recent_exchanges: 3
progress:
  window: 40
search:                         # the original system's web search: kept, no effect
  provider: tavily
server:
  port: 0
  api_keys: {KEYS}
  admins: [root]
  events_per_run: 5000
"""


def keys_flow() -> str:
    return "{" + ", ".join(f"{p}: {k}" for p, k in KEYS.items()) + "}"


def advanced_config() -> str:
    return ADVANCED_CONFIG.replace("{KEYS}", keys_flow())


def add_agents(workspace: Workspace) -> None:
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    workspace.scripted_agent("slow", [{"text": "late", "sleep": 30}], repeat=True)


COUNT_PY = """
from pathlib import Path


def count(n: int) -> str:
    \"\"\"Count to n (each call noted in counted.txt).\"\"\"
    with (Path(__file__).parent / "counted.txt").open("a") as fh:
        fh.write(f"{n}\\n")
    return f"counted {n}"
"""


def add_counter(workspace: Workspace, agent_id: str = "counter") -> Path:
    """An agent that counts to two with two tool calls, then says so, under ``max_turns: 1``:
    a run of it ends incomplete (max_turns) after its first call, and a continuation with two
    more turns completes it (its script starts where the conversation left off). Returns the
    file each call of its tool is noted in."""
    steps = [
        {"tool": "count", "arguments": {"n": 1}, "id": "c1"},
        {"tool": "count", "arguments": {"n": 2}, "id": "c2"},
        {"text": "counted to two"},
    ]
    workspace.scripted_agent(agent_id, steps, tools=["tools.py:count"], max_turns=1)
    folder = workspace.path / "agents" / agent_id
    script = folder / "script.yaml"
    script.write_text(script.read_text() + "start: conversation\n")
    (folder / "tools.py").write_text(COUNT_PY)
    return folder / "counted.txt"


@contextmanager
def soulacy_serve(
    workspace: Path, env: Mapping[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A real ``soulacy serve`` process on 127.0.0.1 (config.yaml sets ``port: 0``); yields its
    URL and the process, and stops it with SIGTERM afterwards."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace), "serve"],
        env={**clean, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    url = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        found = re.search(r"Running on (http://127\.0\.0\.1:\d+)", line)
        url = found.group(1) if found else url
        if "soulacy: serving" in line:
            break
    assert url is not None, "".join(lines)
    drain = threading.Thread(target=proc.stderr.read, daemon=True)  # never block on a full pipe
    drain.start()
    try:
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        drain.join(10)
        proc.stderr.close()


def browser_page(browser: Any, key: str | None, width: int = 1280, height: int = 900) -> Any:
    """A page of a fresh browser context, with ``key`` given as the portal keeps it (None: no
    key, keyless loopback mode); ``page.errors`` collects page errors and console errors."""
    context = browser.new_context(viewport={"width": width, "height": height})
    if key:
        context.add_init_script(f"sessionStorage.setItem('soulacy-key', {json.dumps(key)})")
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.errors = errors
    return page


def page_errors(page: Any, allowed: tuple[str, ...] = ()) -> list[str]:
    return [e for e in page.errors if not any(a in e for a in allowed)]
