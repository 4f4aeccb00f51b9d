"""The ``compaction:`` section of config.yaml: defaults, effect, and validation that points at
the line to fix."""

from __future__ import annotations

import re
import types
from collections.abc import Callable

import pytest
from compaction_support import TOOLS, conversation, markers

from soulacy.kernel import ConfigError, Kernel
from soulacy.plugins.compaction import CompactionConfig, ExtractiveCompactor
from soulacy.testing import Workspace


def test_the_defaults(kernel: Kernel) -> None:
    assert kernel.config.section("compaction") == CompactionConfig(
        chars_per_token=4.0,
        message_overhead_tokens=4,
        keep_recent_exchanges=2,
        excerpt_chars=1000,
        max_excerpts=8,
    )


def test_the_section_reaches_the_runs_compactor(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        "compaction:\n  chars_per_token: 3\n  keep_recent_exchanges: 3\n"
        "  excerpt_chars: 200\n  max_excerpts: 2\n  message_overhead_tokens: 0\n"
    )
    workspace.write_agent("a", {"id": "a"})
    kernel = make_kernel()
    run = types.SimpleNamespace(policy=kernel.resolve_policy("a", None), first_new=0)
    compactor = kernel.hook.soulacy_compactor(kernel=kernel, run=run)
    assert isinstance(compactor, ExtractiveCompactor)
    assert compactor.config == CompactionConfig(3.0, 0, 3, 200, 2)


def test_keep_recent_exchanges_decides_how_many_exchanges_share_the_room() -> None:
    messages = conversation(100, chars=4_000)  # results of about 1,000 tokens
    one = ExtractiveCompactor(CompactionConfig(keep_recent_exchanges=1))
    three = ExtractiveCompactor(CompactionConfig(keep_recent_exchanges=3))
    whole = [m for m in one.compact(messages, 2_500, TOOLS) if m.role == "tool"]
    shared = [m for m in three.compact(messages, 2_500, TOOLS) if m.role == "tool"]
    assert whole == messages[-3::2]  # the two newest fit whole; the third does not
    newest = shared[-3:]  # cut to share the room; older ones may follow whole
    assert [m.tool_call_id for m in newest] == [m.tool_call_id for m in messages[-5::2]]
    assert all(m.meta["truncated"] for m in newest)


def test_max_excerpts_and_excerpt_chars_bound_the_excerpts() -> None:
    messages = conversation(100, chars=2_000)
    config = CompactionConfig(max_excerpts=5, excerpt_chars=150)
    (stand_in,) = markers(ExtractiveCompactor(config).compact(messages, 2_500, TOOLS))
    blocks = stand_in.content.split("\n\n--- excerpt · ")[1:]
    assert len(blocks) == stand_in.meta["compaction"]["excerpted"] == 5
    for block in blocks:
        label = block.split(" ---\n", 1)[0]
        found = re.search(r"· (?:all )?([\d,]+) (?:of [\d,]+ )?characters$", label)
        assert found, label
        assert 0 < int(found.group(1).replace(",", "")) <= 150
    none = CompactionConfig(max_excerpts=0)
    (bare,) = markers(ExtractiveCompactor(none).compact(messages, 2_500, TOOLS))
    assert bare.meta["compaction"]["excerpted"] == 0


BAD = [
    ("chars_per_token", "0", "expected a number greater than 0"),
    ("chars_per_token", "-1.5", "expected a number greater than 0"),
    # NaN is refused for every number, before a plugin's own check (the converter's bounds)
    (
        "chars_per_token",
        ".nan",
        "expected a finite number from -9007199254740992 to 9007199254740992 (2**53)",
    ),
    ("message_overhead_tokens", "-1", "expected 0 or more"),
    ("keep_recent_exchanges", "0", "expected 1 or more"),
    ("excerpt_chars", "99", "expected 100 or more"),
    ("max_excerpts", "-1", "expected 0 or more"),
]


@pytest.mark.parametrize(("key", "value", "expected"), BAD)
def test_a_bad_value_is_an_issue_at_its_line(
    workspace: Workspace, make_kernel: Callable[..., Kernel], key: str, value: str, expected: str
) -> None:
    path = workspace.write_config(f"runtime: {{}}\ncompaction:\n  {key}: {value}\n")
    with pytest.raises(ConfigError) as info:
        make_kernel()
    (issue,) = info.value.issues
    assert (issue.path, issue.message) == (f"compaction.{key}", expected)
    assert (issue.location.file, issue.location.line) == (str(path), 3)


def test_every_bad_value_is_reported_at_once(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        "compaction:\n  chars_per_token: 0\n  keep_recent_exchanges: 0\n  max_excerpts: -2\n"
    )
    with pytest.raises(ConfigError) as info:
        make_kernel()
    assert [(i.path, i.location.line) for i in info.value.issues] == [
        ("compaction.chars_per_token", 2),
        ("compaction.keep_recent_exchanges", 3),
        ("compaction.max_excerpts", 4),
    ]


@pytest.mark.parametrize(
    "body", ["  keep_recent: 3\n", "  chars_per_token: four\n", "  max_excerpts: 2.5\n"]
)
def test_unknown_keys_and_wrong_types_are_refused(
    workspace: Workspace, make_kernel: Callable[..., Kernel], body: str
) -> None:
    workspace.write_config("compaction:\n" + body)
    with pytest.raises(ConfigError, match="compaction"):
        make_kernel()
