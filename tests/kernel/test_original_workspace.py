"""A workspace written by the original system loads (observation 2 of step 14).

The files below carry every key that ../shared/reference/ORIGINAL-FORMAT.md lists for
config.yaml and SOUL.yaml, with the original's values (the old defaults included). The
runtime handles what it implements, keeps the rest in the file and warns about each kept key
once, naming its line; every saved budget keeps its value and its source; ``config set`` of one
key leaves every other line byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from soulacy.cli import main
from soulacy.kernel import ConfigError, Duration, Kernel
from soulacy.testing import Workspace

CONFIG = """\
# config.yaml written by the original system (first-run template, then Settings)
schema_version: 3
server:
  host: 127.0.0.1
  port: 18789
  gui_enabled: true
  gui_static_dir: /opt/soulacy/gui
  api_key: sy_4f1d2c9a7b6e5d4c
  tls_cert: /etc/soulacy/tls.crt
  tls_key: /etc/soulacy/tls.key
  allow_unauthenticated: true
  allowed_origins: [https://portal.example.com]
runtime:
  max_concurrent_sessions: 100
  default_max_turns: 20        # the old default, saved by the portal
  max_turns_ceiling: 50
  max_agent_call_depth: 5
  python_bin: /usr/bin/python3
  tool_timeout: "120s"
  timeouts:
    tool: 2m
    llm: 3m
    step: 4m
    run: 15m
    http: 16m
  default_budget:
    max_tokens: 100000
    max_llm_calls: 20
  max_budget:
    max_tokens: 1000000
    max_llm_calls: 100
  allow_system_agents: ["*"]
  ssrf_protection: true
  allow_private_hosts: [intranet.example.com]
  filesystem_roots: [/srv/data]
  allowed_tool_dirs: [/srv/tools]
  audit_dir: /var/log/soulacy/audit
  adaptive_nodes: true
  session_ttl: 24h
  max_sessions: 10000
  max_history_turns: 100
  retention:
    conversation_history: 720h
    action_events: 2160h
    audit_logs: 720h
  sandbox:
    enabled: true
    mode: docker
    image: python:3.12-slim
    cpu_seconds: 30
    memory_mb: 512
    open_files: 256
    file_size_mb: 64
    pids: 128
memory:
  dir: /home/ada/.soulacy/memory
  sqlite_path: /home/ada/.soulacy/memory.db
  vector_db: sqlite-vec
  vector_url: http://localhost:6333
  vector_dims: 768
  max_history: 50
llm:
  default_provider: nvidia
  providers:
    ollama:
      base_url: http://localhost:11434
      model: llama3
      keep_alive: 5m
    nvidia:
      base_url: https://integrate.api.nvidia.com/v1
      api_key: nvapi-0123456789
      model: meta/llama-3.1-70b-instruct
      options:
        temperature: 0.2
      request_timeout: 120s
      prompt_caching: true
      thinking_budget: 1024
  studio:
    provider: nvidia
    model: meta/llama-3.1-405b-instruct
    learning: true
    preset: careful
    build_ux: streamed
    max_build_tokens: 100000
    max_build_cost_usd: 5.0
  reasoner:
    provider: ollama
    model: qwen2.5
costs:
  daily_budget_usd: 10
  monthly_budget_usd: 200
  alert_threshold: 0.8
  enforcement_mode: soft
  pricing:
    meta/llama-3.1-70b-instruct:
      input_per_mtok: 0.35
      output_per_mtok: 0.4
rate_limit:
  enabled: true
  per_user_rpm: 60
  per_agent_rpm: 30
  per_user_tokens_day: 500000
  per_agent_tokens_day: 2000000
  backend: redis
  redis_url: redis://localhost:6379
search:
  provider: tavily
  api_key: tvly-123
  timeout: 30s
knowledge:
  db_path: /home/ada/.soulacy/knowledge.db
  embedding_provider: ollama
  embedding_model: nomic-embed-text
  chunk_size: 1000
  chunk_overlap: 200
  max_document_bytes: 52428800
storage: {backend: sqlite}
vector: {backend: sqlite-vec, dims: 768}
executor: {backend: process, workers: 4}
queue: {backend: memory}
auth: {mode: apikey}
credentials: {kms_provider: local}
telemetry: {enabled: true, exporter: stdout}
ops:
  slo_window: 24h
  max_failure_rate: 0.1
  max_incomplete_rate: 0.05
  max_p95_run_duration: 5m
  min_runs_for_signal: 3
  alert_webhook: https://ops.example.com/hook
deployment:
  profile: local
  owner: ada
  region: eu-west-1
  notes: laptop
  mode: personal
security:
  intent_gate: prompt
updates:
  manifest_url: https://releases.example.com/manifest.json
hooks:
  - on: [run.failed]
    url: https://ops.example.com/soulacy
    secret_env: SOULACY_HOOK_SECRET
voice: {provider: openai, model: gpt-realtime-mini}
packages: [weather-pack]
channels:
  telegram:
    token: "123:abc"
mcp:
  servers:
    files: {transport: stdio, command: npx, args: [-y, "@mcp/files"]}
plugin_dirs: [/home/ada/.soulacy/plugins]
plugins_config:
  weather-bot: {units: metric}
registries:
  - {id: main, type: http, base_url: "https://registry.example.com", priority: 10}
agent_dirs: [/home/ada/agents]
skill_dirs: [/home/ada/skills]
ui:
  walkthrough_seen: true
  walkthrough_step: 4
  walkthrough_version: 2
log:
  level: info
  format: console
  file: logs/soulacy.log
"""

SOUL = """\
# SOUL.yaml written by the original system's agent editor
id: researcher
name: Researcher
description: Finds sources and summarises them
version: "1.4.0"
tags: [research, web]
labels: {team: growth}
kind: router
routes:
  - {prefix: "/write", target: writer}
surfaces: [chat, api]
trigger: cron
channels: [telegram]
schedule:
  cron: "0 7 * * *"
  timeout: 30m
  run_missed_on_startup: true
  missed_startup_window: 6h
  output:
    channel: telegram
    to: "12345"
    bot_name: main
    template: "{{.Reply}}"
webhook:
  text_path: message.text
  user_id_path: message.from.id
  username_path: message.from.username
  session_id_path: message.chat.id
  thread_id_path: message.thread
  include_raw: true
system_prompt: You research questions and cite your sources.
llm:
  provider: nvidia
  model: meta/llama-3.1-70b-instruct
  temperature: 0.3
  top_p: 0.9
  max_tokens: 4096
  base_url: https://integrate.api.nvidia.com/v1
  response_format: json_object
  reasoning_effort: medium
  presence_penalty: 0.1
  frequency_penalty: 0.2
  output_schema: {type: object}
  tool_choice: auto
  allowed_providers: [nvidia, ollama]
  allowed_models: [meta/llama-3.1-70b-instruct]
  data_classification: internal
identity:
  role: research analyst
  expertise: [search, synthesis]
  audience: product managers
  backstory: Ten years in market research.
personality:
  tone: neutral
  voice: concise
  avoid: [speculation]
  prefer: [citations]
non_negotiables:
  must: [cite sources]
  must_not: [invent facts]
  output_constraints: {max_length: 2000, min_length: 100, format: markdown}
tools:
  - name: fetch_page
    description: Fetch a web page
    python_file: tools/fetch_page.py
    parameters: {type: object, properties: {url: {type: string}}}
    timeout: 60s
    retries: 2
    retry_backoff: 2s
  - name: word_count
    inline: "print(len(input().split()))"
skills: [summarise]
knowledge: [papers]
agents: [writer]
parallel_peer_calls: true
structured_peer_results: true
builtins: [read_file, fetch_url]
mcp_servers: [files]
mcp_tools: [files__read]
plugin_tools: [weather]
system_tools: true
allow_shell: true
capabilities: [system]
env: [SERPER_API_KEY]
confirm_tools: [send_email]
unattended: true
policy:
  enabled: true
  shell: deny
  file: read
  network: allow
  allow_domains: [example.com]
  deny_domains: [evil.example]
  deny_paths: [/etc]
security:
  passphrase: open-sesame
  passphrase_prompt: Passphrase?
  intent_gate: deny
execution: {backend: docker}
dry_run: true
memory: {read_scopes: [agent], write_scopes: [agent], max_tokens: 2000}
brain_memory:
  episodic: {enabled: true, max_inject: 5}
  semantic: {enabled: true}
  procedural: {enabled: true, auto_update: true}
learning: {enabled: true, auto_propose: true, min_chars: 200, max_proposals: 3}
reasoning:
  strategy: ""
  backend: native
  max_steps: 8
  max_plan_steps: 6
  max_parallel_steps: 4
  step_timeout: 2m
  total_timeout: 10m
  think: {temperature: 0.2, top_p: 1.0, max_tokens: 1024, response_format: json}
  plan: {temperature: 0.1}
  reflect: {temperature: 0.0}
  contract:
    goal: Answer with sources
    instructions: Search first
    completion_criteria: Three sources
    tool_choice: auto
    recovery_retries: 2
    react: {}
    plan: {}
max_turns: 20
stream_reply: true
enabled: true
budget: {max_tokens: 50000, max_llm_calls: 10}
run_timeout: 15m
notify_on_failure: {channel: telegram, to: "12345", include_error: true, template: "failed"}
hooks:
  - {on: [run.failed], url: "https://ops.example.com/agent"}
workflow:
  steps:
    - id: fetch
      tool: fetch_page
      prompt: ""
      if: "{{.Input}}"
      on_error: retry
      input: '{"url": "{{.Input}}"}'
      output: page
    - id: summarise
      prompt: Summarise the page
      output: summary
  output: summary
  max_node_executions: 100
outcome:
  assertions:
    - {target: reply, op: eq, value: done, describe: the reply says done}
  enforce: report
  goal: A cited summary
  mission: Keep the team informed
tool_schemas: {fetch_page: {type: object}}
studio_intent: Research and summarise
studio_graph_version: 2
"""

# Keys this runtime implements (possibly under its own name): never warned.
HANDLED_CONFIG = [
    "server.host",
    "server.port",
    "runtime.max_concurrent_sessions",
    "runtime.default_max_turns",
    "runtime.max_turns_ceiling",
    "runtime.tool_timeout",
    "runtime.timeouts",
    "runtime.default_budget",
    "runtime.max_budget",
    "llm.default_provider",
    "llm.providers",
    "llm.studio.max_build_tokens",
    "llm.studio.max_build_cost_usd",
    "costs.pricing",
    "mcp.servers",  # the builtin mcp plugin's
]
# Keys another step implements (the HTTP engineer's server section): warned at most once.
EITHER_CONFIG = ["server.api_key", "server.allowed_origins", "server.allow_unauthenticated"]
KEPT_CONFIG = [
    "schema_version",
    "server.gui_enabled",
    "server.gui_static_dir",
    "server.tls_cert",
    "server.tls_key",
    "runtime.max_agent_call_depth",
    "runtime.python_bin",
    "runtime.allow_system_agents",
    "runtime.ssrf_protection",
    "runtime.allow_private_hosts",
    "runtime.filesystem_roots",
    "runtime.allowed_tool_dirs",
    "runtime.audit_dir",
    "runtime.adaptive_nodes",
    "runtime.session_ttl",
    "runtime.max_sessions",
    "runtime.max_history_turns",
    "runtime.retention",
    "runtime.sandbox",
    "memory",
    "llm.providers.ollama.keep_alive",
    "llm.providers.nvidia.request_timeout",
    "llm.providers.nvidia.prompt_caching",
    "llm.providers.nvidia.thinking_budget",
    "llm.studio.provider",
    "llm.studio.model",
    "llm.studio.learning",
    "llm.studio.preset",
    "llm.studio.build_ux",
    "llm.reasoner",
    "costs.daily_budget_usd",
    "costs.monthly_budget_usd",
    "costs.alert_threshold",
    "costs.enforcement_mode",
    "rate_limit.enabled",
    "rate_limit.per_user_rpm",
    "rate_limit.per_agent_rpm",
    "rate_limit.per_user_tokens_day",
    "rate_limit.per_agent_tokens_day",
    "rate_limit.backend",
    "rate_limit.redis_url",
    "search",
    "knowledge",
    "storage",
    "vector",
    "executor",
    "queue",
    "auth",
    "credentials",
    "telemetry",
    "ops",
    "deployment",
    "security",
    "updates",
    "hooks",
    "voice",
    "packages",
    "channels",
    "plugin_dirs",
    "plugins_config",
    "registries",
    "agent_dirs",
    "skill_dirs",
    "ui",
    "log",
]
HANDLED_AGENT = [
    "confirm_tools",  # the builtin approvals plugin's
    "mcp_servers",  # the builtin mcp plugin's
    "mcp_tools",
    "id",
    "name",
    "description",
    "schedule.cron",
    "schedule.timeout",
    "schedule.run_missed_on_startup",
    "schedule.missed_startup_window",
    "system_prompt",
    "llm.provider",
    "llm.model",
    "llm.temperature",
    "llm.top_p",
    "llm.max_tokens",
    "llm.tool_choice",
    "llm.allowed_providers",
    "reasoning.strategy",
    "reasoning.max_steps",
    "reasoning.step_timeout",
    "reasoning.total_timeout",
    "max_turns",
    "enabled",
    "budget",
    "run_timeout",
    "outcome.assertions",
    "outcome.enforce",
    "outcome.goal",
]
KEPT_AGENT = [
    "version",
    "tags",
    "labels",
    "kind",
    "routes",
    "surfaces",
    "trigger",
    "channels",
    "schedule.output",
    "webhook",
    "llm.base_url",
    "llm.response_format",
    "llm.reasoning_effort",
    "llm.presence_penalty",
    "llm.frequency_penalty",
    "llm.output_schema",
    "llm.allowed_models",
    "llm.data_classification",
    "identity",
    "personality",
    "non_negotiables",
    "tools.0",
    "tools.1",
    "skills",
    "knowledge",
    "agents",
    "parallel_peer_calls",
    "structured_peer_results",
    "builtins",
    "plugin_tools",
    "system_tools",
    "allow_shell",
    "capabilities",
    "env",
    "unattended",
    "policy",
    "security",
    "execution",
    "dry_run",
    "memory",
    "brain_memory",
    "learning",
    "reasoning.backend",
    "reasoning.max_plan_steps",
    "reasoning.max_parallel_steps",
    "reasoning.think",
    "reasoning.plan",
    "reasoning.reflect",
    "reasoning.contract",
    "stream_reply",
    "notify_on_failure",
    "hooks",
    "workflow.steps.0.if",
    "workflow.steps.0.on_error",
    "workflow.steps.0.input",
    "workflow.steps.0.output",
    "workflow.steps.1.output",
    "workflow.output",
    "workflow.max_node_executions",
    "outcome.mission",
    "tool_schemas",
    "studio_intent",
    "studio_graph_version",
]


def position_of(text: str, dotted: str) -> tuple[int, int]:
    """The 1-based line and column of a dotted key (list items by index), read by ruamel."""
    node: Any = YAML().load(text)
    line = column = 0
    for part in dotted.split("."):
        if isinstance(node, list):
            line, column = node.lc.item(int(part))
            node = node[int(part)]
        else:
            line, column = node.lc.key(part)
            node = node[part]
    return line + 1, column + 1


def line_of(text: str, dotted: str) -> int:
    return position_of(text, dotted)[0]


@pytest.fixture
def original(workspace: Workspace) -> Workspace:
    workspace.write_config(CONFIG)
    workspace.write_agent("researcher", SOUL)
    workspace.write_agent("writer", "name: Writer\nsystem_prompt: You write.\n")
    return workspace


@pytest.fixture
def load(original: Workspace, make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    def load(**options: Any) -> Kernel:
        return make_kernel(**options)

    return load


def warned(warnings: list[str] | tuple[str, ...], key: str) -> list[str]:
    return [w for w in warnings if f": {key}: " in w or f": {key!r} " in w]


def test_the_line_helper_finds_nested_keys() -> None:
    assert (
        line_of(CONFIG, "runtime.timeouts.http") == CONFIG.splitlines().index("    http: 16m") + 1
    )
    assert SOUL.splitlines()[line_of(SOUL, "tools.1") - 1] == "  - name: word_count"
    assert SOUL.splitlines()[line_of(SOUL, "workflow.steps.1.output") - 1] == (
        "      output: summary"
    )


def test_an_original_workspace_loads(load: Callable[..., Kernel]) -> None:
    kernel = load()
    assert kernel.validate_all() is not None
    assert kernel.agent("researcher").section("name") == "Researcher"


def test_each_kept_config_key_is_warned_once_with_its_line(
    original: Workspace, load: Callable[..., Kernel]
) -> None:
    warnings = load().config.warnings
    file = original.path / "config.yaml"
    for key in KEPT_CONFIG:
        found = warned(warnings, key)
        assert len(found) == 1, (key, found)
        assert found[0].startswith(f"{file}:{line_of(CONFIG, key)}:"), (key, found[0])
        assert "not implemented by any loaded plugin" in found[0]
    for key in HANDLED_CONFIG:
        assert warned(warnings, key) == [], key
    for key in EITHER_CONFIG:
        assert len(warned(warnings, key)) <= 1, key
    accounted = len(KEPT_CONFIG) + sum(len(warned(warnings, k)) for k in EITHER_CONFIG)
    assert len(warnings) == accounted, "\n".join(warnings)


def test_each_kept_agent_key_is_warned_once_with_its_line(
    original: Workspace, load: Callable[..., Kernel]
) -> None:
    warnings = load().agent("researcher").settings.warnings
    file = original.path / "agents" / "researcher" / "SOUL.yaml"
    for key in KEPT_AGENT:
        found = warned(warnings, key)
        assert len(found) == 1, (key, found)
        assert found[0].startswith(f"{file}:{line_of(SOUL, key)}:"), (key, found[0])
        assert "not implemented by any loaded plugin" in found[0]
    for key in HANDLED_AGENT:
        assert warned(warnings, key) == [], key
    assert len(warnings) == len(KEPT_AGENT), "\n".join(warnings)


def test_handled_keys_take_effect(load: Callable[..., Kernel]) -> None:
    kernel = load()
    config = kernel.config
    runtime = config.section("runtime")
    assert runtime.max_concurrent_sessions == 100
    assert runtime.timeouts.tool == Duration.parse("2m")
    assert config.section("llm.default").provider == "nvidia"
    assert config.get("llm.default_provider") == "nvidia"
    providers = config.section("llm.providers")
    assert providers["nvidia"].type == "openai"
    assert providers["nvidia"].base_url == "https://integrate.api.nvidia.com/v1"
    assert providers["ollama"].type == "openai"
    assert providers["ollama"].base_url == "http://localhost:11434/v1"
    (price,) = config.section("costs").pricing
    assert (price.model, price.input_per_mtok, price.output_per_mtok) == (
        "meta/llama-3.1-70b-instruct",
        0.35,
        0.4,
    )
    agent = kernel.agent("researcher")
    assert agent.section("tools") == ["fetch_page", "word_count"]
    assert agent.section("reasoning").strategy is None  # Go's "": the classic loop
    assert agent.section("schedule").output is None
    steps = agent.section("workflow").steps
    assert [(s.id, s.kind, s.input) for s in steps] == [
        ("fetch", "tool", None),
        ("summarise", "prompt", None),
    ]
    assert kernel.providers.model_of(agent) == ("nvidia", "meta/llama-3.1-70b-instruct")


def test_every_saved_budget_keeps_its_value_and_source(
    original: Workspace, load: Callable[..., Kernel]
) -> None:
    policy = load().resolve_policy("writer")
    file = original.path / "config.yaml"
    expected = {
        "max_turns": (20, "runtime.default_max_turns"),
        "max_tokens": (100000, "runtime.default_budget.max_tokens"),
        "max_llm_calls": (20, "runtime.default_budget.max_llm_calls"),
        "run_timeout": (900.0, "runtime.timeouts.run"),
        "tool_timeout": (120.0, "runtime.timeouts.tool"),
        "http_timeout": (960.0, "runtime.timeouts.http"),
    }
    limits = policy.limits()
    for name, (value, key) in expected.items():
        limit = limits[name]
        assert limit.value == value, name
        assert limit.source == "config.yaml", name
        assert limit.location == f"{file}:{line_of(CONFIG, key)}:{_column(CONFIG, key)}", name
    ceilinged = load().resolve_policy("researcher", {"max_turns": 1000}).limits()["max_turns"]
    assert ceilinged.value == 50
    assert ceilinged.location == f"{file}:{line_of(CONFIG, 'runtime.max_turns_ceiling')}:3"


def _column(text: str, key: str) -> int:
    return position_of(text, key)[1]


def test_the_legacy_tool_timeout_is_the_tool_timeout_when_alone(
    original: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    original.write_config("runtime:\n  tool_timeout: 90s\n")
    kernel = make_kernel()
    assert kernel.config.section("runtime").timeouts.tool == Duration(90)
    loc = kernel.config.source_of("runtime.timeouts.tool")
    assert loc is not None
    assert (loc.line, loc.column) == (2, 3)
    assert kernel.config.warnings == ()


def test_a_legacy_key_shadowed_by_its_new_name_is_a_warning(
    original: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    original.write_config("runtime:\n  tool_timeout: 90s\n  timeouts: {tool: 30s}\n")
    kernel = make_kernel()
    assert kernel.config.section("runtime").timeouts.tool == Duration(30)
    (warning,) = kernel.config.warnings
    assert warning.startswith(f"{original.path / 'config.yaml'}:2:3: runtime.tool_timeout: ")
    assert "runtime.timeouts.tool" in warning


def test_an_unknown_key_that_is_not_original_is_still_an_error(
    original: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    original.write_config(CONFIG.replace("  max_sessions: 10000", "  max_sesions: 10000"))
    with pytest.raises(ConfigError) as info:
        make_kernel()
    (issue,) = info.value.issues
    assert issue.path == "runtime.max_sesions"
    assert "unknown key; did you mean" in issue.message


def test_without_the_original_format_plugin_original_keys_are_errors(
    original: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    original.write_config("log:\n  level: info\n")
    with pytest.raises(ConfigError, match="log: unknown key"):
        make_kernel(plugins=["no:original_format"])


def test_a_provider_whose_type_cannot_be_inferred_says_how_to_name_it(
    original: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    original.write_config("llm:\n  providers:\n    acme:\n      model: m\n")
    with pytest.raises(ConfigError) as info:
        make_kernel()
    (issue,) = info.value.issues
    assert issue.path == "llm.providers.acme.type"
    assert "required key is missing" in issue.message


def test_the_original_graph_workflow_is_kept_whole(
    original: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    original.write_agent(
        "graph",
        "name: g\nworkflow:\n  nodes:\n    - {id: a, type: llm, prompt: hi}\n"
        "  edges:\n    - {from: a, to: end}\n  entry: a\n",
    )
    agent = make_kernel().agent("graph")
    assert agent.section("workflow") is None
    (warning,) = agent.settings.warnings
    assert ":2:1: workflow: " in warning
    assert "not implemented by any loaded plugin" in warning


def test_config_set_of_one_key_leaves_every_other_line_byte_identical(
    original: Workspace, load: Callable[..., Kernel]
) -> None:
    kernel = load()
    path = original.path / "config.yaml"
    before = path.read_bytes()
    assert kernel.update_config({"runtime.default_max_turns": 256}) == ["runtime.default_max_turns"]
    after = path.read_bytes()
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(old) == len(new)
    diff = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert diff == [
        (
            b"  default_max_turns: 20        # the old default, saved by the portal\n",
            b"  default_max_turns: 256       # the old default, saved by the portal\n",
        )
    ]
    # The reloaded file still carries (and warns about) every kept key.
    assert len(load().config.warnings) == len(kernel.config.warnings)


def test_config_set_through_the_cli_keeps_every_other_line(
    original: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    path = original.path / "config.yaml"
    before = path.read_text().splitlines()
    args = ["--workspace", str(original.path)]
    code = main([*args, "config", "set", "llm.default_provider", "ollama"], environ={})
    _out, err = capsys.readouterr()
    assert code == 0, err
    after = path.read_text().splitlines()
    assert [(a, b) for a, b in zip(before, after, strict=True) if a != b] == [
        ("  default_provider: nvidia", "  default_provider: ollama")
    ]
    # An ordinary command says it once, in one line; `config validate` lists each key.
    summary = err
    assert summary.count("soulacy: warning: ") == 1
    assert "`soulacy config validate` lists each with its line" in summary
    code = main([*args, "config", "validate"], environ={})
    _out, err = capsys.readouterr()
    assert code == 0, err
    in_config = [
        line
        for line in err.splitlines()
        if "config.yaml:" in line and "not implemented by any loaded plugin" in line
    ]
    for key in KEPT_CONFIG:
        assert sum(f": {key}: not implemented" in line for line in in_config) == 1, key
    assert f"config.yaml: {len(in_config)} keys of the original format are kept" in summary


def test_the_documented_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/configuration.md, "Keys of the original system": the example there, run as shown."""
    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    block = doc.split("<!-- example: tests/kernel/test_original_workspace.py -->", 1)[1]
    block = block.split("```console\n", 1)[1].split("```", 1)[0]
    commands = re.split(r"^\$ ", block, flags=re.M)[1:]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    shown = "/tmp/orig"
    for command in commands:
        line, _, expected = command.partition("\n")
        if line.startswith("cat "):
            (workspace / line[4:]).write_text(expected)
            continue
        line, _, _ = line.partition("#")
        quiet = line.rstrip().endswith("2>/dev/null")
        argv = line.replace("2>/dev/null", "").split()[1:]
        code = main(["--workspace", str(workspace), *argv], environ={})
        out, err = capsys.readouterr()
        assert code == 0, err
        assert (out if quiet else err + out).replace(str(workspace), shown) == expected


def test_setting_a_new_name_edits_the_old_names_line_in_place(
    original: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    from soulacy.kernel.yamlio import parse_yaml
    from soulacy.plugins.yamledit import apply_changes, dump_round_trip

    text = "llm:\n  default_provider: nvidia   # from the portal\n"
    doc = parse_yaml(text, "config.yaml")
    aliases = {"llm.default_provider": "llm.default.provider"}
    assert apply_changes(doc, {"llm.default.provider": "ollama"}, aliases) == [
        "llm.default_provider"
    ]
    assert dump_round_trip(doc, text) == "llm:\n  default_provider: ollama   # from the portal\n"
    # once the new name is in the file, it is the one edited
    doc = parse_yaml("llm:\n  default_provider: a\n  default: {provider: b}\n", "config.yaml")
    assert apply_changes(doc, {"llm.default.provider": "c"}, aliases) == ["llm.default.provider"]


# -- a workspace as the original wrote it: its first-run template, edited in the portal --------
#
# The shapes of the original's own files: the first-run template's comments and quoting, a
# provider named by the user with only ``base_url`` and ``model`` (no ``type:``), Go's empty
# strings (``api_key: ""`` is "no key, loopback only"), the saved run budgets.

AS_WRITTEN = """\
# Soulacy gateway configuration.
# Generated on first run. Edit freely — the gateway re-reads on restart.
# Docs: https://soulacy.dev/docs/configuration

server:
  host: 127.0.0.1
  port: 18789
  gui_enabled: true
  # Auto-generated on first run. Rotate any time with:
  #   sed -i '' 's/api_key:.*/api_key: "sy_NEWKEY"/' config.yaml
  api_key: ""

runtime:
  max_concurrent_sessions: 100
  default_max_turns: 20
  max_turns_ceiling: 50
  python_bin: "python3"
  tool_timeout: "120s"
  default_budget:
    max_tokens: 100000
    max_llm_calls: 20
  max_budget:
    max_tokens: 1000000
    max_llm_calls: 100
  # Sandbox python tools by default. Set enabled: false to disable.
  sandbox:
    enabled: true
    cpu_seconds: 30
    memory_mb: 512
    open_files: 256
    file_size_mb: 64

llm:
  default_provider: local
  providers:
    local:
      base_url: "http://localhost:11434/v1"
      # Pull this with: ollama pull llama3.3:70b
      model: "llama3.3:70b"
    ollama:
      base_url: "http://localhost:11434"
      api_key: ""
      model: "llama3.3:70b"
  reasoner:
    provider: ""
    model: ""

# RAG defaults — sqlite-vec embedded vector store, Ollama embeddings.
# Knowledge bases are created from the GUI (Knowledge page).
knowledge:
  embedding_provider: ollama
  embedding_model: nomic-embed-text
  chunk_size: 1000
  chunk_overlap: 200

# Channel adapters. http is always on; others are opt-in.
# To enable Telegram: set token + agent_id, then restart.
channels:
  http:
    enabled: true

log:
  level: info
  format: console
"""

AS_WRITTEN_SOUL = """\
id: helper
name: Helper
description: ""
version: ""
system_prompt: "You are a helpful assistant."
llm:
  provider: local
  model: ""
  base_url: ""
max_turns: 12
budget:
  max_tokens: 40000
  max_llm_calls: 8
enabled: true
"""


@pytest.fixture
def as_written(workspace: Workspace) -> Workspace:
    workspace.write_config(AS_WRITTEN)
    workspace.write_agent("helper", AS_WRITTEN_SOUL)
    return workspace


def test_a_workspace_as_the_original_wrote_it_loads(
    as_written: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel()
    providers = kernel.config.section("llm.providers")
    # a provider without type but with a base_url is OpenAI-compatible, at that endpoint
    assert (providers["local"].type, providers["local"].base_url) == (
        "openai",
        "http://localhost:11434/v1",
    )
    assert providers["local"].model == "llama3.3:70b"
    # a known id keeps its inference (ollama's native root becomes its /v1 API)
    assert (providers["ollama"].type, providers["ollama"].base_url) == (
        "openai",
        "http://localhost:11434/v1",
    )
    assert providers["ollama"].api_key is None
    # `api_key: ""` is the original's "no key": keyless, loopback only
    server = kernel.config.section("server")
    assert (server.api_key, server.api_keys) == (None, {})
    assert kernel.providers.model_of(kernel.agent("helper")) == ("local", "llama3.3:70b")


def test_config_validate_accepts_the_workspace_as_written(
    as_written: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--workspace", str(as_written.path), "config", "validate"], environ={})
    out, err = capsys.readouterr()
    assert code == 0, err + out
    assert "required key is missing" not in err + out
    assert "must not be empty" not in err + out


def test_policy_show_gives_the_saved_budgets_with_their_sources(
    as_written: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--workspace", str(as_written.path), "policy", "show", "helper"], environ={})
    out, err = capsys.readouterr()
    assert code == 0, err + out
    config = as_written.path / "config.yaml"
    soul = as_written.path / "agents" / "helper" / "SOUL.yaml"
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.strip()}

    def where(text: str, file: Path, key: str) -> str:
        line, column = position_of(text, key)
        return f"({file}:{line}:{column})"

    assert rows["max_turns"][1:] == ["12", "SOUL.yaml", where(AS_WRITTEN_SOUL, soul, "max_turns")]
    assert rows["max_tokens"][1:] == [
        "40000",
        "SOUL.yaml",
        where(AS_WRITTEN_SOUL, soul, "budget.max_tokens"),
    ]
    assert rows["max_llm_calls"][1:] == [
        "8",
        "SOUL.yaml",
        where(AS_WRITTEN_SOUL, soul, "budget.max_llm_calls"),
    ]
    assert rows["tool_timeout"][1:] == [
        "2m",
        "config.yaml",
        where(AS_WRITTEN, config, "runtime.tool_timeout"),
    ]


def test_the_saved_workspace_budgets_keep_their_values_and_sources(
    as_written: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    as_written.write_agent("plain", 'name: Plain\nsystem_prompt: ""\n')
    kernel = make_kernel()
    file = as_written.path / "config.yaml"
    limits = kernel.resolve_policy("plain").limits()
    for name, value, key in [
        ("max_turns", 20, "runtime.default_max_turns"),
        ("max_tokens", 100000, "runtime.default_budget.max_tokens"),
        ("max_llm_calls", 20, "runtime.default_budget.max_llm_calls"),
        ("tool_timeout", 120.0, "runtime.tool_timeout"),
    ]:
        limit = limits[name]
        line, column = position_of(AS_WRITTEN, key)
        assert (limit.value, limit.source, limit.location) == (
            value,
            "config.yaml",
            f"{file}:{line}:{column}",
        ), name
    asked = {"budget": {"max_tokens": 10**9}}
    capped = kernel.resolve_policy("plain", asked).limits()["max_tokens"]
    line, column = position_of(AS_WRITTEN, "runtime.max_budget.max_tokens")
    assert (capped.value, capped.location) == (1000000, f"{file}:{line}:{column}")


async def test_a_run_through_the_typeless_provider_reaches_an_openai_compatible_server(
    as_written: Workspace, make_kernel: Callable[..., Kernel], nursery: Any
) -> None:
    from _support.openai_server import FakeOpenAI, serve_asgi, text

    server = FakeOpenAI()
    url, shutdown = await serve_asgi(nursery, server.app)
    as_written.write_config(AS_WRITTEN.replace("http://localhost:11434/v1", url + "/v1"))
    server.answers.append(text("Hello from the local model."))
    kernel = make_kernel()
    try:
        result = await kernel.run("helper", "Hi")
    finally:
        await kernel.aclose()
        shutdown.set()
    assert (result.status, result.reply) == ("completed", "Hello from the local model.")
    (request,) = server.requests
    assert request["model"] == "llama3.3:70b"
    assert "authorization" not in server.headers[0]  # no key configured, none sent


@pytest.mark.parametrize(
    ("server", "path"),
    [
        ("api_key: '   '", "server.api_key"),  # blank is not the original's "no key"
        ("api_keys: {alice: ''}", "server.api_keys.alice"),
    ],
)
def test_a_blank_key_or_an_empty_named_key_is_still_refused(
    workspace: Workspace, make_kernel: Callable[..., Kernel], server: str, path: str
) -> None:
    workspace.write_config(f"server:\n  port: 0\n  {server}\n")
    with pytest.raises(ConfigError) as info:
        make_kernel()
    assert path in str(info.value)
    assert "must not be empty or blank" in str(info.value)


def test_a_non_empty_original_key_is_still_the_default_principal(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config('server:\n  port: 0\n  api_key: "sy_0123abcd"\n')
    from soulacy.plugins.http._principals import principal_keys

    server = make_kernel().config.section("server")
    assert principal_keys(server) == {"default": "sy_0123abcd"}
