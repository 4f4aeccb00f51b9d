"""The ``otel:`` section, the ``OTEL_*`` variables, loading the plugin, and what is logged."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from conftest import ADD, ENABLE, PLUGIN, Traced, tools_plugin

from soulacy.contrib.otel import OtelConfig, telemetry
from soulacy.contrib.otel._config import resolve
from soulacy.kernel import ConfigError, Kernel
from soulacy.testing import Workspace


def test_config_yaml_wins_over_the_standard_variables_which_win_over_defaults() -> None:
    assert resolve(OtelConfig(), {}).traces_endpoint == "http://localhost:4318/v1/traces"
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318/",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://metrics:9/custom",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20env,x-team=env",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=traces",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.25",
        "OTEL_SERVICE_NAME": "from-env",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=ignored",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_METRIC_EXPORT_INTERVAL": "5000",
    }
    from_env = resolve(OtelConfig(), env)
    assert from_env.traces_endpoint == "http://env:4318/v1/traces"
    assert from_env.metrics_endpoint == "http://metrics:9/custom"  # a signal's own: as it is
    assert from_env.traces_headers == {"x-team": "traces"}  # the signal's own variable wins
    assert from_env.metrics_headers == {"authorization": "Bearer env", "x-team": "env"}
    assert from_env.sampling == "parentbased_traceidratio:0.25"
    assert from_env.service_name == "from-env"
    assert from_env.resource_attributes["deployment.environment"] == "prod"
    assert (from_env.traces, from_env.metrics) == (("console",), ())
    assert from_env.metric_export_interval_ms == 5000
    assert not from_env.disabled
    assert not from_env.warnings

    config = OtelConfig(
        exporter="otlp",
        endpoint="https://collector.example:4318",
        headers={"X-Team": "config"},
        sampling=0.5,
        service_name="from-config",
    )
    from_config = resolve(config, env)
    assert from_config.traces_endpoint == "https://collector.example:4318/v1/traces"
    assert from_config.metrics_endpoint == "https://collector.example:4318/v1/metrics"
    assert from_config.traces_headers == {"x-team": "config"}  # merged, config.yaml last
    assert from_config.metrics_headers == {"authorization": "Bearer env", "x-team": "config"}
    assert from_config.sampling == "ratio:0.5"
    assert from_config.service_name == "from-config"
    assert (from_config.traces, from_config.metrics) == (("otlp",), ("otlp",))


def test_what_the_environment_says_wrong_is_a_warning_not_a_failure() -> None:
    resolved = resolve(
        OtelConfig(),
        {
            "OTEL_TRACES_SAMPLER": "sometimes",
            "OTEL_TRACES_EXPORTER": "jaeger,console",
            "OTEL_SDK_DISABLED": "true",
        },
    )
    assert resolved.sampling == "parentbased_always_on"
    assert resolved.traces == ("console",)
    assert resolved.disabled
    assert len(resolved.warnings) == 2


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ("exporter: jaeger", "otel.exporter"),
        ("endpoint: collector:4318", "otel.endpoint"),
        ("sampling: 1.5", "otel.sampling"),
        ("metrics_bind: localhost", "otel.metrics_bind"),
        ("max_open_spans: 0", "otel.max_open_spans"),
        ("shutdown_timeout: '0'", "otel.shutdown_timeout"),
        ("capture_content: 'yes'", "otel.capture_content"),
        ("trust_inbound_trace: 'maybe'", "otel.trust_inbound_trace"),
        ("unknown_key: 1", "otel.unknown_key"),
    ],
)
def test_mistakes_in_the_section_are_configuration_errors(
    workspace: Workspace, make_kernel: Callable[..., Kernel], section: str, key: str
) -> None:
    workspace.write_config(ENABLE + f"otel:\n  {section}\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    assert key in str(caught.value)


def test_an_endpoint_with_a_password_is_not_repeated_in_the_error(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(ENABLE + "otel:\n  endpoint: ftp://user:hunter2@host/\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    assert "otel.endpoint" in str(caught.value)
    assert "hunter2" not in str(caught.value)


async def test_the_environment_names_the_service_and_config_yaml_wins(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced(environ={"OTEL_SERVICE_NAME": "agents-prod"})
    workspace.scripted_agent("adder", ADD, tools=["add"])
    await t.kernel.run("adder", "19 + 23?")
    [span] = t.named("invoke_agent")
    assert span.resource.attributes["service.name"] == "agents-prod"
    t2 = traced("otel:\n  service_name: mine\n", environ={"OTEL_SERVICE_NAME": "agents-prod"})
    assert t2.telemetry.resource.attributes["service.name"] == "mine"


async def test_an_environment_sampler_applies(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced(environ={"OTEL_TRACES_SAMPLER": "always_off"})
    workspace.scripted_agent("adder", ADD, tools=["add"])
    result = await t.kernel.run("adder", "19 + 23?")
    assert result.status == "completed"
    assert t.spans() == []


async def test_otel_sdk_disabled_turns_everything_off(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(ENABLE)
    workspace.scripted_agent("adder", ADD, tools=["add"])
    kernel = make_kernel(
        extra_plugins=[tools_plugin()],
        plugins=["no:sqlite_store"],
        environ={"OTEL_SDK_DISABLED": "true"},
    )
    try:
        result = await kernel.run("adder", "19 + 23?")
        made = telemetry(kernel)
        assert result.status == "completed"
        assert not made.enabled
        assert made.tracer_provider is None
        assert made.meter_provider is None
        assert made.prometheus_text() == ""
    finally:
        await kernel.aclose()


async def test_exporter_none_makes_no_spans_and_keeps_metrics(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(ENABLE + "otel:\n  exporter: none\n")
    workspace.scripted_agent("adder", ADD, tools=["add"])
    kernel = make_kernel(extra_plugins=[tools_plugin()], plugins=["no:sqlite_store"])
    try:
        await kernel.run("adder", "19 + 23?")
        made = telemetry(kernel)
        assert made.tracer_provider is None
        assert made.observer.tracer is None
        assert "soulacy_runs_total{" in made.prometheus_text()
    finally:
        await kernel.aclose()


async def test_header_values_are_never_logged(
    workspace: Workspace, make_kernel: Callable[..., Kernel], caplog: pytest.LogCaptureFixture
) -> None:
    workspace.write_config(
        ENABLE + "otel:\n  endpoint: http://127.0.0.1:9/\n  shutdown_timeout: 1s\n"
        "  headers:\n    x-honeycomb-team: hc-0123456789\n    Authorization: Bearer tok-987654\n"
    )
    environ = {"OTEL_METRICS_EXPORTER": "none"}
    kernel = make_kernel(plugins=["no:sqlite_store"], environ=environ)
    caplog.set_level(logging.INFO, logger="soulacy.otel")
    made = telemetry(kernel)
    await kernel.aclose()
    text = caplog.text
    assert "x-honeycomb-team=***" in text
    assert "authorization=***" in text
    assert "hc-0123456789" not in text
    assert "tok-987654" not in text
    assert "hc-0123456789" not in repr(made.resolved)


def test_the_launcher_loads_it_and_console_spans_go_to_stderr(
    tmp_path: Path, soulacy_cli: Callable[..., CompletedProcess[str]]
) -> None:
    workspace = Workspace(tmp_path)
    workspace.write_config("otel:\n  exporter: console\n")
    (tmp_path / "agents" / "adder").mkdir(parents=True)
    (tmp_path / "agents" / "adder" / "tools.py").write_text(
        "def add(numbers: list[int]) -> int:\n    '''Add.'''\n    return sum(numbers)\n"
    )
    workspace.scripted_agent("adder", ADD, tools=["tools.py:add"])
    listed = soulacy_cli(["-p", PLUGIN, "plugins"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert f"{PLUGIN} (command line" in listed.stdout
    assert "soulacy_event" in listed.stdout
    assert "soulacy_run_strategy" in listed.stdout
    done = soulacy_cli(["-p", PLUGIN, "run", "adder", "19 + 23?"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "19 + 23 = 42" in done.stdout.splitlines()  # the reply, on a line of its own
    assert '"name": "invoke_agent adder"' in done.stderr  # the console exporter's JSON
    assert '"name": "execute_tool add"' in done.stderr
    assert "invoke_agent" not in done.stdout


def test_without_the_plugin_the_section_is_unknown(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("otel:\n  exporter: console\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    assert "otel" in str(caught.value)
    assert sys.modules.get("soulacy.contrib.otel") is not None  # imported by these tests
