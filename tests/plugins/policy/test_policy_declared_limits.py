"""Limits plugins declare (``soulacy_policy_limits``): the policy resolves, checks and reports
them beside its core limits, holds them by name, and without the declaring plugin they do not
exist (decision 0030)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest

from soulacy.kernel import (
    ConfigError,
    ConfigIssue,
    ConfigSection,
    Duration,
    Kernel,
    Location,
    PluginError,
)
from soulacy.kernel.policy import (
    CORE_LIMITS,
    ExecutionPolicy,
    Limit,
    PolicyLimit,
    declared_limits,
)
from soulacy.testing import HookRecorder, Workspace, throwaway_plugin

Load = Callable[..., Kernel]
STUDIO = ("max_build_tokens", "max_build_cost_usd", "max_build_attempts", "max_build_elapsed")


@attrs.frozen
class AcmeConfig:
    max_uploads: int = 10
    upload_window: Duration = Duration(72 * 3600)


def carry(limit: Limit[Any], policy: ExecutionPolicy) -> Limit[Any]:
    """ACME's rule: the upload window is never shorter than the run."""
    run = policy.run_timeout.value
    if run is None or limit.value is None or limit.value >= run:
        return limit
    return Limit(run, "acme rule", limit.location, "raised to the run timeout")


ACME_LIMITS = (
    PolicyLimit(
        "max_uploads",
        "acme.max_uploads",
        10,
        "uploads per run",
        unlimited_at=-1,
        selects_default=0,
        minimum=-1,
        meaning="-1 means unlimited, 0 selects the default",
    ),
    PolicyLimit(
        "upload_window", "acme.upload_window", 72 * 3600.0, "", duration=True, adjust=carry
    ),
)


def acme(limits: Sequence[PolicyLimit] = ACME_LIMITS, name: str = "acme") -> Any:
    return throwaway_plugin(
        name,
        soulacy_config_sections=lambda: [ConfigSection("acme", AcmeConfig)],
        soulacy_policy_limits=lambda: limits,
    )


@pytest.fixture
def agent(workspace: Workspace) -> str:
    workspace.scripted_agent("a", [{"text": "done"}])
    return "a"


def test_the_builtin_plugins_declare_the_studio_and_http_limits(kernel: Kernel, agent: str) -> None:
    declared = declared_limits(kernel)
    assert list(declared) == ["max_tool_result_chars", "http_timeout", *STUDIO]
    policy = kernel.resolve_policy(agent)
    assert list(policy.extra) == ["max_tool_result_chars", "http_timeout", *STUDIO]
    assert list(policy.limits()) == [*CORE_LIMITS, "max_tool_result_chars", "http_timeout", *STUDIO]
    assert policy.limit("http_timeout") is policy.extra["http_timeout"]
    assert policy.limit("max_turns") is policy.max_turns
    shown = policy.to_dict()
    assert shown["http_timeout"] == {
        "value": 48 * 3600 + 60.0,
        "unlimited": False,
        "source": "default",
        "text": "48h1m",
    }
    assert shown["max_build_elapsed"]["text"] == "48h"
    assert "text" not in shown["max_build_attempts"]


def test_no_kernel_field_names_a_plugin() -> None:
    assert not [name for name in CORE_LIMITS if "build" in name or "http" in name]


@pytest.mark.parametrize(
    ("blocked", "gone"),
    [
        pytest.param("studio", STUDIO, id="no:studio"),
        pytest.param("http", ("http_timeout",), id="no:http"),
    ],
)
def test_without_the_declaring_plugin_its_limits_do_not_exist(
    make_kernel: Load, agent: str, blocked: str, gone: tuple[str, ...]
) -> None:
    kernel = make_kernel(plugins=[f"no:{blocked}"])
    policy = kernel.resolve_policy(agent)
    assert not set(gone) & set(policy.limits())
    assert not set(gone) & set(policy.to_dict())
    with pytest.raises(KeyError, match="exists only while that plugin is loaded"):
        policy.limit(gone[0])


def test_without_http_an_unlimited_run_needs_no_http_timeout(
    workspace: Workspace, make_kernel: Load, agent: str
) -> None:
    workspace.write_config("runtime:\n  timeouts:\n    run: '0'\n")
    with pytest.raises(ConfigError, match="cannot accommodate"):
        make_kernel()
    policy = make_kernel(plugins=["no:http"]).resolve_policy(agent)
    assert policy.run_timeout.unlimited


def test_without_studio_its_section_is_kept_with_a_warning(
    workspace: Workspace, make_kernel: Load
) -> None:
    workspace.write_config("llm:\n  studio:\n    max_build_attempts: 5\n")
    kernel = make_kernel(plugins=["no:studio"])
    assert any("llm.studio" in warning for warning in kernel.config.warnings)


def test_a_declared_limit_is_resolved_with_its_source(
    workspace: Workspace, make_kernel: Load, agent: str
) -> None:
    config = workspace.write_config("acme:\n  max_uploads: 3\n")
    policy = make_kernel(extra_plugins=[acme()]).resolve_policy(agent)
    assert policy.limit("max_uploads") == Limit(3, "config.yaml", f"{config}:2:3")
    assert policy.limit("upload_window") == Limit(72 * 3600, "default")  # outlasts the run
    assert policy.to_dict()["upload_window"]["text"] == "72h"
    assert policy.is_duration("upload_window")
    assert not policy.is_duration("max_uploads")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(-1, Limit(None, "config.yaml"), id="unlimited_at"),
        pytest.param(0, Limit(10, "config.yaml", None, "0 selects the default"), id="default"),
        pytest.param(7, Limit(7, "config.yaml"), id="a value"),
    ],
)
def test_the_declared_special_values(
    workspace: Workspace, make_kernel: Load, agent: str, value: int, expected: Limit[Any]
) -> None:
    workspace.write_config(f"acme:\n  max_uploads: {value}\n")
    limit = make_kernel(extra_plugins=[acme()]).resolve_policy(agent).limit("max_uploads")
    assert attrs.evolve(limit, location=None) == expected


