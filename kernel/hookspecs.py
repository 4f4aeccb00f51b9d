"""Every hook of the Soulacy kernel, grouped by concern.

Conventions, as in pytest and pluggy:

* hooks are called with keyword arguments, and an implementation may accept only the arguments it
  needs, so a hook can gain arguments without breaking plugins;
* ``firstresult`` hooks answer "who handles this": the first non-``None`` result wins, so a plugin
  that wants to replace a builtin implements the hook with ``tryfirst=True`` or blocks the builtin
  (``-p no:NAME``);
* the other hooks collect contributions: the kernel gets a list with one result per plugin;
* hooks are synchronous and cheap; asynchronous work lives in the objects they return (stores,
  providers, services), which the kernel drives in its nursery. Where a hook says so, the kernel
  awaits results that are awaitable ("await me maybe"), so those hooks may be ``async def``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from ._cli import CliCommand
    from ._config import ConfigSection, Settings
    from ._engine import Run, Verification
    from ._errors import ConfigIssue
    from ._events import Event
    from ._kernel import AgentSpec, Kernel, Service
    from ._providers import ProviderType
    from ._tools import Tool

hookspec = pluggy.HookspecMarker("soulacy")
hookimpl = pluggy.HookimplMarker("soulacy")


# --------------------------------------------------------------------------------------------
# Plugin management
# --------------------------------------------------------------------------------------------


@hookspec(historic=True)
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add hook specifications of a plugin's own, with ``pluginmanager.add_hookspecs(module)``.

    Called once for every plugin as it is registered, even plugins registered late (historic), so
    that plugins can define hooks for other plugins to implement.
    """


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_config_sections() -> Sequence[ConfigSection]:
    """Declare the configuration keys this plugin owns, in config.yaml or in SOUL.yaml.

    Called while the kernel loads, before any configuration is read. Returns a list of
    :class:`~soulacy.kernel.ConfigSection`; every plugin's list is collected. Two plugins claiming
    the same key is an error that names both. Keys nobody claims are errors (with a did-you-mean),
    except keys of the original file format, which are warnings.
    """


@hookspec
def soulacy_configure(kernel: Kernel) -> None:
    """The configuration is loaded and valid: read your sections from ``kernel.config``.

    Called once per kernel, after every plugin is registered and all configuration has been
    validated, before any service starts. Every implementation is called.
    """


@hookspec
def soulacy_validate_config(kernel: Kernel, config: Settings) -> Sequence[ConfigIssue]:
    """Check rules that span keys (such as the order of timeouts) in a structured config.yaml.

    Called when the kernel loads and before ``update_config`` writes anything; every plugin's
    issues are collected and reported together as one ``ConfigError``. Use
    ``config.source_of(path)`` to point an issue at its line.
    """


@hookspec
def soulacy_validate_agent(kernel: Kernel, agent: AgentSpec) -> Sequence[ConfigIssue]:
    """Check rules that span keys of one SOUL.yaml. Every plugin's issues are collected."""


# --------------------------------------------------------------------------------------------
# Execution policy resolution
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_resolve_policy(kernel: Kernel, agent_id: str, overrides: Any) -> Any:
    """Resolve the execution policy of a run of ``agent_id`` with request ``overrides``.

    Returns an ``ExecutionPolicy`` in which every value carries its source; the first non-None
    result wins. A plugin that tightens the builtin policy implements this hook as a wrapper
    (``@hookimpl(wrapper=True)``), receives the resolved policy from ``yield`` and returns a new
    one.
    """


# --------------------------------------------------------------------------------------------
# Model providers
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_provider_types() -> Sequence[ProviderType]:
    """Contribute kinds of model provider (``openai``, ``scripted`` …) as ``ProviderType``s.

    Every plugin's list is collected; a name taken twice is an error naming both plugins. An
    entry of ``llm.providers`` in config.yaml picks its kind with ``type:``; an agent may also
    name a kind directly (``llm: {provider: scripted}``) to use it with its defaults.
    """


@hookspec(firstresult=True)
def soulacy_model_capacity(kernel: Kernel, provider: str | None, model: str | None) -> Any:
    """Return the ``ModelCapacity`` (context window, output tokens) of a provider's model, or
    None when unknown. The execution policy never grants more than this. First result wins.
    """


@hookspec(firstresult=True)
def soulacy_price(kernel: Kernel, provider: str, model: str | None, usage: Any) -> float | None:
    """The price in US dollars of one model call's ``usage`` (a ``Usage``), or None when no
    price is known. Called after every model call; the first non-None answer wins.
    """


# --------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_tools(kernel: Kernel, agent_id: str) -> Sequence[Tool]:
    """Contribute tools by name for agent ``agent_id``. Every plugin's list is collected.

    An agent is offered exactly the tools its SOUL.yaml ``tools:`` lists: names of contributed
    tools, or ``file.py:function`` references to Python files beside the agent.
    """


