"""The builtin original-format plugin: files written by the original system keep loading.

A workspace written by the original (Go) system carries keys this runtime implements under
another name or shape, and keys it does not implement at all. This plugin declares both
(``ConfigSection.known``, ``alias`` and ``adapter``; it owns no key):

* handled: ``llm.default_provider`` is ``llm.default.provider``, ``runtime.tool_timeout`` is
  ``runtime.timeouts.tool``, a provider without ``type:`` gets the type its id implies (and the
  endpoint the original used) or, with a ``base_url``, is OpenAI-compatible, ``costs.pricing``
  by model becomes the price list, a tool defined in SOUL.yaml is offered by its name, an MCP
  server's ``transport: streamable-http`` is ``http``, Go's empty strings mean "not set";
* kept: every other key of the original formats stays in the file, has no effect, and is
  reported once as a warning naming its line and "not implemented by any loaded plugin".

Any key that is not one of the original system's stays an error (with a did-you-mean).
Disable the plugin (``-p no:original_format``) to make the original keys errors too.
The key lists follow ``ORIGINAL-FORMAT.md`` (config.yaml section 1, SOUL.yaml section 2);
see docs/configuration.md and decision 0017.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soulacy.kernel import DROP, ConfigSection, Keep, KeyPath, Scope, hookimpl

__all__ = ["ANTHROPIC_IDS", "OPENAI_COMPATIBLE", "infer_provider"]

# -- config.yaml ------------------------------------------------------------------------------

# Top-level keys of the original config.yaml that no builtin plugin implements. The sections
# this runtime does implement are listed too: they are kept, not refused, when their plugin is
# disabled.
WORKSPACE_TOP = {
    "schema_version": "",
    "memory": "the original memory layer",
    "search": "the original web_search tool",
    "knowledge": "the original RAG store",
    "storage": "the store is the sqlite_store plugin's `store:`",
    "vector": "",
    "executor": "",
    "queue": "",
    "auth": "bearer tokens are `server.api_keys`",
    "credentials": "",
    "telemetry": "",
    "ops": "",
    "deployment": "",
    "security": "",
    "updates": "",
    "hooks": "",
    "voice": "",
    "packages": "",
    "channels": "",
    "plugin_dirs": "plugins are Python packages; see docs/plugins.md",
    "plugins_config": "",
    "registries": "",
    "agent_dirs": "agents live in the workspace's agents/ folder",
    "skill_dirs": "",
    "ui": "",
    "log": "",
    "signup": "",
    "billing": "",
    # sections that builtin plugins own, kept when that plugin is disabled
    "server": "",
    "runtime": "",
    "costs": "",
    "mcp": "",
    "rate_limit": "",
    "llm.studio": "",
    "llm.reasoner": "",
}
WORKSPACE_NESTED = {
    "server.gui_enabled": "the original web portal",
    "server.gui_static_dir": "the original web portal",
    "server.tls_cert": "terminate TLS in a reverse proxy",
    "server.tls_key": "terminate TLS in a reverse proxy",
    "server.allow_unauthenticated": "",
    "runtime.max_agent_call_depth": "",
    "runtime.python_bin": "tools run in the runtime's own Python",
    "runtime.allow_system_agents": "",
    "runtime.ssrf_protection": "",
    "runtime.allow_private_hosts": "",
    "runtime.filesystem_roots": "",
    "runtime.allowed_tool_dirs": "",
    "runtime.audit_dir": "",
    "runtime.adaptive_nodes": "",
    "runtime.session_ttl": "",
    "runtime.max_sessions": "",
    "runtime.max_history_turns": "",
    "runtime.retention": "",
    "runtime.sandbox": "",
    "llm.providers.*.keep_alive": "",
    "llm.providers.*.request_timeout": "",
    "llm.providers.*.prompt_caching": "",
    "llm.providers.*.thinking_budget": "",
    "llm.providers.*.safety_level": "",
    "llm.providers.*.extended_thinking": "",
    "llm.providers.*.organization": "",
    "llm.providers.*.parallel_tool_calls": "",
    "llm.studio.provider": "",
    "llm.studio.model": "",
    "llm.studio.learning": "",
    "llm.studio.preset": "",
    "llm.studio.build_ux": "",
    "costs.daily_budget_usd": "the daily dollar budget is `costs.max_daily_cost_usd`",
    "costs.monthly_budget_usd": "",
    "costs.alert_threshold": "",
    "costs.enforcement_mode": "",
    "costs.quota": "",
    "costs.quotas": "",
    "rate_limit.enabled": "token quotas are `rate_limit.tokens_per_minute`/`_hour`/`_day`",
    "rate_limit.per_user_rpm": "",
    "rate_limit.per_agent_rpm": "",
    "rate_limit.per_user_tokens_day": "",
    "rate_limit.per_agent_tokens_day": "",
    "rate_limit.backend": "",
    "rate_limit.redis_url": "",
}

# Provider ids of the original whose API is OpenAI-compatible, with the endpoint it used.
OPENAI_COMPATIBLE: Mapping[str, str | None] = {
    "openai": None,  # the openai plugin's default endpoint
    "ollama": "http://localhost:11434/v1",
    "nvidia": "https://integrate.api.nvidia.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "groq": "https://api.groq.com/openai/v1",
    "together": "https://api.together.xyz/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "mistral": "https://api.mistral.ai/v1",
    "xai": "https://api.x.ai/v1",
    "fireworks": "https://api.fireworks.ai/inference/v1",
    "cerebras": "https://api.cerebras.ai/v1",
    "perplexity": "https://api.perplexity.ai",
    "google": "https://generativelanguage.googleapis.com/v1beta/openai",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai",
    "lmstudio": "http://localhost:1234/v1",
    "vllm": "http://localhost:8000/v1",
}
ANTHROPIC_IDS = frozenset({"anthropic", "claude"})  # the contrib anthropic plugin's type


def infer_provider(provider_id: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """A provider entry of the original (no ``type:``, typed by its id) in this runtime's shape.

    An id the original knew gets its type (and the endpoint the original used); any other id
    with a ``base_url`` is OpenAI-compatible at that endpoint, the original's way to name a
    local model server or a gateway under an id of the user's choosing. An unknown id without
    ``base_url`` is left without a type: that stays an error asking for ``type:``.
    """
    out = {k: v for k, v in entry.items() if not (isinstance(v, str) and v == "")}
    if "type" in out:
        return out
    name = provider_id.lower()
    if name in ANTHROPIC_IDS:
        out["type"] = "anthropic"
    elif name in OPENAI_COMPATIBLE:
        out["type"] = "openai"
        base = out.get("base_url")
        if base is None and OPENAI_COMPATIBLE[name] is not None:
            out["base_url"] = OPENAI_COMPATIBLE[name]
        elif name == "ollama" and isinstance(base, str) and not base.rstrip("/").endswith("/v1"):
            # The original spoke Ollama's native API at the server's root; this runtime speaks
            # its OpenAI-compatible API, which Ollama serves under /v1.
            out["base_url"] = base.rstrip("/") + "/v1"
    elif isinstance(out.get("base_url"), str):
        out["type"] = "openai"
    return out


def _provider(value: Any, path: KeyPath, keep: Keep) -> Any:
    if not isinstance(value, Mapping):
        return value
    return infer_provider(str(path[-1]), value)


def _pricing(value: Any, path: KeyPath, keep: Keep) -> Any:
    """``pricing: {MODEL: {input_per_mtok, output_per_mtok, …}}`` -> the list of prices."""
    if not isinstance(value, Mapping):
        return value
    prices = []
    for model, price in value.items():
        if not isinstance(price, Mapping):
            prices.append(price)  # the converter says what is wrong with it
            continue
        entry = {"model": str(model)}
        for key, rate in price.items():
            if key in ("input_per_mtok", "output_per_mtok", "provider", "model"):
                entry[key] = rate
            elif rate not in (None, "", 0):
                keep((model, key), "")
        prices.append(entry)
    return prices


# The original's spellings of an MCP server's transport; this runtime's are stdio and http.
MCP_TRANSPORTS = {"streamable-http": "http", "streamable_http": "http", "streamablehttp": "http"}


def _mcp_server(value: Any, path: KeyPath, keep: Keep) -> Any:
    """``mcp.servers.<id>``: Go's empty strings are unset, a streamable HTTP transport is
    ``http``."""
    value = _without_empty_strings(value, ("transport", "command", "url", "cwd"))
    if isinstance(value, Mapping) and value.get("transport") in MCP_TRANSPORTS:
        value = {**value, "transport": MCP_TRANSPORTS[value["transport"]]}
    return value


# -- SOUL.yaml --------------------------------------------------------------------------------

AGENT_TOP = {
    "version": "",
    "tags": "",
    "labels": "",
    "kind": "",
    "routes": "",
    "surfaces": "",
    "trigger": "",
    "channels": "",
    "webhook": "",
    "identity": "",
    "personality": "",
    "non_negotiables": "",
    "skills": "",
    "knowledge": "",
    "agents": "",
    "parallel_peer_calls": "",
    "structured_peer_results": "",
    "builtins": "",
    "plugin_tools": "",
    "system_tools": "",
    "allow_shell": "",
    "capabilities": "",
    "env": "",
    "confirm_tools": "",
    "unattended": "",
    "policy": "",
    "security": "",
    "execution": "",
    "dry_run": "",
    "memory": "",
    "brain_memory": "",
    "learning": "",
    "stream_reply": "",
    "notify_on_failure": "",
    "hooks": "",
    "tool_schemas": "",
    "studio_*": "",
    # keys that builtin plugins own, kept when that plugin is disabled
    "max_turns": "",
    "budget": "",
    "mcp_servers": "",
    "mcp_tools": "",
    "run_timeout": "",
    "reasoning": "",
    "schedule": "",
    "workflow": "",
    "outcome": "",
}
AGENT_NESTED = {
    "llm.base_url": "the endpoint is the provider's, under llm.providers in config.yaml",
    "llm.response_format": "",
    "llm.reasoning_effort": "",
    "llm.presence_penalty": "",
    "llm.frequency_penalty": "",
    "llm.output_schema": "",
    "llm.allowed_models": "",
    "llm.data_classification": "",
    "schedule.at": "one-shot schedules",
    "schedule.output": "delivery to a channel; `output:` here names a file in the workspace",
    "reasoning.backend": "",
    "reasoning.max_plan_steps": "",
    "reasoning.max_parallel_steps": "",
    "reasoning.think": "",
    "reasoning.plan": "",
    "reasoning.reflect": "",
    "reasoning.contract": "",
    "workflow.output": "",
    "workflow.max_node_executions": "",
    "workflow.steps.*.if": "",
    "workflow.steps.*.on_error": "",
    "workflow.steps.*.output": "",
    "outcome.mission": "",
}
TOOL_DEFINITION = (
    "a tool defined in SOUL.yaml (python_file, inline, parameters, …); only its name is used,"
    " so a plugin must provide a tool of that name"
)


def _without_empty_strings(value: Any, keys: Sequence[str]) -> Any:
    """Go wrote unset strings as ``""``; here unset is absent."""
    if not isinstance(value, Mapping):
        return value
    return {k: v for k, v in value.items() if not (k in keys and v == "")}


def _tools(value: Any, path: KeyPath, keep: Keep) -> Any:
    if not isinstance(value, list):
        return value
    out = []
    for index, item in enumerate(value):
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            keep((index,), TOOL_DEFINITION)
            out.append(item["name"])
        else:
            out.append(item)
    return out


def _agent_llm(value: Any, path: KeyPath, keep: Keep) -> Any:
    return _without_empty_strings(value, ("provider", "model", "tool_choice"))


def _reasoning(value: Any, path: KeyPath, keep: Keep) -> Any:
    return _without_empty_strings(value, ("strategy",))  # "" was the classic tool loop


def _schedule(value: Any, path: KeyPath, keep: Keep) -> Any:
    value = _without_empty_strings(value, ("cron", "at", "timeout", "missed_startup_window"))
    if isinstance(value, Mapping) and "cron" not in value and value.get("at"):
        keep((), "a one-shot schedule (`at:`); schedules here are cron expressions")
        return DROP
    return value


def _workflow(value: Any, path: KeyPath, keep: Keep) -> Any:
    if not isinstance(value, Mapping):
        return value
    if "edges" in value or "entry" in value:
        keep((), "the original graph form (nodes, edges, entry); graphs here use nodes' `next`")
        return DROP
    steps = value.get("steps")
    if not isinstance(steps, list):
        return value
    fields = ("tool", "prompt", "if", "on_error", "input", "output")
    adapted = []
    for index, step in enumerate(steps):
        step = _without_empty_strings(step, fields)
        if isinstance(step, Mapping) and "tool" in step and "input" in step:
            # The original's input was a template producing the tool's JSON arguments.
            keep(("steps", index, "input"), "a template of the tool's arguments; use `arguments`")
            step = {k: v for k, v in step.items() if k != "input"}
        adapted.append(step)
    return {**value, "steps": adapted}


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    declared: list[ConfigSection] = [
        ConfigSection.alias("llm.default_provider", "llm.default.provider"),
        ConfigSection.alias("runtime.tool_timeout", "runtime.timeouts.tool"),
        ConfigSection.adapter("llm.providers.*", _provider),
        ConfigSection.adapter("costs.pricing", _pricing),
        ConfigSection.adapter("mcp.servers.*", _mcp_server),
        ConfigSection.adapter("tools", _tools, "agent"),
        ConfigSection.adapter("llm", _agent_llm, "agent"),
        ConfigSection.adapter("reasoning", _reasoning, "agent"),
        ConfigSection.adapter("schedule", _schedule, "agent"),
        ConfigSection.adapter("workflow", _workflow, "agent"),
    ]
    lists: tuple[tuple[Mapping[str, str], Scope], ...] = (
        (WORKSPACE_TOP, "workspace"),
        (WORKSPACE_NESTED, "workspace"),
        (AGENT_TOP, "agent"),
        (AGENT_NESTED, "agent"),
    )
    for keys, scope in lists:
        declared.extend(ConfigSection.known(key, scope, doc=doc) for key, doc in keys.items())
    return declared
