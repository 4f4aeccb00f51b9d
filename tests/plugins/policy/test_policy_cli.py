"""Saving settings and the command line: ``update_config`` / ``soulacy config set`` send changed
fields only, ``soulacy policy show`` explains every limit, ``soulacy agents new`` inherits.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soulacy.kernel import ConfigError, Kernel
from soulacy.plugins.policy import ExecutionPolicy, ModelCapacity
from soulacy.testing import Workspace

Load = Callable[..., Kernel]
Cli = Callable[..., Any]

# A workspace saved by an older release: old restrictive defaults written out explicitly, plus
# advanced limits, Studio allowances, cost policy and plugin settings that a basic edit must keep.
SAVED = """\
# Soulacy workspace settings
plugins:
  disable: []   # nothing disabled
llm:
  default:
    provider: acme
    model: "m-small"
  studio:
    max_build_tokens: 400000
    max_build_cost_usd: 2.5
    max_build_attempts: 5
    max_build_elapsed: '2h'
runtime:
  default_max_turns: 20     # old default
  max_turns_ceiling: 50
  default_budget:
    max_tokens: 100000
    max_llm_calls: 20
  max_budget: {max_tokens: 1000000, max_llm_calls: 200}
  no_progress_limit: 12
  timeouts:
    tool: 90s
    llm: "4m"
    step: '9m'
    run: 6h
    http: 6h1m
costs:
  default_max_output_tokens: 8192   # per response
  max_output_tokens_ceiling: 12000
  pricing:
  - {provider: acme, model: "m-*", input_per_mtok: 0.5, output_per_mtok: 1.5}  # price metadata
"""
SAVED_KEYS = [
    "plugins.disable",
    "llm.default.provider",
    "llm.default.model",
    "llm.studio.max_build_tokens",
    "llm.studio.max_build_cost_usd",
    "llm.studio.max_build_attempts",
    "llm.studio.max_build_elapsed",
    "runtime.default_max_turns",
    "runtime.max_turns_ceiling",
    "runtime.default_budget.max_tokens",
    "runtime.default_budget.max_llm_calls",
    "runtime.max_budget.max_tokens",
    "runtime.max_budget.max_llm_calls",
    "runtime.no_progress_limit",
    "runtime.timeouts.tool",
    "runtime.timeouts.llm",
    "runtime.timeouts.step",
    "runtime.timeouts.run",
    "runtime.timeouts.http",
    "costs.default_max_output_tokens",
    "costs.max_output_tokens_ceiling",
    "costs.pricing",
]


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added) between two texts, compared line by line."""
    removed, added = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def saved_values(kernel: Kernel) -> dict[str, Any]:
    return {key: kernel.config.get(key) for key in SAVED_KEYS}


@pytest.fixture
def saved(workspace: Workspace) -> Path:
    return workspace.write_config(SAVED)


# -- update_config ----------------------------------------------------------------------------


def test_the_saved_workspace_is_fully_explicit(saved: Path, make_kernel: Load) -> None:
    config = make_kernel().config
    assert all(config.is_set(key) for key in SAVED_KEYS)