@hookspec(firstresult=True)
def soulacy_tool_permission(kernel: Kernel, agent_id: str, tool_name: str, arguments: Any) -> Any:
    """Decide whether a tool call may run: ``True``, ``False``, or ``None`` to let others decide.

    Called before every tool call; the first non-None answer wins; with no answer the call runs.
    """


# --------------------------------------------------------------------------------------------
# Budgets and accounting
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_usage(kernel: Kernel, run: Run, provider: str, model: str | None, usage: Any) -> None:
    """Observe the usage of one model call of ``run`` (for quotas and accounting).

    Called after every model call, after ``run.result.cost_usd`` was updated. Every
    implementation is called.
    """


@hookspec(firstresult=True)
def soulacy_check_budget(kernel: Kernel, run: Run) -> str | None:
    """Return a reason (such as ``max_cost_usd`` or ``token_quota``) to end ``run`` as
    incomplete before its next model call, or None to let it go on.

    Called at every turn boundary, after the policy's own limits; these budgets stay in force
    when turns and tokens are unlimited. The first non-None answer wins.
    """


# --------------------------------------------------------------------------------------------
# Compaction
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_make_compactor(kernel: Kernel, run: Any) -> Any:
    """Return the compactor of one run: the object that turns the run's message list into the
    list sent to the model under an input allowance.

    Called once per run, so the compactor may keep running totals instead of re-measuring the
    whole history on every call. The first non-None result wins.
    """


# --------------------------------------------------------------------------------------------
# Progress detection
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_make_progress_detector(kernel: Kernel, run: Any) -> Any:
    """Return the progress detector of one run, which gives a verdict on every tool result
    (progress, repeated, stalled). Called once per run; the first non-None result wins.
    """


# --------------------------------------------------------------------------------------------
# Outcome verification
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_assertion_operators() -> Any:
    """Contribute outcome-assertion operators as a mapping of name to a predicate.

    Every plugin's mapping is collected; two plugins defining the same operator is an error.
    """


@hookspec(firstresult=True)
def soulacy_verify_outcome(kernel: Kernel, run: Run) -> Verification | None:
    """Evaluate the declared outcome assertions of a run that completed into a
    ``Verification`` (``verified`` or ``failed``, with the evidence of each assertion).

    Called once per completed run; ``run.evidence`` holds what the run produced (workflow
    step results, the reply). None (no assertions declared) leaves the run ``unverified``:
    completion is never claimed as independently verified. The first non-None result wins.
    """


# --------------------------------------------------------------------------------------------
# Run strategies
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_run_strategy(kernel: Kernel, run: Run) -> Callable[[Run], Awaitable[None]] | None:
    """Drive this run another way than the classic tool loop (a workflow, a reasoning strategy).

    Called once per run after its history and limits are set up; return an async callable
    that takes the run and ends it with ``run.complete(reply)`` or by raising ``RunStop``.
    The engine still owns serialization, timeouts, storage and the terminal event. The first
    non-None result wins; None everywhere means the classic tool loop.
    """


# --------------------------------------------------------------------------------------------
# Checkpoint, conversation and proof storage
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_checkpoint_store(kernel: Kernel) -> Any:
    """Return the store of run identities, workflow checkpoints and claims. First result wins."""


@hookspec(firstresult=True)
def soulacy_conversation_store(kernel: Kernel) -> Any:
    """Return the store of conversation history with reply metadata. First result wins."""


@hookspec(firstresult=True)
def soulacy_proof_store(kernel: Kernel) -> Any:
    """Return the store of run proofs and tool receipts. First result wins."""


# --------------------------------------------------------------------------------------------
# Transports and other services
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_services(kernel: Kernel) -> Sequence[Service]:
    """Contribute long-lived services (an HTTP/SSE transport, a scheduler) to the kernel.

    Called when ``open_kernel`` starts. Each service's ``serve(task_status=...)`` is started with
    ``await nursery.start(...)`` and must call ``task_status.started()`` once ready; on shutdown
    the kernel sets ``kernel.stopping`` and cancels what is still running after a grace period.
    """


# --------------------------------------------------------------------------------------------
# Scheduling
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_schedules(kernel: Kernel) -> Sequence[Any]:
    """Contribute schedules (beyond the ``schedule:`` keys of SOUL.yaml), such as monitors.

    Every plugin's list is collected by the scheduler service.
    """


@hookspec
def soulacy_schedule_finished(kernel: Kernel, schedule: Any, result: Any) -> None:
    """A scheduled run has really exited (its ownership is released right after). Observers
    only; every implementation is called and may be ``async def`` (the kernel awaits it).
    """


# --------------------------------------------------------------------------------------------
# Run events
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_event(kernel: Kernel, event: Event) -> None:
    """Observe one event of the kernel's event stream (``run.started``, ``run.limits``, tool
    calls, ``run.completed`` …). Every implementation is called, in order, before the event
    reaches stream subscribers; implementations may be ``async def`` (the kernel awaits them).
    """


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_cli_commands() -> Sequence[CliCommand]:
    """Contribute subcommands of the ``soulacy`` launcher. Every plugin's list is collected; a
    name already taken is an error that names both plugins.
    """
