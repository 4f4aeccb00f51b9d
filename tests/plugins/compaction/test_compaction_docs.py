"""docs/compaction.md shows real output and a working replacement compactor: keep it so."""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Callable
from pathlib import Path

from compaction_support import lines, markers, model_plugin, text_reply, tool_reply

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, ToolSpec
from soulacy.plugins.compaction import CompactionConfig, ExtractiveCompactor
from soulacy.testing import Workspace

DOC = (Path(__file__).parents[3] / "docs" / "compaction.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, re.S)


def literal(first_key: str) -> object:
    """The Python literal the docs show for a dict starting with ``first_key``."""
    (found,) = [b for b in blocks("python") if b.startswith(f'{{"{first_key}"')]
    return ast.literal_eval(found)


def example_view() -> list[Message]:
    """The run the docs describe: 30 source files read, then a 6 MB build log."""

    def call(i: int, name: str, **arguments: str) -> Message:
        return Message("assistant", "", tool_calls=(ToolCall(f"call_{i}", name, arguments),))

    def result(i: int, name: str, text: str) -> Message:
        return Message("tool", text, tool_call_id=f"call_{i}", name=name)

    log = "".join(
        f"08:{n // 60 % 60:02d}:{n % 60:02d} compiling module_{n}.py ... ok\n"
        for n in range(150_000)
    )
    log += "ERROR: src/module_77.py:12: undefined name 'parse_config'\nBUILD FAILED (1 error)\n"
    messages = [
        Message("system", "You are a build engineer. Use the tools; answer briefly."),
        Message("user", "Find out why the nightly build fails and fix it."),
    ]
    for i in range(1, 31):
        source = "".join(f"def f_{i}_{n}(x):\n    return x + {n}\n" for n in range(40))
        messages += [
            call(i, "read_file", path=f"src/module_{i}.py"),
            result(i, "read_file", source),
        ]
    messages.append(Message("assistant", "Nothing wrong in these modules; fetching the build log."))
    messages += [call(31, "build_log", run="nightly-1042"), result(31, "build_log", log)]
    tools = [ToolSpec(n, "...", {"type": "object"}) for n in ("read_file", "build_log")]
    config = CompactionConfig(excerpt_chars=200, max_excerpts=2)
    compactor = ExtractiveCompactor(config, goal=lambda: 1, window=8192, reserve=4096)
    return list(compactor.compact(messages, 4096, tools))


def test_the_marker_shown_in_the_docs_is_real_output() -> None:
    view = example_view()
    (stand_in,) = markers(view)
    assert stand_in.content.rstrip("\n") in [b.rstrip("\n") for b in blocks("text")]
    assert literal("messages") == stand_in.meta["compaction"]


def test_the_cut_log_shown_in_the_docs_is_real_output() -> None:
    cut = example_view()[-1]
    shown = next(b for b in blocks("text") if "BUILD FAILED" in b)
    for line in shown.splitlines():
        if line.strip() != "⋮":
            assert line in cut.content.splitlines()
    assert literal("truncated") == cut.meta


async def test_the_summarizing_compactor_sample_works(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    (source,) = [b for b in blocks("python") if "class Summarizer" in b]
    sample = types.ModuleType("summarizer_sample")
    exec(compile(source, "docs/compaction.md", "exec"), sample.__dict__)
    seen: list[list[Message]] = []

    def model(request: ModelRequest, index: int) -> ModelReply:
        if request.messages[0].content.startswith("Summarise"):
            return text_reply("SUMMARY: read many files, nothing found yet.")
        seen.append(list(request.messages))
        return tool_reply(index, path=f"f{index}") if len(seen) < 25 else text_reply("done")

    def read(path: str) -> str:
        """Read a file."""
        return lines(path, 4_000)

    workspace.write_agent("a", {"llm": {"provider": "fn"}, "tools": ["read"]})
    provider = model_plugin(
        model, context_window=6_000, max_output_tokens=1_000, tools=[Tool.from_function(read)]
    )
    kernel = make_kernel(extra_plugins=[provider, sample.Summarizer()])
    result = await kernel.run("a", "go")
    assert result.status == "completed"
    last = seen[-1]
    assert last[1].content.startswith("[model-written summary of the first ")
    assert last[1].content.endswith("SUMMARY: read many files, nothing found yet.")
    assert "compaction" in last[2].meta