@pytest.mark.parametrize(
    ("changes", "key", "value", "old_line", "new_line"),
    [
        pytest.param(
            {"runtime": {"default_budget": {"max_tokens": 5}}},
            "runtime.default_budget.max_tokens",
            5,
            "    max_tokens: 100000",
            "    max_tokens: 5",
            id="API sections that replace their members retain their other saved values",
        ),
        pytest.param(
            {"runtime.default_max_turns": 0},
            "runtime.default_max_turns",
            0,
            "  default_max_turns: 20     # old default",
            "  default_max_turns: 0      # old default",  # the comment keeps its column
            id="Settings -> Runtime accepts zero to remove turn limits",
        ),
        pytest.param(
            {"llm": {"default": {"model": "m-large"}}},
            "llm.default.model",
            "m-large",
            '    model: "m-small"',
            '    model: "m-large"',
            id="A basic edit does not reset advanced limits, Studio build allowances,"
            " cost policies, price metadata or plugin settings",
        ),
        pytest.param(
            {"runtime.timeouts.step": "10m"},
            "runtime.timeouts.step",
            "10m",
            "    step: '9m'",
            "    step: '10m'",
            id="a quoted value stays quoted the same way",
        ),
        pytest.param(
            {"runtime": {"max_budget": {"max_llm_calls": 300}}},
            "runtime.max_budget.max_llm_calls",
            300,
            "  max_budget: {max_tokens: 1000000, max_llm_calls: 200}",
            "  max_budget: {max_tokens: 1000000, max_llm_calls: 300}",
            id="a flow-style section keeps its style and its other members",
        ),
    ],
)
def test_workspace_saves_send_changed_fields_only(
    saved: Path,
    make_kernel: Load,
    changes: dict[str, Any],
    key: str,
    value: Any,
    old_line: str,
    new_line: str,
) -> None:
    kernel = make_kernel()
    before_values = saved_values(kernel)
    before = saved.read_text(encoding="utf-8")

    assert kernel.update_config(changes) == [key]

    after = saved.read_text(encoding="utf-8")
    assert changed_lines(before, after) == ([old_line], [new_line])
    assert after.startswith("# Soulacy workspace settings\n")
    reloaded = make_kernel()
    got = reloaded.config.get(key)
    assert (str(got) if key.startswith("runtime.timeouts") else got) == value
    expected = {**before_values, key: got}
    assert saved_values(reloaded) == expected
    assert all(reloaded.config.is_set(k) for k in SAVED_KEYS)
    assert saved_values(kernel) == expected  # the running kernel sees the saved settings


@pytest.mark.parametrize(
    "pricing",
    [
        pytest.param(
            "  pricing:\n    - {provider: acme, input_per_mtok: 0.5, output_per_mtok: 1.5}\n",
            id="a list indented under its key (the style the kernel itself writes)",
        ),
        pytest.param(
            "  pricing:   # price metadata\n"
            "  - {provider: acme, input_per_mtok: 0.5, output_per_mtok: 1.5}\n",
            id="a comment after the key of a list",
        ),
    ],
)
def test_a_save_keeps_the_indentation_of_a_file_with_lists(
    workspace: Workspace, make_kernel: Load, pricing: str
) -> None:
    """Only the changed line differs, whatever the style of the lists in the file."""
    text = "runtime:\n  default_max_turns: 20\ncosts:\n" + pricing
    saved = workspace.write_config(text)
    assert make_kernel().update_config({"runtime.default_max_turns": 21}) == [
        "runtime.default_max_turns"
    ]
    after = saved.read_text(encoding="utf-8")
    assert changed_lines(text, after) == (
        ["  default_max_turns: 20"],
        ["  default_max_turns: 21"],
    )


def test_adding_a_key_only_adds_its_line(saved: Path, make_kernel: Load) -> None:
    kernel = make_kernel()
    before = saved.read_text(encoding="utf-8")
    assert kernel.update_config({"runtime.default_budget.max_llm_calls": 20}) == []
    assert kernel.update_config({"llm.studio": {"max_build_attempts": -1}}) == [
        "llm.studio.max_build_attempts"
    ]
    removed, added = changed_lines(before, saved.read_text(encoding="utf-8"))
    assert (removed, added) == (["    max_build_attempts: 5"], ["    max_build_attempts: -1"])


def test_a_new_config_file_holds_only_the_changed_field(
    workspace: Workspace, make_kernel: Load
) -> None:
    kernel = make_kernel()
    assert kernel.update_config({"runtime": {"default_budget": {"max_tokens": 5}}}) == [
        "runtime.default_budget.max_tokens"
    ]
    text = (workspace.path / "config.yaml").read_text(encoding="utf-8")
    assert text == "runtime:\n  default_budget:\n    max_tokens: 5\n"
    reloaded = make_kernel().config
    assert reloaded.get("runtime.default_budget.max_llm_calls") == 0
    assert not reloaded.is_set("runtime.default_budget.max_llm_calls")
    assert not reloaded.is_set("runtime.default_max_turns")


