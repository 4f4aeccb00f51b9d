"""Configuration is strict, points at lines, and reports every problem at once."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from soulacy.kernel import ConfigError, ConfigSection, Duration, Kernel, hookimpl
from soulacy.testing import Workspace


@attrs.frozen
class Sample:
    enabled: bool = False
    retries: int = 3
    ratio: float = 0.5
    names: list[str] = attrs.Factory(list)
    label: str = "x"
    wait: Duration = Duration(60)


class SamplePlugin:
    name = "sample"

    @hookimpl
    def soulacy_config_sections(self) -> list[ConfigSection]:
        return [
            ConfigSection("sample", Sample),
            ConfigSection("llm.sample", Sample),
            ConfigSection("sample_key", Sample, scope="agent"),
        ]


@pytest.fixture
def load(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    def load(text: str, **options: object) -> Kernel:
        workspace.write_config(text)
        return make_kernel(extra_plugins=[SamplePlugin()], **options)

    return load


def issues_of(load: Callable[..., Kernel], text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(text)
    return [str(issue) for issue in info.value.issues]


def test_a_plugin_section_is_structured_into_its_attrs_class(load: Callable[..., Kernel]) -> None:
    kernel = load("sample:\n  enabled: true\n  names: [a, b]\n  wait: 48h1m\n")
    sample = kernel.config.section("sample")
    assert sample == Sample(enabled=True, names=["a", "b"], wait=Duration(172_860))
    assert kernel.config.section("llm.sample") == Sample()


@pytest.mark.parametrize(
    ("yaml", "path", "expected"),
    [
        ('enabled: "false"', "sample.enabled", "expected true or false, got a string"),
        ("retries: 3.9", "sample.retries", "expected an integer, got a number"),
        ("retries: true", "sample.retries", "expected an integer, got a boolean"),
        ('retries: "3"', "sample.retries", "expected an integer, got a string"),
        ("names: abc", "sample.names", "expected a list, got a string"),
        ("names: {a: 1}", "sample.names", "expected a list, got a mapping"),
        ("label: null", "sample.label", "expected a string, got null"),
        ("label: 5", "sample.label", "expected a string, got an integer"),
        ("ratio: yes", "sample.ratio", "expected a number, got a string"),
        ("wait: 5", "sample.wait", "expected a duration"),
        ("wait: 5x", "sample.wait", "expected a duration"),
    ],
)
def test_the_converter_never_guesses(
    load: Callable[..., Kernel], workspace: Workspace, yaml: str, path: str, expected: str
) -> None:
    (issue,) = issues_of(load, f"sample:\n  {yaml}\n")
    assert issue.startswith(f"{workspace.path / 'config.yaml'}:2:3: {path}: {expected}")


def test_an_error_names_file_line_column_key_value_and_expectation(
    load: Callable[..., Kernel], workspace: Workspace
) -> None:
    (issue,) = issues_of(load, "# comment\nsample:\n  retries: 3.9\n")
    assert issue == (
        f"{workspace.path / 'config.yaml'}:3:3: sample.retries:"
        " expected an integer, got a number (got 3.9)"
    )


def test_several_errors_are_reported_together_in_file_order(load: Callable[..., Kernel]) -> None:
    issues = issues_of(load, "sample:\n  retries: x\n  enabled: 1\nllm:\n  sample: {ratio: a}\n")
    assert [i.split(": ")[1] for i in issues] == [
        "sample.retries",
        "sample.enabled",
        "llm.sample.ratio",
    ]


def test_a_misspelt_key_is_an_error_with_a_did_you_mean(load: Callable[..., Kernel]) -> None:
    issues = issues_of(load, "sample:\n  retires: 4\nsampel: {}\n")
    assert issues[0].endswith("sample.retires: unknown key; did you mean 'retries'? (got 4)")
    assert issues[1].endswith("sampel: unknown key; did you mean 'sample'? (got {})")


def test_an_unknown_key_below_a_shared_top_level_key_is_an_error(
    load: Callable[..., Kernel],
) -> None:
    (issue,) = issues_of(load, "llm:\n  sampel: {}\n")
    assert "llm.sampel: unknown key; did you mean 'sample'?" in issue


def test_original_keys_that_no_plugin_handles_are_warnings(load: Callable[..., Kernel]) -> None:
    kernel = load("memory:\n  size: 8080\nchannels: {telegram: {}}\nlog: {}\n")
    # an empty value asks for nothing, so ``log: {}`` is accepted without a word
    assert [str(k.location).rsplit("/", 1)[1] for k in kernel.config.kept] == [
        "config.yaml:1:1",
        "config.yaml:3:1",
    ]
    assert len(kernel.config.warnings) == 2
    assert kernel.config.warnings[0].endswith(
        "config.yaml:1:1: memory: not implemented by any loaded plugin;"
        " kept in the file, it has no effect (the original memory layer)"
    )


def test_malformed_yaml_names_the_line(load: Callable[..., Kernel]) -> None:
    (issue,) = issues_of(load, "sample:\n  names: [a,\n")
    assert ":3:1: malformed YAML" in issue


def test_a_top_level_list_is_refused(load: Callable[..., Kernel]) -> None:
    (issue,) = issues_of(load, "- a\n- b\n")
    assert issue.endswith("expected a mapping of keys at the top")


def test_absent_and_explicitly_default_are_distinguishable(load: Callable[..., Kernel]) -> None:
    kernel = load("sample:\n  retries: 3\n")
    assert kernel.config.section("sample").retries == 3
    assert kernel.config.is_set("sample.retries")
    assert not kernel.config.is_set("sample.enabled")
    location = kernel.config.source_of("sample.retries")
    assert location is not None
    assert (location.line, location.column) == (2, 3)
    assert kernel.config.source_of("sample.enabled") is None


def test_environment_overrides_use_double_underscores(load: Callable[..., Kernel]) -> None:
    env = {"SOULACY_SAMPLE__RETRIES": "7", "SOULACY_LLM__SAMPLE__ENABLED": "true"}
    kernel = load("sample:\n  retries: 1\n", environ=env)
    assert kernel.config.section("sample").retries == 7
    assert kernel.config.section("llm.sample").enabled is True
    assert str(kernel.config.source_of("sample.retries")) == (
        "environment variable SOULACY_SAMPLE__RETRIES"
    )


def test_a_bad_environment_override_names_the_variable(load: Callable[..., Kernel]) -> None:
    with pytest.raises(ConfigError) as info:
        load("", environ={"SOULACY_SAMPLE__RETRIES": "many"})
    (issue,) = info.value.issues
    assert str(issue) == (
        "environment variable SOULACY_SAMPLE__RETRIES: sample.retries:"
        " expected an integer, got a string (got 'many')"
    )


def test_agent_files_are_validated_against_agent_sections(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_agent("bot", "name: Bot\nsample_key: {retries: 2}\nunattended: true\n")
    kernel = load("")
    agent = kernel.agent("bot")
    assert agent.section("sample_key").retries == 2
    assert agent.section("name") == "Bot"
    assert agent.section("enabled") is True
    # unattended belongs to the original agent format but no plugin handles it: a warning.
    assert any(
        "unattended: not implemented by any loaded plugin" in w for w in agent.settings.warnings
    )


def test_a_misspelt_agent_key_is_an_error(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_agent("bot", "name: Bot\nsystem_promt: hi\n")
    kernel = load("")
    with pytest.raises(ConfigError) as info:
        kernel.agent("bot")
    assert str(info.value).endswith(
        "SOUL.yaml:2:1: system_promt: unknown key; did you mean 'system_prompt'? (got 'hi')"
    )


def test_an_agent_id_that_differs_from_its_folder_is_refused(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_agent("bot", "id: other\n")
    with pytest.raises(Exception, match="does not match the folder name 'bot'"):
        load("").agent("bot")


def test_an_unknown_agent_lists_the_known_ones(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_agent("bot", "name: Bot\n")
    with pytest.raises(Exception, match=r"no agent 'bott'.*known agents: bot"):
        load("").agent("bott")


def test_validate_all_reports_every_agent_problem_together(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", "name: 5\n")
    workspace.write_agent("b", "enabled: maybe\n")
    with pytest.raises(ConfigError) as info:
        load("").validate_all()
    assert len(info.value.issues) == 2


def test_an_unknown_key_from_the_environment_names_the_variable(
    load: Callable[..., Kernel],
) -> None:
    with pytest.raises(ConfigError) as info:
        load("", environ={"SOULACY_FOO__BAR": "1"})
    (issue,) = info.value.issues
    assert str(issue).startswith("environment variable SOULACY_FOO__BAR: foo: unknown key")


def test_a_mismatched_agent_id_is_reported_with_the_other_problems(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", "id: b\n")
    workspace.write_agent("c", "enabled: maybe\n")
    with pytest.raises(ConfigError) as info:
        load("").validate_all()
    messages = [str(issue) for issue in info.value.issues]
    assert any("id: does not match the folder name 'a' (got 'b')" in m for m in messages)
    assert len(messages) == 2


def test_an_empty_nested_section_takes_its_defaults(load: Callable[..., Kernel]) -> None:
    kernel = load("runtime:\n  timeouts:\n")
    assert kernel.config.get("runtime.timeouts.run").seconds == 48 * 3600
