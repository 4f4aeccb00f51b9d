"""schemathesis, every check, against the served OpenAPI document of a live loopback server.

Bounded to about a minute (examples per operation and a time budget). The run has keys on and
an admin's token, so every operation is reachable; ``ignored_auth`` checks that leaving the
token out is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from _support.http_server import KEYS, keyed_config, serve_in_thread

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

# The schemathesis command runs in a process of its own for a minute: not in the quick loop.
pytestmark = pytest.mark.processes
# schemathesis's command, under a higher recursion limit: hypothesis describes its nested
# strategies by parsing their source, and CPython 3.11's parser, near the limit, fails with
# "SystemError: AST constructor recursion depth mismatch" (a crash of the tool, seen in CI,
# not a finding about the server).
COMMAND = (
    sys.executable,
    "-c",
    "import sys; sys.setrecursionlimit(20_000); sys.argv[0] = 'schemathesis';"
    " from schemathesis.cli import schemathesis; sys.exit(schemathesis())",
)
# Where JSON Schema cannot say everything the server checks, a schema-valid body may still be a
# 422 naming the field: PATCH /config takes a change of any shape, but the configuration it
# yields must validate; a chat's `overrides` are bounded beyond what a schema expresses (a
# duration of at most 100 years; an integer written `5.0` is a number, not an integer, to the
# strict converter). An agent's `tools` entries over HTTP must name a registered tool or a
# file in the agent's folder (the trust root, decision 0058): which names and files exist is not
# the schema's to say either. Every other expectation is schemathesis's default.
CONFIG = """
[[operations]]
include-path = ["/config", "/chat", "/chat/stream"]
include-method = ["PATCH", "POST"]
[operations.checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429"]

[[operations]]
include-path-regex = "^/agents/"
include-method = ["PATCH", "PUT"]
[operations.checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429"]

# Half the ids are ones that exist, so that operations reach past their 404s.
[dictionaries.agents]
values = ["echo", "tooly"]
[dictionaries.runs]
values = ["st-run"]
[dictionaries.sessions]
values = ["st-session"]

[parameters]
"path.agent_id" = { dictionary = "agents", probability = 0.5 }
"body.agent_id" = { dictionary = "agents", probability = 0.7 }
"path.run_id" = { dictionary = "runs", probability = 0.5 }
"body.run_id" = { dictionary = "runs", probability = 0.3 }
"path.session_id" = { dictionary = "sessions", probability = 0.5 }
"""


def test_schemathesis_with_every_check_finds_no_server_error_and_no_schema_violation(
    workspace: Workspace, make_kernel: Callable[..., Kernel], tmp_path: Path
) -> None:
    workspace.write_config(keyed_config())
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    workspace.scripted_agent(
        "tooly", [{"tool": "missing", "arguments": {}}, {"text": "done"}], repeat=True
    )
    report = tmp_path / "report.json"
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    with serve_in_thread(make_kernel) as url:
        root = {"Authorization": f"Bearer {KEYS['root']}"}
        seeded = httpx.post(
            f"{url}/api/v1/chat",
            json={"agent_id": "echo", "text": "x", "run_id": "st-run", "session_id": "st-session"},
            headers=root,
            timeout=30,
        )
        assert seeded.status_code == 200, seeded.text
        started = time.monotonic()
        done = subprocess.run(
            [
                *COMMAND,
                "--config-file",
                str(tmp_path / "schemathesis.toml"),
                "run",
                f"{url}/api/v1/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                "25",
                "--max-time",
                "60",
                "--seed",
                "1",
                "--workers",
                "2",
                "--generation-database",
                "none",
                "--request-timeout",
                "20",
                "--header",
                f"Authorization: Bearer {KEYS['root']}",
                "--report",
                "json",
                "--report-json-path",
                str(report),
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,
            env={**os.environ, "SCHEMATHESIS_TELEMETRY": "false"},
            check=False,
        )
        elapsed = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    summary = json.loads(report.read_text())
    assert summary["failures"] == [], output[-6000:]
    assert summary["errors"] == [], output[-6000:]
    assert summary["operations"]["tested"] == summary["operations"]["total"] >= 12
    cases = summary["test_cases"]
    assert cases["generated"] >= 500, cases
    assert cases["with_failures"] == 0, cases
    print(f"schemathesis: {cases['generated']} cases in {elapsed:.1f} s;", summary["warnings"])