def test_saving_an_unchanged_value_does_not_touch_the_file(saved: Path, make_kernel: Load) -> None:
    kernel = make_kernel()
    before = saved.read_bytes()
    assert (
        kernel.update_config({"runtime": {"default_max_turns": 20, "max_turns_ceiling": 50}}) == []
    )
    assert saved.read_bytes() == before


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        pytest.param({"runtime.default_max_turns": -5}, "runtime.default_max_turns", id="negative"),
        pytest.param({"runtime.timeouts.run": "72h"}, "runtime.timeouts.http", id="http too short"),
        pytest.param({"runtime.max_turns_ceiling": "lots"}, "runtime.max_turns_ceiling", id="type"),
        pytest.param({"runtime.default_max_turn": 3}, "runtime.default_max_turn", id="unknown key"),
        pytest.param(
            {"runtime": {"default_budget": {"max_tokens": 5, "max_llm_calls": -1}}},
            "runtime.default_budget.max_llm_calls",
            id="one bad member of a section",
        ),
    ],
)
def test_an_invalid_value_leaves_the_file_byte_for_byte_untouched(
    saved: Path, make_kernel: Load, changes: dict[str, Any], path: str
) -> None:
    kernel = make_kernel()
    before = saved.read_bytes()
    before_values = saved_values(kernel)
    with pytest.raises(ConfigError) as caught:
        kernel.update_config(changes)
    assert [issue.path for issue in caught.value.issues] == [path]
    assert saved.read_bytes() == before
    assert saved_values(kernel) == before_values
    assert sorted(p.name for p in saved.parent.iterdir()) == ["config.yaml"]  # no temp files


# -- soulacy config set -----------------------------------------------------------------------


def test_config_set_changes_one_line(saved: Path, soulacy_cli: Cli, make_kernel: Load) -> None:
    before = saved.read_text(encoding="utf-8")
    result = soulacy_cli("config", "set", "runtime.default_budget.max_tokens", "5")
    assert result.code == 0, result.err
    assert "runtime.default_budget.max_tokens = 5 saved in" in result.out
    after = saved.read_text(encoding="utf-8")
    assert changed_lines(before, after) == (["    max_tokens: 100000"], ["    max_tokens: 5"])
    assert make_kernel().config.get("runtime.default_budget.max_llm_calls") == 20


def test_config_set_of_a_section_merges_its_members(
    saved: Path, soulacy_cli: Cli, make_kernel: Load
) -> None:
    result = soulacy_cli("config", "set", "runtime.default_budget", "{max_tokens: 5}")
    assert result.code == 0, result.err
    config = make_kernel().config
    assert config.get("runtime.default_budget.max_tokens") == 5
    assert config.get("runtime.default_budget.max_llm_calls") == 20


def test_config_set_of_an_unchanged_value_says_so(saved: Path, soulacy_cli: Cli) -> None:
    before = saved.read_bytes()
    result = soulacy_cli("config", "set", "runtime.max_turns_ceiling", "50")
    assert result.code == 0
    assert "runtime.max_turns_ceiling is already 50" in result.out
    assert saved.read_bytes() == before


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        pytest.param(
            "runtime.default_max_turns",
            "-5",
            ":14:3: runtime.default_max_turns: expected 0 or more",
            id="negative",
        ),
        pytest.param(
            "runtime.timeouts.run",
            "72h",
            "runtime.timeouts.http: the HTTP timeout cannot accommodate the run timeout (72h)",
            id="http too short",
        ),
        pytest.param(
            "runtime.timeouts.run", "0", 'set it to "0"', id="an unlimited run needs http 0"
        ),
        pytest.param("costs.max_output_tokens_ceiling", "many", "expected an integer", id="type"),
        pytest.param(
            "runtime.max_turn_ceiling", "5", "did you mean 'max_turns_ceiling'", id="typo"
        ),
    ],
)
def test_config_set_of_an_invalid_value_exits_2_and_writes_nothing(
    saved: Path, soulacy_cli: Cli, key: str, value: str, message: str
) -> None:
    before = saved.read_bytes()
    result = soulacy_cli("config", "set", key, value)
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("soulacy: error: invalid configuration")
    assert message in result.err
    assert saved.read_bytes() == before


