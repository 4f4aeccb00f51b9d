"""Every Python example of docs/sdk.md runs, against a live server (SOULACY_URL, SOULACY_API_KEY).

Each ```python block runs on its own, in a worker thread (the server runs on the test's Trio
loop; the examples block, or start their own event loop).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sdk_support import GREETING, LiveServer, in_thread

DOC = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


def examples() -> list[tuple[int, str]]:
    """(line, code) of each ```python block of the page."""
    text = DOC.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    ]


EXAMPLES = examples()


def test_the_page_has_examples_of_every_part() -> None:
    code = "\n".join(block for _, block in EXAMPLES)
    assert len(EXAMPLES) >= 10
    for call in ("chat(", "chat_response(", "stream(", "events(", "cancel(", "history("):
        assert call in code
    for call in ("continue_run(", "confirm("):
        assert call in code
    assert "AsyncClient" in code
    assert "asyncio.run" in code
    assert "trio.run" in code


@pytest.mark.parametrize(("line", "code"), EXAMPLES, ids=[f"line-{n}" for n, _ in EXAMPLES])
async def test_the_example_runs(
    server: LiveServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    line: int,
    code: str,
) -> None:
    monkeypatch.setenv("SOULACY_URL", server.url)
    monkeypatch.setenv("SOULACY_API_KEY", "key-a")
    compiled = compile(code, f"{DOC}:{line}", "exec")
    await in_thread(lambda: exec(compiled, {"__name__": "__docs__"}))
    printed = capsys.readouterr().out
    if "print(" in code:
        assert printed.strip()


OUTPUTS = {  # a line unique to one example -> what it prints, as the page says
    'reply = client.chat("assistant", "Hello!")': GREETING,
    'client.stream("researcher", "Survey the field.")': "status: cancelled",
    'Client(api_key="not-a-key")': "401 missing or invalid bearer token",
    "print(client.health())": "{'status': 'ok'}",
    "client.continue_run(response.run_id": "completed 2",
}


@pytest.mark.parametrize(("snippet", "output"), OUTPUTS.items(), ids=list(OUTPUTS.values()))
async def test_the_example_prints_what_the_page_says(
    server: LiveServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    snippet: str,
    output: str,
) -> None:
    [(line, code)] = [(n, c) for n, c in EXAMPLES if snippet in c]
    monkeypatch.setenv("SOULACY_URL", server.url)
    monkeypatch.setenv("SOULACY_API_KEY", "key-a")
    compiled = compile(code, f"{DOC}:{line}", "exec")
    await in_thread(lambda: exec(compiled, {"__name__": "__docs__"}))
    assert output in capsys.readouterr().out
