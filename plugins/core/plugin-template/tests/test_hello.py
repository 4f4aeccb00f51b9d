"""The hello plugin is discovered through its entry point and does its job."""

from __future__ import annotations

from collections.abc import Callable

from soulacy.kernel import Event, Kernel
from soulacy.testing import Workspace


def test_the_plugin_is_discovered_through_its_entry_point(
    make_kernel: Callable[..., Kernel],
) -> None:
    kernel = make_kernel(autoload=True)
    info = next(p for p in kernel.pm.describe() if p["name"] == "hello")
    assert info["origin"] == "entry point"
    assert info["distribution"] == "soulacy-hello"
    assert "soulacy_tools" in info["hooks"]


async def test_an_agent_greets_with_the_configured_greeting(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("hello:\n  greeting: Good morning\n")
    workspace.scripted_agent("a", [{"tool": "greet", "arguments": {"name": "Ada"}},
                                   {"text": "done"}], tools=["greet"])
    kernel = make_kernel(autoload=True, plugins=["no:sqlite_store"])
    results: list[Event] = []
    receive = kernel.events.subscribe(buffer=100)
    result = await kernel.run("a", "greet Ada")
    while True:
        try:
            results.append(receive.receive_nowait())
        except Exception:
            break
    assert result.status == "completed"
    (tool_result,) = [e.data for e in results if e.type == "tool.result"]
    assert tool_result["preview"] == "Good morning, Ada!"
