"""Every config input error is one paragraph with exit 2; values have stated maxima; durations
are exact (observations 4 and 5 of step 14)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest

from soulacy.cli import main
from soulacy.kernel import ConfigError, Duration, Kernel, format_duration
from soulacy.testing import Workspace

MAX_INT = 2**53


@pytest.fixture
def cli(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> Callable[..., Any]:
    def run(*args: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
        code = main(["--workspace", str(workspace.path), *args], environ=environ or {})
        out, err = capsys.readouterr()
        return code, out, err

    return run


# -- observation 4: malformed YAML values are usage errors, not tracebacks ----------------------


def test_config_set_of_malformed_yaml_is_one_paragraph_with_exit_2(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    path = workspace.write_config("runtime:\n  default_max_turns: 20\n")
    code, _out, err = cli("config", "set", "runtime.default_max_turns", "[1, 2")
    assert code == 2, err
    assert "Traceback" not in err
    assert err.startswith("soulacy: error: ")
    assert len(err.strip().splitlines()) == 1, err
    assert "'[1, 2'" in err
    assert "not a valid YAML value" in err
    assert path.read_text() == "runtime:\n  default_max_turns: 20\n"


def test_a_malformed_yaml_environment_value_names_the_variable(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    env = {"SOULACY_RUNTIME__DEFAULT_MAX_TURNS": "[1, 2"}
    code, _, err = cli("config", "show", environ=env)
    assert code == 2, err
    assert "Traceback" not in err
    assert err.startswith(
        "soulacy: error: invalid configuration: environment variable"
        " SOULACY_RUNTIME__DEFAULT_MAX_TURNS: runtime.default_max_turns: not a valid YAML value"
    ), err


def test_a_malformed_environment_value_is_reported_with_the_files_problems(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("runtime:\n  no_progress_limit: x\n")
    with pytest.raises(ConfigError) as info:
        make_kernel(environ={"SOULACY_RUNTIME__DEFAULT_MAX_TURNS": "{a: "})
    assert [issue.path for issue in info.value.issues] == [
        "runtime.default_max_turns",
        "runtime.no_progress_limit",
    ]


@pytest.mark.parametrize("value", ["[1, 2", "{a: ", "a: b: c", "'unclosed", "\t- x\n- y"])
def test_no_yaml_value_ends_in_a_traceback(value: str, cli: Callable[..., Any]) -> None:
    code, _, err = cli("config", "set", "runtime.default_max_turns", value)
    assert code == 2, err
    assert "Traceback" not in err
    assert err.startswith("soulacy: error: ")


def test_a_file_that_is_not_yaml_at_all_is_one_paragraph(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_config("runtime: &a\n  x: *b\n")
    code, _, err = cli("config", "show")
    assert code == 2, err
    assert "Traceback" not in err
    assert "config.yaml:2" in err


# -- observation 5: maxima ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("yaml", "key"),
    [
        ("runtime:\n  default_max_turns: 99999999999999999999999999999\n", "default_max_turns"),
        ("runtime:\n  default_budget: {max_tokens: 9007199254740993}\n", "max_tokens"),
        ("runtime:\n  no_progress_limit: -99999999999999999999\n", "no_progress_limit"),
    ],
)
def test_integers_beyond_2_53_are_errors_naming_the_line(
    workspace: Workspace, make_kernel: Callable[..., Kernel], yaml: str, key: str
) -> None:
    workspace.write_config(yaml)
    with pytest.raises(ConfigError) as info:
        make_kernel()
    (issue,) = info.value.issues
    assert str(issue.location) == f"{workspace.path / 'config.yaml'}:2:{yaml.index(key) - 8}"
    assert f"expected an integer from {-MAX_INT} to {MAX_INT}" in issue.message


def test_the_largest_integer_is_accepted(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(f"runtime:\n  default_max_turns: {MAX_INT}\n")
    assert make_kernel().config.section("runtime").default_max_turns == MAX_INT


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e300"])
def test_numbers_must_be_finite_and_bounded(
    workspace: Workspace, make_kernel: Callable[..., Kernel], value: str
) -> None:
    workspace.write_config(f"costs:\n  max_run_cost_usd: {value}\n")
    with pytest.raises(ConfigError) as info:
        make_kernel()
    (issue,) = info.value.issues
    assert issue.path == "costs.max_run_cost_usd"
    assert "expected a finite number" in issue.message


def test_a_duration_beyond_100_years_is_an_error_naming_the_line(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("store:\n  busy_timeout: 9999999999999h\n")
    with pytest.raises(ConfigError) as info:
        make_kernel()
    (issue,) = info.value.issues
    assert str(issue.location) == f"{workspace.path / 'config.yaml'}:2:3"
    assert issue.path == "store.busy_timeout"
    assert "at most 876000h (100 years)" in issue.message


def test_100_years_is_the_longest_duration() -> None:
    assert str(Duration.parse("876000h")) == "876000h"
    with pytest.raises(ValueError, match="at most 876000h"):
        Duration.parse("876000h1ns")
    with pytest.raises(ValueError, match="at most 876000h"):
        Duration(876000 * 3600 + 1)


def test_config_set_of_an_absurd_value_is_refused_and_nothing_is_written(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    path = workspace.write_config("runtime:\n  default_max_turns: 20\n")
    code, _, err = cli(
        "config", "set", "runtime.default_max_turns", "99999999999999999999999999999"
    )
    assert code == 2, err
    assert "Traceback" not in err
    assert "runtime.default_max_turns: expected an integer from" in err
    assert path.read_text() == "runtime:\n  default_max_turns: 20\n"


# -- observation 5: durations are exact ----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["876000h", "99999h59m59.999999999s", "1h30m0.001s", "0.000000001s", "48h1m", "0.5s"],
)
def test_durations_are_stored_and_printed_exactly(text: str) -> None:
    duration = Duration.parse(text)
    assert str(duration) == text
    assert Duration.parse(str(duration)) == duration


def test_duration_arithmetic_is_in_integer_nanoseconds() -> None:
    assert Duration.parse("100ms").nanoseconds == 100_000_000
    assert Duration.parse("1.1s").nanoseconds == 1_100_000_000
    assert Duration.parse("0.1s") + Duration.parse("0.2s") == Duration.parse("300ms")
    assert Duration(Fraction(3, 10)) == Duration.parse("0.3s")
    assert format_duration(0.1) == "0.1s"  # a float prints as the decimal it was written as


def test_policy_show_prints_a_long_timeout_exactly(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_config(
        "runtime:\n  timeouts:\n"
        "    {tool: 2m, llm: 5m, step: 10m, run: 875999h59m59.999999999s, http: 0}\n"
    )
    workspace.write_agent("a", "name: a\n")
    code, out, err = cli("policy", "show", "a")
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.strip().startswith("run_timeout")]
    assert "875999h59m59.999999999s" in line, line


def test_a_file_nested_too_deeply_is_one_paragraph(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_config("a: " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = cli("config", "show")
    assert code == 2, err[-300:]
    assert "Traceback" not in err
    assert "nested too deeply" in err
