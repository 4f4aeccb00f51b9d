"""Secrets in a tool call's arguments (issue 42, "redaction from one list"): the tool gets the
real values; the ``tool.call`` event, the stored history and the proof keep them masked, by
the same word list as everything else (pat, bearer, jwt, pwd, passphrase …; never ids such as
``session_id``), for whichever principal's run it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import trio
from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel, Tool, redact_arguments
from soulacy.testing import Workspace, throwaway_plugin

SECRETS = {
    "api_key": "sk-abcdef1234567890",
    "github_pat": "ghp_abcdefgh12345678",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.e30.sig",
    "pwd": "hunter22hunter22",
    "note": "send it with Bearer abcdefgh12345678",
}
VISIBLE = {"path": "/srv/report.txt", "session_id": "s-42", "max_tokens": 5}
ARGUMENTS = {**SECRETS, **VISIBLE}


def test_the_one_list_masks_secret_words_and_keeps_ids_and_counts() -> None:
    shown = redact_arguments(ARGUMENTS)
    assert {k: shown[k] for k in VISIBLE} == VISIBLE
    assert {k: shown[k] for k in ("api_key", "github_pat", "jwt", "pwd")} == dict.fromkeys(
        ("api_key", "github_pat", "jwt", "pwd"), "***"
    )
    assert shown["note"] == "send it with Bearer ***"


async def test_secrets_in_arguments_reach_the_tool_and_nowhere_else(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    workspace.scripted_agent(
        "a",
        [{"tool": "upload", "arguments": ARGUMENTS, "id": "c1"}, {"text": "done"}],
        tools=["upload"],
    )
    received: list[dict[str, Any]] = []

    def upload(**kwargs: Any) -> str:
        """Uploads a file."""
        received.append(kwargs)
        return "uploaded"

    tool = Tool(
        "upload",
        "Uploads a file.",
        {"type": "object", "properties": {k: {} for k in ARGUMENTS}},
        upload,
    )
    plugin = throwaway_plugin("uploader", soulacy_tools=lambda: [tool])
    async with (
        open_server(make_kernel, extra_plugins=[plugin]) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        events = server.kernel.events.subscribe(buffer=float("inf"))
        body = {"agent_id": "a", "text": "go", "session_id": "s1", "run_id": "R1"}
        answer = await alice.post("/chat", json=body)
        assert answer.status_code == 200, answer.text
        assert received == [ARGUMENTS]  # the tool itself got the real values
        seen = []
        while True:
            try:
                seen.append(events.receive_nowait())
            except trio.WouldBlock:
                break
        (call,) = [e.data for e in seen if e.type == "tool.call"]
        history = (await alice.get("/history/s1")).json()["entries"]
        run = (await alice.get("/runs/R1")).json()
        stored = json.dumps([history, call, run])
        for secret in SECRETS.values():
            assert secret.split()[-1] not in stored  # masked in the event, history and run
        assert VISIBLE["path"] in stored
        assert VISIBLE["session_id"] in stored
        proof = await server.kernel.store().get_proof("R1")
        assert proof is not None
        for secret in SECRETS.values():
            assert secret.split()[-1] not in proof.body
        # bob sees nothing of alice's run, masked or not
        assert (await bob.get("/runs/R1")).status_code == 404
        theirs = await bob.get("/history/s1")
        assert theirs.status_code == 404 or theirs.json().get("entries") == []