def test_config_set_zero_removes_the_turn_limit(workspace: Workspace, soulacy_cli: Cli) -> None:
    """Settings -> Runtime accepts zero to remove turn limits."""
    workspace.write_config(OLD_DEFAULTS)
    workspace.write_agent("a", {})
    assert soulacy_cli("config", "set", "runtime.max_turns_ceiling", "0").code == 0
    assert soulacy_cli("config", "set", "runtime.default_max_turns", "0").code == 0
    shown = json.loads(soulacy_cli("policy", "show", "a", "--json").out)
    assert shown["max_turns"]["unlimited"] is True
    assert shown["max_turns"]["source"] == "config.yaml"


# -- soulacy policy show ----------------------------------------------------------------------

OLD_DEFAULTS = """\
runtime:
  default_max_turns: 20
  max_turns_ceiling: 50
  default_budget: {max_tokens: 100000, max_llm_calls: 20}
"""
LIMIT_NAMES = {
    "max_turns",
    "max_tokens",
    "max_llm_calls",
    "max_output_tokens",
    "reasoning_max_steps",
    "no_progress_limit",
    "run_timeout",
    "http_timeout",
    "llm_timeout",
    "step_timeout",
    "tool_timeout",
    "reasoning_step_timeout",
    "reasoning_total_timeout",
    "max_build_tokens",
    "max_build_cost_usd",
    "max_build_attempts",
    "max_build_elapsed",
    "max_tool_result_chars",
    "context_window",
}


def test_policy_show_prints_saved_old_defaults_with_their_source(
    workspace: Workspace, soulacy_cli: Cli
) -> None:
    config_file = workspace.write_config(OLD_DEFAULTS)
    workspace.write_agent("old", {})
    result = soulacy_cli("policy", "show", "old")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "execution policy of agent 'old'"
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in lines[1:]}
    assert set(rows) == LIMIT_NAMES
    assert rows["max_turns"] == ["20", f"config.yaml ({config_file}:2:3)"]
    assert rows["max_tokens"] == ["100000", f"config.yaml ({config_file}:4:20)"]
    assert rows["max_llm_calls"] == ["20", f"config.yaml ({config_file}:4:40)"]
    assert rows["run_timeout"] == ["48h", "default"]
    assert rows["http_timeout"] == ["48h1m", "default"]
    assert rows["max_build_tokens"] == ["unlimited", "default"]
    assert rows["reasoning_max_steps"][0] == "20"
    assert rows["reasoning_max_steps"][1].endswith("; reasoning steps inherit the turn allowance")


def test_policy_show_json_gives_every_limit_with_its_source(
    workspace: Workspace, soulacy_cli: Cli
) -> None:
    config_file = workspace.write_config(OLD_DEFAULTS)
    workspace.write_agent("old", {"max_turns": -1, "run_timeout": "0"})
    result = soulacy_cli("policy", "show", "old", "--json")
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert shown.pop("agent_id") == "old"
    assert set(shown) == LIMIT_NAMES
    for name, limit in shown.items():
        assert {"value", "unlimited", "source"} <= set(limit), name
        assert limit["unlimited"] is (limit["value"] == "unlimited"), name
        if limit["source"] in ("config.yaml", "SOUL.yaml", "ceiling"):
            assert "location" in limit, name
        elif limit["source"] in ("default", "request", "unknown", "model capacity"):
            assert "location" not in limit, name
    assert shown["max_turns"] == {
        "value": 50,
        "unlimited": False,
        "source": "ceiling",
        "location": f"{config_file}:3:3",
        "reason": "runtime.max_turns_ceiling = 50 caps every agent (asked: unlimited, SOUL.yaml)",
    }
    assert shown["max_tokens"] == {
        "value": 100000,
        "unlimited": False,
        "source": "config.yaml",
        "location": f"{config_file}:4:20",
    }
    assert shown["run_timeout"]["value"] == "unlimited"
    assert shown["run_timeout"]["source"] == "SOUL.yaml"
    assert shown["http_timeout"]["unlimited"] is True
    assert shown["http_timeout"]["source"] == "accommodates run"
    assert shown["http_timeout"]["reason"] == "raised to unlimited to carry an unlimited run"
    assert shown["llm_timeout"] == {
        "value": 300,
        "unlimited": False,
        "source": "default",
        "text": "5m",
    }