def test_the_environment_is_a_source_of_declared_limits_too(make_kernel: Load, agent: str) -> None:
    kernel = make_kernel(extra_plugins=[acme()], environ={"SOULACY_ACME__MAX_UPLOADS": "4"})
    limit = kernel.resolve_policy(agent).limit("max_uploads")
    assert (limit.value, limit.source) == (4, "environment")


def test_the_declaring_plugins_rule_relates_it_to_the_core_limits(
    workspace: Workspace, make_kernel: Load
) -> None:
    workspace.scripted_agent("a", [{"text": "done"}], run_timeout="100h")
    limit = make_kernel(extra_plugins=[acme()]).resolve_policy("a").limit("upload_window")
    assert limit == Limit(100 * 3600, "acme rule", None, "raised to the run timeout")


def test_a_declared_range_is_checked_like_the_policys_own(
    workspace: Workspace, make_kernel: Load
) -> None:
    config = workspace.write_config("acme:\n  max_uploads: -3\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel(extra_plugins=[acme()])
    (issue,) = caught.value.issues
    assert (issue.path, issue.value) == ("acme.max_uploads", -3)
    assert f"{config}:2:3: acme.max_uploads: expected -1 or more (-1 means unlimited," in str(
        caught.value
    )


def test_a_declared_check_runs_with_the_policys_checks(
    workspace: Workspace, make_kernel: Load
) -> None:
    def check(config: Any) -> list[ConfigIssue]:
        window = config.get("acme.upload_window")
        if window.seconds < 60:
            where = config.source_of("acme.upload_window") or Location(str(config.file))
            return [ConfigIssue(where, "acme.upload_window", "at least 1m", str(window), True)]
        return []

    limits = (attrs.evolve(ACME_LIMITS[1], check=check),)
    workspace.write_config("acme:\n  upload_window: 30s\n")
    with pytest.raises(ConfigError, match=r"acme\.upload_window: at least 1m"):
        make_kernel(extra_plugins=[acme(limits)])


async def test_the_run_limits_event_reports_declared_limits(
    make_kernel: Load, agent: str, hook_recorder: HookRecorder
) -> None:
    kernel = make_kernel(extra_plugins=[acme()], plugins=["no:sqlite_store"])
    await kernel.run(agent, "go")
    (event,) = [
        call.event
        for call in hook_recorder.getcalls("soulacy_event")
        if call.event.type == "run.limits"
    ]
    assert event.data["max_uploads"] == {"value": 10, "unlimited": False, "source": "default"}
    assert event.data["upload_window"]["text"] == "72h"
    assert event.data["http_timeout"]["text"] == "48h1m"


def test_policy_show_lists_declared_limits(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    workspace.write_agent("old", {})
    result = soulacy_cli("policy", "show", "old")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in result.out.splitlines()[1:]}
    assert rows["max_build_elapsed"] == ["48h", "default"]
    assert rows["http_timeout"] == ["48h1m", "default"]


def test_two_plugins_declaring_one_limit_is_an_error(make_kernel: Load) -> None:
    other = throwaway_plugin("other", soulacy_policy_limits=lambda: ACME_LIMITS[:1])
    with pytest.raises(
        PluginError, match="plugins 'acme' and 'other' both define the policy limit"
    ):
        make_kernel(extra_plugins=[acme(), other])


def test_declaring_a_core_limit_is_an_error(make_kernel: Load) -> None:
    clash = (PolicyLimit("max_turns", "acme.max_uploads", 10),)
    with pytest.raises(PluginError, match="'acme' declares the policy limit 'max_turns'"):
        make_kernel(extra_plugins=[acme(clash)])


def test_a_key_no_plugin_owns_gives_the_declared_default(make_kernel: Load, agent: str) -> None:
    orphan = PolicyLimit("max_widgets", "widgets.max", None)
    plugin = throwaway_plugin("widgets", soulacy_policy_limits=lambda: [orphan])
    limit = make_kernel(extra_plugins=[plugin]).resolve_policy(agent).limit("max_widgets")
    assert (limit.value, limit.source) == (None, "default")
    assert limit.reason == "no loaded plugin owns widgets.max: the declared default"


def test_with_limits_replaces_core_and_declared_limits(kernel: Kernel, agent: str) -> None:
    policy = kernel.resolve_policy(agent)
    strict = policy.with_limits(
        max_turns=Limit(3, "company"), max_build_attempts=Limit(2, "company")
    )
    assert (strict.max_turns.value, strict.limit("max_build_attempts").value) == (3, 2)
    assert strict.limit("http_timeout") == policy.limit("http_timeout")
    assert policy.limit("max_build_attempts").value == 32  # the original is unchanged
    with pytest.raises(KeyError, match="no limit 'max_bogus'"):
        policy.with_limits(max_bogus=Limit(1, "company"))


def test_the_workspace_reader_reads_a_declared_limit_as_the_policy_does(
    workspace: Workspace, make_kernel: Load
) -> None:
    """What studio asks for a build of an agent whose file does not load."""
    workspace.write_config("llm:\n  studio:\n    max_build_attempts: 0\n")
    kernel = make_kernel()
    declared = declared_limits(kernel)["max_build_attempts"]
    limit = kernel.hook.soulacy_workspace_limit(config=kernel.config, declared=declared)
    assert (limit.value, limit.source, limit.reason) == (32, "config.yaml", "0 selects the default")
