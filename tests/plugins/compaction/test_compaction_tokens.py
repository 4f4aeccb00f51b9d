"""The token estimate is defined once, can be replaced by a plugin's counter, and is calibrated
against the provider's reported input tokens (a smoothed, bounded ratio)."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest
from compaction_support import GOAL, SYSTEM, TOOLS, conversation

from soulacy.kernel import Kernel, PluginError, hookimpl
from soulacy.kernel.contracts import ContextOverflow
from soulacy.kernel.messages import Message, ToolCall, ToolSpec
from soulacy.plugins.compaction import CharEstimate, CompactionConfig, ExtractiveCompactor, render
from soulacy.testing import Workspace, throwaway_plugin


def test_the_default_estimate_is_characters_over_4_plus_4_per_message() -> None:
    compactor = ExtractiveCompactor()
    assert compactor.estimate([Message("user", "x" * 400)]) == 104
    assert compactor.estimate([Message("user", "x" * 401)]) == 105  # rounded up
    assert compactor.estimate([Message("user", "")]) == 4


def test_tool_calls_and_schemas_are_measured_too() -> None:
    compactor = ExtractiveCompactor()
    message = Message("assistant", "", tool_calls=(ToolCall("c", "read", {"path": "a"}),))
    assert render(message) == '→ read({"path": "a"})'
    assert compactor.estimate([message]) == 4 + 6
    spec = ToolSpec("read", "Read.", {"type": "object"})
    assert compactor.estimate([], [spec]) == 4 + len('read\nRead.\n{"type": "object"}') // 4 + 1


def test_the_estimate_follows_the_configuration() -> None:
    config = CompactionConfig(chars_per_token=2.0, message_overhead_tokens=10)
    assert ExtractiveCompactor(config).estimate([Message("user", "x" * 400)]) == 210


def test_the_allowance_is_compared_with_the_estimate() -> None:
    messages = [SYSTEM, GOAL]
    compactor = ExtractiveCompactor()
    exact = compactor.estimate(messages, TOOLS)
    assert compactor.compact(messages, exact, TOOLS) is messages
    with pytest.raises(ContextOverflow, match="input allowance"):
        compactor.compact(messages, exact - 1, TOOLS)  # nothing to leave out: an overflow


def words(text: str) -> int:
    return len(text.split())


def test_a_counter_replaces_the_estimate() -> None:
    compactor = ExtractiveCompactor(counter=words)
    assert compactor.estimate([Message("user", "one two three " * 100)]) == 4 + 300


def test_a_plugin_supplies_the_counter_through_its_hook(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", {"id": "a"})
    asked: list[Any] = []

    def soulacy_compaction_token_counter(kernel: Kernel, run: Any) -> Callable[[str], int]:
        asked.append(run)
        return words

    tokenizer = throwaway_plugin(
        "tokenizer", soulacy_compaction_token_counter=soulacy_compaction_token_counter
    )
    kernel = make_kernel(extra_plugins=[tokenizer])
    run = types.SimpleNamespace(policy=kernel.resolve_policy("a", None), first_new=0)
    compactor = kernel.hook.soulacy_compactor(kernel=kernel, run=run)
    assert asked == [run]
    assert compactor.measure.counter is words
    assert compactor.estimate([Message("user", "a b c")]) == 4 + 3


def test_without_a_counter_plugin_the_configured_estimate_is_used(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", {"id": "a"})
    workspace.write_config("compaction:\n  chars_per_token: 3.0\n")
    kernel = make_kernel()
    run = types.SimpleNamespace(policy=kernel.resolve_policy("a", None), first_new=0)
    compactor = kernel.hook.soulacy_compactor(kernel=kernel, run=run)
    assert compactor.measure.counter == CharEstimate(3.0)


def test_a_counter_plugin_marked_optional_loads_with_compaction_disabled(
    make_kernel: Callable[..., Kernel],
) -> None:
    class Optional:
        name = "optional-tokenizer"

        @hookimpl(optionalhook=True)
        def soulacy_compaction_token_counter(self, kernel: Kernel, run: Any) -> Any:
            return words

    make_kernel(extra_plugins=[Optional()], plugins=["no:compaction"])
    plain = throwaway_plugin("plain-tokenizer", soulacy_compaction_token_counter=lambda: words)
    with pytest.raises(PluginError, match="soulacy_compaction_token_counter"):
        make_kernel(extra_plugins=[plain], plugins=["no:compaction"])


def test_calibration_learns_a_smoothed_ratio_from_reported_usage() -> None:
    messages = conversation(3)
    compactor = ExtractiveCompactor()
    raw = compactor.estimate(messages, TOOLS)
    view = compactor.compact(messages, raw, TOOLS)
    assert view is messages  # it fits by the raw estimate
    compactor.calibrate(view, 2 * raw)
    assert compactor.calibration.ratio == pytest.approx(1.3)
    compactor.calibrate(compactor.compact(messages, None, TOOLS), 2 * raw)
    assert compactor.calibration.ratio == pytest.approx(1.51)
    assert compactor.estimate(messages, TOOLS) == -(-raw * 151 // 100)
    # The provider counts more than estimated: the same messages no longer fit.
    assert compactor.compact(messages, raw, TOOLS) is not messages


def test_calibration_measures_a_view_it_did_not_make() -> None:
    compactor = ExtractiveCompactor()
    view = [Message("user", "x" * 400)]
    compactor.calibrate(view, 52)  # estimated 104, reported half
    assert compactor.calibration.ratio == pytest.approx(0.85)


@pytest.mark.parametrize(("reported", "bound"), [(10**9, 4.0), (1, 0.5)])
def test_calibration_is_bounded(reported: int, bound: float) -> None:
    compactor = ExtractiveCompactor()
    view = [Message("user", "x" * 400)]
    for _ in range(50):
        compactor.calibrate(view, reported)
    assert compactor.calibration.ratio == bound


def test_calibration_ignores_empty_reports() -> None:
    compactor = ExtractiveCompactor()
    compactor.calibrate([Message("user", "x")], 0)
    compactor.calibrate([], 10)
    assert compactor.calibration.ratio == 1.0
