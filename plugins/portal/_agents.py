"""Reading, creating and editing agents for the portal's editor: changed fields only, merged
into SOUL.yaml by the round-trip editing ``PATCH /config`` uses for config.yaml (the kernel's
``apply_changes``): comments, key order, quoting and every line of a key the change does not
touch stay byte-for-byte; validated exactly as loading would before anything is written."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from soulacy.kernel import (
    AGENT_FILE,
    AGENTS_DIR,
    AgentSpec,
    ConfigError,
    ConfigSection,
    Kernel,
    UsageError,
    redact,
    structure,
)

# The one merge of the editors over HTTP (Settings' PATCH /config uses it for config.yaml).
from soulacy.kernel.yamlio import parse_yaml, plain
from soulacy.plugins.http import HttpError
from soulacy.plugins.yamledit import apply_changes as _merge
from soulacy.plugins.yamledit import atomic_write, dump_round_trip

MAX_INT = 2**53  # the largest integer a JSON reader (the browser) keeps exactly
AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# Durations the API takes: hours, minutes, seconds (with a fraction), milliseconds, in that
# order, or "0"; at most 99999h + 999999m + 999999.999999999s + 999999ms, within the
# configuration's 100 years. The OpenAPI document has the same pattern.
DURATION = re.compile(r"0|([0-9]{1,5}h)?([0-9]{1,6}m)?([0-9]{1,6}(\.[0-9]{1,9})?s)?([0-9]{1,6}ms)?")
OPERATORS = (  # the workflows plugin's builtin assertion operators
    *("eq", "ne", "gt", "ge", "lt", "le", "contains", "not_contains", "matches", "in"),
    *("exists", "truthy"),
)
# Original-system keys about permissions: shown in Permissions; those no loaded plugin implements
# are kept in SOUL.yaml with no effect and never written, the others are edited as their own
# fields (``confirm_tools``: the approvals plugin's).
PERMISSION_KEYS = (
    *("system_tools", "allow_shell", "capabilities", "env", "confirm_tools", "unattended"),
    *("policy", "security", "execution", "dry_run", "builtins", "mcp_servers", "mcp_tools"),
)


@attrs.frozen
class LlmChanges:
    provider: str | None = None
    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    tool_choice: str | None = None


@attrs.frozen
class BudgetChanges:
    max_tokens: int | None = None
    max_llm_calls: int | None = None


@attrs.frozen
class ReasoningChanges:
    strategy: Literal["react", "plan_execute"] | None = None
    max_steps: int | None = None
    step_timeout: str | None = None
    total_timeout: str | None = None


@attrs.frozen
class AssertionChange:
    target: str
    op: Literal[
        "eq",
        "ne",
        "gt",
        "ge",
        "lt",
        "le",
        "contains",
        "not_contains",
        "matches",
        "in",
        "exists",
        "truthy",
    ] = "eq"
    value: Any = None
    describe: str = ""


@attrs.frozen
class OutcomeChanges:
    assertions: list[AssertionChange] | None = None
    enforce: Literal["report", "fail"] | None = None
    goal: str | None = None


@attrs.frozen
class AgentChanges:
    """What ``PATCH /agents/{agent_id}`` takes (and ``POST /agents`` besides the id): absent
    keys are left alone, ``null`` removes a key (it inherits again)."""

    name: str | None = None
    description: str | None = None
    system_prompt: str | None = None
    enabled: bool | None = None
    tools: list[str] | None = None
    llm: LlmChanges | None = None
    max_turns: int | None = None
    budget: BudgetChanges | None = None
    run_timeout: str | None = None
    no_progress_limit: int | None = None
    reasoning: ReasoningChanges | None = None
    outcome: OutcomeChanges | None = None
    confirm_tools: list[str] | None = None


# Fields of AgentChanges that only mean something while a loaded plugin implements the key.
PLUGIN_KEYS = {"confirm_tools": "approvals"}


@attrs.frozen
class AgentPatch:
    changes: dict[str, Any]


@attrs.frozen
class NewAgent:
    name: str | None = None
    description: str | None = None
    system_prompt: str | None = None
    llm: LlmChanges | None = None
    tools: list[str] | None = None


def _bad(field: str, message: str) -> HttpError:
    return HttpError(422, "invalid request body", {field: message})


def _structure(data: Any, type_: Any, key: str) -> Any:
    if not isinstance(data, dict):
        raise _bad(key, "expected a JSON object")
    try:
        return structure(data, type_, origin="request", key=key)
    except ConfigError as exc:
        raise HttpError(
            422,
            "invalid request body",
            {issue.path.removeprefix("body.") or key: issue.message for issue in exc.issues},
        ) from None


def _check_ranges(changes: Mapping[str, Any], prefix: str) -> None:
    """What a type does not say: ranges, the duration form, scalar assertion values; every
    field that breaks one is named at once (422), not only the first."""
    problems: dict[str, str] = {}

    def at(*parts: str) -> Any:
        node: Any = changes
        for part in parts:
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    ranges = {
        ("max_turns",): (-1, MAX_INT),
        ("no_progress_limit",): (0, MAX_INT),
        ("budget", "max_tokens"): (0, MAX_INT),
        ("budget", "max_llm_calls"): (0, MAX_INT),
        ("llm", "max_tokens"): (0, MAX_INT),
        ("llm", "temperature"): (0, 2),
        ("llm", "top_p"): (0, 1),
        ("reasoning", "max_steps"): (-1, MAX_INT),
    }
    for path, (low, high) in ranges.items():
        value = at(*path)
        if value is not None and not low <= value <= high:
            problems[prefix + ".".join(path)] = f"expected {low} to {high}"
    for path in (("run_timeout",), ("reasoning", "step_timeout"), ("reasoning", "total_timeout")):
        value = at(*path)
        if value is not None and (not value or not DURATION.fullmatch(value)):
            problems[prefix + ".".join(path)] = (
                'expected a duration such as "90s", "15m", "1h30m" or "0" (no deadline)'
            )
    for index, name in enumerate(at("confirm_tools") or ()):
        if not name.strip():
            problems[f"{prefix}confirm_tools.{index}"] = "expected a tool name"
    for index, item in enumerate(at("outcome", "assertions") or ()):
        if isinstance(item, Mapping) and not _scalar_value(item.get("value")):
            problems[f"{prefix}outcome.assertions.{index}.value"] = (
                "expected a string, number, boolean, null or a list of them"
            )
        if isinstance(item, Mapping) and not item.get("target"):
            problems[f"{prefix}outcome.assertions.{index}.target"] = "expected a target"
    if problems:
        raise HttpError(422, "invalid request body", problems)


def _scalar_value(value: Any, nested: bool = False) -> bool:
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return -MAX_INT <= value <= MAX_INT
    if isinstance(value, float):
        return math.isfinite(value) and -MAX_INT <= value <= MAX_INT
    if isinstance(value, list) and not nested:
        return all(_scalar_value(v, True) for v in value)
    return False


INTEGER_PATHS = (
    ("max_turns",),
    ("no_progress_limit",),
    ("budget", "max_tokens"),
    ("budget", "max_llm_calls"),
    ("llm", "max_tokens"),
    ("reasoning", "max_steps"),
)


def _integers(data: Any) -> Any:
    """``5.0`` where an integer is expected is the integer 5, as JSON Schema reads it (the
    configuration's converter, stricter, takes only ``5``)."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for path in INTEGER_PATHS:
        node = out
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                break
            node[part] = child = dict(child)
            node = child
        else:
            value = node.get(path[-1])
            if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_INT:
                node[path[-1]] = int(value)
    return out


def parse_changes(data: Any, key: str = "changes") -> dict[str, Any]:
    """The changes of a request, type-checked (unknown keys refused): a plain mapping."""
    data = _integers(data)
    _structure(data, AgentChanges, key)
    _check_ranges(data, key + ".")
    return dict(data)


# -- editing ------------------------------------------------------------------------------------


def apply_changes(doc: CommentedMap, changes: Mapping[str, Any]) -> list[str]:
    """Make ``doc`` say what ``changes`` say, in place; returns the dotted keys that changed.
    Sections merge member by member, ``None`` removes a key (it inherits again), lists
    replace; a section emptied by removals goes with them."""
    return _merge(doc, changes, null_removes=True)


def agent_file(kernel: Kernel, agent_id: str) -> Path:
    return kernel.workspace / AGENTS_DIR / agent_id / AGENT_FILE


def _forget(kernel: Kernel, agent_id: str) -> None:
    """Drop the kernel's loaded copy of an agent so that its next run reads the new file."""
    kernel.forget_agent(agent_id)


def _save(
    kernel: Kernel,
    agent_id: str,
    doc: CommentedMap,
    text: str,
    script: tuple[str, str] | None = None,
) -> None:
    """Validate ``doc`` as loading would, then write it atomically (nothing on error), with
    the starter ``script`` (a path in the workspace and its text) of a new scripted agent."""
    path = agent_file(kernel, agent_id)
    new_text = dump_round_trip(doc, text, keep_unchanged_text=True)
    reread = parse_yaml(new_text, str(path))
    if plain(reread) != plain(doc):  # never write what would read back otherwise
        raise HttpError(
            422, "invalid agent; nothing was saved", {"body": "not representable in YAML"}
        )
    try:
        spec = kernel.check_agent(agent_id, reread, path)
    except ConfigError as exc:
        raise HttpError(
            422,
            "invalid agent; nothing was saved",
            {issue.path: issue.message for issue in exc.issues},
        ) from None
    _check_provider(kernel, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    if script is not None and not (kernel.workspace / script[0]).exists():
        atomic_write(kernel.workspace / script[0], script[1])
    atomic_write(path, new_text)
    _forget(kernel, agent_id)


def _check_provider(kernel: Kernel, spec: AgentSpec) -> None:
    """A provider the agent names must exist: an agent saved with a misspelt one would fail
    every chat (a provider it does not name is the workspace default's, checked where it is
    set)."""
    name = getattr(spec.section("llm"), "provider", None)
    if not name:
        return
    try:
        kernel.providers.config(name)
    except UsageError as exc:
        raise HttpError(
            422, "invalid agent; nothing was saved", {"llm.provider": str(exc)}
        ) from None


def _check_trust_root(
    kernel: Kernel, agent_id: str, changes: Mapping[str, Any], saved: Any, prefix: str
) -> None:
    """Refuse, naming each field, what only SOUL.yaml edited by hand may say: the trust root
    the loaded plugins declare (which code the agent's ``tools:`` run)."""
    refused = ConfigSection.trust_root_changes(
        kernel.sections,
        changes,
        "agent",
        saved=saved if isinstance(saved, Mapping) else {},
        kernel=kernel,
        agent_id=agent_id,
    )
    if refused:
        raise HttpError(
            422,
            "invalid agent; nothing was saved",
            {prefix + key: why for key, why in sorted(refused.items())},
        )


def implemented_by(kernel: Kernel) -> dict[str, str]:
    """Each SOUL.yaml key a loaded plugin implements, with that plugin's name."""
    return {
        owned.section.key: owned.plugin
        for owned in kernel.sections
        if owned.section.scope == "agent" and owned.section.owns
    }


def _check_implemented(kernel: Kernel, changes: Mapping[str, Any], prefix: str) -> None:
    """Refuse a change of a key no loaded plugin implements: it would be saved with no effect."""
    implemented = implemented_by(kernel)
    for key, plugin in PLUGIN_KEYS.items():
        if key in changes and key not in implemented:
            raise _bad(
                prefix + key,
                f"not implemented by any loaded plugin (the {plugin} plugin implements it):"
                " it would be kept with no effect; nothing was saved",
            )


def update_agent(kernel: Kernel, agent_id: str, changes: Mapping[str, Any]) -> list[str]:
    path = agent_file(kernel, agent_id)
    text = path.read_text(encoding="utf-8")
    doc = parse_yaml(text, str(path))
    _check_implemented(kernel, changes, "changes.")
    _check_trust_root(kernel, agent_id, changes, plain(doc), "changes.")
    changed = apply_changes(doc, changes)
    script = None
    llm = doc.get("llm")
    if "llm.provider" in changed and isinstance(llm, Mapping) and llm.get("provider"):
        # A scripted provider chosen here without a script: the agent gets one, so that its
        # next chat answers (an unknown provider is refused by _save).
        from ._providers import unknown_provider

        if unknown_provider(kernel, llm["provider"]) is None:
            script = _stand_in(kernel, agent_id, llm["provider"], llm.get("model"))
        if script is not None:
            changed += apply_changes(doc, {"llm": {"model": script[0]}})
    if changed:
        _save(kernel, agent_id, doc, text, script)
    return changed


def create_agent(kernel: Kernel, agent_id: str, data: Any) -> list[str]:
    """A new agent: the workspace provider and its default model, no limits (it inherits the
    workspace policy), no ``top_p`` (left to the provider); then what the request says. An
    existing agent is never replaced (409): it is changed with ``PATCH``."""
    if not AGENT_ID.fullmatch(agent_id):
        raise HttpError(
            422,
            "invalid agent id",
            {"agent_id": "expected 1-64 letters, digits, '-' and '_', the first not '-' or '_'"},
        )
    data = _integers(data)
    _structure(data, NewAgent, "body")
    _check_ranges(data, "")
    if (kernel.workspace / AGENTS_DIR / agent_id).exists():
        raise HttpError(409, f"agent {agent_id!r} already exists")
    _check_trust_root(kernel, agent_id, data, {}, "")
    default = kernel.config.values.get("llm.default")  # the providers plugin's, if loaded
    llm = {k: v for k in ("provider", "model") if (v := getattr(default, k, None))}
    asked = data.get("llm") or {}
    llm.update({k: v for k in ("provider", "model") if (v := asked.get(k))})
    script = _starter_script(kernel, agent_id, llm, from_default="provider" not in asked)
    doc = CommentedMap()
    doc["id"] = agent_id
    doc["name"] = agent_id
    doc["description"] = ""
    doc["system_prompt"] = "You are a helpful assistant."
    apply_changes(doc, {"llm": llm})
    doc["tools"] = CommentedSeq()
    apply_changes(doc, data)
    if script is not None:
        apply_changes(doc, {"llm": {"model": script[0]}})
    _save(kernel, agent_id, doc, "", script)
    return sorted(doc)


STARTER_SCRIPT = (
    "# The scripted model plays these replies in order (docs/providers.md): a stand-in until\n"
    "# the agent is given a real provider in its editor.\n"
    "steps:\n"
    "  - text: >-\n"
    "      Hello: I am {agent_id}, on the scripted model. I answer from {path},\n"
    "      not from a language model: choose a provider in my editor for real answers.\n"
    "repeat: true\n"
)


def _starter_script(
    kernel: Kernel, agent_id: str, llm: dict[str, Any], from_default: bool
) -> tuple[str, str] | None:
    """Check the provider a new agent would be written with (an agent is never written with a
    provider that does not exist, nor with none); for the scripted type without a script, the
    script it will play (its path and text), so that its first chat answers."""
    from ._providers import known_providers, unknown_provider

    name = llm.get("provider")
    if not name:
        choices = ", ".join(known_providers(kernel)) or "none"
        raise _bad(
            "llm.provider",
            "no workspace provider is set (Settings: Workspace provider, llm.default.provider):"
            f" choose this agent's provider ({choices}); nothing was saved",
        )
    why = unknown_provider(kernel, name)
    if why is not None:
        if from_default:
            why = (
                f"the workspace provider {name!r} (llm.default.provider) does not exist: correct"
                " it in Settings, or choose this agent's provider; " + why.split("; ", 1)[-1]
            )
        raise _bad("llm.provider", why)
    return _stand_in(kernel, agent_id, name, llm.get("model"))


def _stand_in(
    kernel: Kernel, agent_id: str, provider: str, model: str | None
) -> tuple[str, str] | None:
    """The starter script (path, text) of an agent on a scripted provider that names no
    script, or None (another provider, or a script named here, by its entry or the default)."""
    config = kernel.providers.config(provider)
    default = kernel.config.values.get("llm.default")
    if model or config.type != "scripted" or config.model or getattr(default, "model", None):
        return None
    path = f"{AGENTS_DIR}/{agent_id}/script.yaml"
    return path, STARTER_SCRIPT.format(agent_id=agent_id, path=path)


# -- reading ------------------------------------------------------------------------------------


def _relative(kernel: Kernel, location: str) -> str:
    root = str(kernel.workspace) + "/"
    return location[len(root) :] if location.startswith(root) else location


def _policy(kernel: Kernel, agent_id: str) -> dict[str, Any]:
    try:
        policy = kernel.resolve_policy(agent_id).to_dict()
        for limit in policy.values():
            if isinstance(limit, dict) and isinstance(limit.get("location"), str):
                limit["location"] = _relative(kernel, limit["location"])
        return {"policy": policy, "policy_error": None}
    except Exception as exc:  # a provider that cannot be asked: the editor still opens
        return {"policy": {}, "policy_error": _relative(kernel, str(exc))}


def _provider_error(kernel: Kernel, spec: AgentSpec) -> str | None:
    """Why a run of the agent would fail for want of a provider (none, or one that does not
    exist, such as a misspelt workspace provider copied into it), or None."""
    from ._providers import unknown_provider

    default = kernel.config.values.get("llm.default")
    name = getattr(spec.section("llm"), "provider", None) or getattr(default, "provider", None)
    if name:
        why = unknown_provider(kernel, name)
        if why:
            return why.removesuffix("; nothing was saved")
    try:
        kernel.providers.model_of(spec)
    except Exception as exc:  # names none, and no workspace provider is set
        return str(exc).replace(str(kernel.workspace) + "/", "")
    return None


def describe_agent(kernel: Kernel, agent_id: str) -> dict[str, Any]:
    """What the editor shows: the saved document, where each key is set, the resolved policy
    with its sources, the tools plugins offer, and the kept keys of the original system."""
    spec = kernel.agent(agent_id)
    implemented = implemented_by(kernel)
    path = agent_file(kernel, agent_id)
    document = plain(parse_yaml(path.read_text(encoding="utf-8"), str(path)))
    contributed = []
    for tools in kernel.hook.soulacy_tools(kernel=kernel, agent_id=agent_id, agent=None):
        for tool in tools or ():
            contributed.append(
                {"name": tool.listed_as or tool.name, "description": tool.description}
            )
    return {
        "agent_id": agent_id,
        "file": _relative(kernel, str(path)),
        "document": redact(document),
        "set": {
            key: _relative(kernel, str(loc)) for key, loc in spec.settings.sources.locations.items()
        },
        "kept": [
            {"path": k.path, "location": _relative(kernel, str(k.location))}
            for k in spec.settings.kept
        ],
        # kept with no effect: the permission keys no loaded plugin implements
        "permissions": {
            k: redact(document[k], k)
            for k in PERMISSION_KEYS
            if k in document and k not in implemented
        },
        # in effect: those a loaded plugin implements (confirm_tools has a field of its own)
        "permissions_in_effect": {
            k: redact(document[k], k) for k in PERMISSION_KEYS if k in document and k in implemented
        },
        "implemented_by": implemented,
        **_policy(kernel, agent_id),
        "provider_error": _provider_error(kernel, spec),
        "tools_available": sorted(contributed, key=lambda t: t["name"]),
    }