def test_policy_show_json_matches_the_kernels_resolution(
    workspace: Workspace, soulacy_cli: Cli, make_kernel: Load
) -> None:
    workspace.write_config(OLD_DEFAULTS)
    workspace.write_agent("a", {"budget": {"max_tokens": 0}})
    policy: ExecutionPolicy = make_kernel().resolve_policy("a")
    shown = json.loads(soulacy_cli("policy", "show", "a", "--json").out)
    assert shown == json.loads(json.dumps(policy.to_dict()))


def test_policy_show_of_an_unknown_agent_exits_2(workspace: Workspace, soulacy_cli: Cli) -> None:
    workspace.write_agent("known", {})
    result = soulacy_cli("policy", "show", "ghost")
    assert result.code == 2
    assert "no agent 'ghost'" in result.err
    assert "known agents: known" in result.err


def test_policy_show_through_the_installed_command(workspace: Workspace) -> None:
    config_file = workspace.write_config(OLD_DEFAULTS)
    workspace.write_agent("old", {})
    script = Path(sys.executable).parent / "soulacy"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "soulacy.cli"]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    environ["SOULACY_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    done = subprocess.run(
        [*command, "-w", str(workspace.path), "policy", "show", "old", "--json"],
        capture_output=True,
        text=True,
        env=environ,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["max_turns"]["value"] == 20
    assert shown["max_turns"]["source"] == "config.yaml"
    assert shown["max_turns"]["location"] == f"{config_file}:2:3"


# -- soulacy agents new -----------------------------------------------------------------------

POLICY_KEYS = ("max_turns", "budget", "run_timeout", "reasoning", "no_progress_limit")


def test_agents_new_inherits_the_workspace_policy(
    workspace: Workspace, soulacy_cli: Cli, make_kernel: Load, capacity_plugin: Callable[..., Any]
) -> None:
    """New agents start with the configured workspace provider and its default model, inherit
    turn/output allowances, and leave nucleus sampling to the provider."""
    workspace.write_config(
        "llm:\n  default:\n    provider: acme\n    model: m-large\n" + OLD_DEFAULTS
    )
    result = soulacy_cli("agents", "new", "helper")
    assert result.code == 0, result.err
    soul = workspace.path / "agents" / "helper" / "SOUL.yaml"
    assert result.out.strip() == f"created {soul}"

    calls: list[tuple[str | None, str | None]] = []
    capacity = ModelCapacity(context_window=128000, max_output_tokens=32768)
    kernel = make_kernel(extra_plugins=[capacity_plugin(capacity, calls)])
    agent = kernel.agent("helper")
    for key in (*POLICY_KEYS, "llm.max_tokens", "llm.top_p", "llm.temperature"):
        assert not agent.is_set(key), key
    text = soul.read_text(encoding="utf-8")
    for word in ("max_turns", "budget", "timeout", "max_tokens", "top_p", "max_steps"):
        assert word not in text
    assert agent.section("llm").provider == "acme"
    assert agent.section("llm").model == "m-large"

    policy = kernel.resolve_policy("helper")
    assert calls == [("acme", "m-large")]
    assert (policy.max_turns.value, policy.max_turns.source) == (20, "config.yaml")
    assert (policy.max_tokens.value, policy.max_tokens.source) == (100000, "config.yaml")
    assert (policy.max_output_tokens.value, policy.max_output_tokens.source) == (16384, "default")
    assert (policy.run_timeout.value, policy.run_timeout.source) == (48 * 3600, "default")


def test_agents_new_without_a_workspace_model_leaves_llm_out(
    workspace: Workspace, soulacy_cli: Cli, make_kernel: Load
) -> None:
    assert soulacy_cli("agents", "new", "plain").code == 0
    agent = make_kernel().agent("plain")
    assert not agent.is_set("llm")
    policy = make_kernel().resolve_policy("plain")
    assert (policy.max_turns.value, policy.max_turns.source) == (256, "default")


def test_agents_new_refuses_to_overwrite(workspace: Workspace, soulacy_cli: Cli) -> None:
    soul = workspace.write_agent("mine", "id: mine\nmax_turns: 7  # keep\n")
    before = soul.read_bytes()
    result = soulacy_cli("agents", "new", "mine")
    assert result.code == 2
    assert "already exists; nothing was written" in result.err
    assert soul.read_bytes() == before
