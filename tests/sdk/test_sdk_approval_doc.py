"""docs/sdk.md's approval example (issue 38, observation 12): against an agent whose tool call
waits for approval, it reads the `tool.approval` event, confirms the call by the event's `id`
and `arguments_sha256`, and the run completes, printing what the page says."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from sdk_support import CONFIG, LiveServer, in_thread, tools_plugin

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace

DOC = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


def _example() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Approving tool calls") :]
    match = re.search(r"^```python\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert match, "docs/sdk.md's approval section has no Python example"
    return match.group(1)


async def test_the_approval_example_confirms_the_call_it_was_shown(
    make_kernel: Callable[..., Kernel],
    workspace: Workspace,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    workspace.write_config(CONFIG)
    workspace.scripted_agent(
        "assistant",
        [{"tool": "echo", "arguments": {"text": "x"}}, {"text": "tidied"}],
        tools=["echo"],
        confirm_tools=["echo"],
    )
    kernel = make_kernel(extra_plugins=[tools_plugin()])
    async with open_kernel(kernel=kernel) as running:
        server = LiveServer(running.started["http"][0], running, workspace)
        monkeypatch.setenv("SOULACY_URL", server.url)
        monkeypatch.setenv("SOULACY_API_KEY", "key-a")
        compiled = compile(_example(), str(DOC), "exec")
        await in_thread(lambda: exec(compiled, {"__name__": "__docs__"}))
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "approve? echo {'text': 'x'} [\"confirm_tools lists 'echo'\"]",
        "echo approved by alice",
        "status: completed",
    ]
    page = DOC.read_text(encoding="utf-8")
    for line in printed:
        assert f"`{line}`" in page
