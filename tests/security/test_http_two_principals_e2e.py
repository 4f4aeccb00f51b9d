"""Two principals over a real ``soulacy serve`` process on loopback, keys from the environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from _support.http_server import sse_events

from soulacy.testing import Workspace

A, B = "secret-key-of-a-0123456789", "secret-key-of-b-9876543210"


@contextmanager
def soulacy_serve(workspace: Workspace, env: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """``soulacy serve`` in a subprocess; yields its URL and (after exit) its stderr lines."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path), "serve"],
        env={**clean, **env},
        stdout=subprocess.PIPE,
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
    try:
        yield url, lines
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
        lines.extend(err.splitlines())


def test_two_principals_each_see_only_their_own_conversation(workspace: Workspace) -> None:
    workspace.write_config("server:\n  port: 0\n")
    workspace.scripted_agent("echo", [{"text": "noted"}], repeat=True)
    env = {"SOULACY_SERVER__API_KEYS__ALPHA": A, "SOULACY_SERVER__API_KEYS__BETA": B}
    with soulacy_serve(workspace, env) as (url, stderr):
        base = url + "/api/v1"
        with (
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {A}"}) as a,
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {B}"}) as b,
        ):
            ran_a = a.post(
                "/chat", json={"agent_id": "echo", "text": "password hunter2", "session_id": "s"}
            )
            assert ran_a.status_code == 200, ran_a.text
            token = ran_a.headers["soulacy-events-token"]
            streamed = b.post(
                "/chat/stream",
                json={"agent_id": "echo", "text": "what did A say?", "session_id": "s"},
            )
            assert streamed.status_code == 200
            run_a, run_b = ran_a.json()["run_id"], sse_events(streamed.text)[0]["data"]["run_id"]
            assert "hunter2" not in streamed.text  # B's run on A's session id
            # Each sees its own history, runs and events, and nothing of the other's.
            history_a = a.get("/history/s").json()["entries"]
            history_b = b.get("/history/s").json()["entries"]
            assert [e["content"] for e in history_a] == ["password hunter2", "noted"]
            assert [e["content"] for e in history_b] == ["what did A say?", "noted"]
            for client, own, other in ((a, run_a, run_b), (b, run_b, run_a)):
                assert client.get(f"/runs/{own}").status_code == 200
                assert client.get(f"/runs/{own}/events").status_code == 200
                for path in (f"/runs/{other}", f"/runs/{other}/events"):
                    assert client.get(path).status_code == 404
                cancel = client.post("/chat/cancel", json={"run_id": other})
                assert cancel.status_code == 404
                assert client.post(f"/runs/{other}/token").status_code == 404
                assert client.get("/config").status_code == 403  # no admins configured
            # A's token reads A's run, and only with the run it was issued for.
            with httpx.Client(base_url=base) as browser:
                assert browser.get(f"/runs/{run_a}/events", params={"token": token}).is_success
                other = browser.get(f"/runs/{run_b}/events", params={"token": token})
                assert other.status_code == 401
    text = "".join(stderr)
    assert "Traceback" not in text
    for secret in (A, B, token):
        assert secret not in text  # neither keys nor tokens reach the logs
