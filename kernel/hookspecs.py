"""Every hook of the Soulacy kernel, grouped by concern.

Conventions, as in pytest and pluggy:

* hooks are called with keyword arguments, and an implementation may accept only the arguments it
  needs, so a hook can gain arguments without breaking plugins;
* ``firstresult`` hooks answer "who handles this": the first non-``None`` result wins, so a plugin
  that wants to replace a builtin implements the hook with ``tryfirst=True`` or blocks the builtin
  (``-p no:NAME``). The builtin defaults of the roles a run needs (run strategy, tool loop,
  compactor, stores) answer ``trylast``; a role nobody answers is a ``PluginError`` naming its
  hook, never a silent fallback;
* a *factory* hook — a ``firstresult`` hook returning the object that plays a role — is named
  by that role, never by a verb: ``soulacy_runner``, ``soulacy_store``, ``soulacy_compactor``,
  ``soulacy_progress_detector``, ``soulacy_run_strategy``, ``soulacy_tool_loop``,
  ``soulacy_approval_keeper``, ``soulacy_provider_registry`` (the two ``soulacy_make_*`` names,
  deprecated aliases for one release, are the ``engine`` plugin's, with the other deprecated
  per-turn hooks: ``soulacy.plugins.engine.hookspecs``);
* the other hooks collect contributions: the kernel gets a list with one result per plugin;
* hooks are synchronous and cheap; asynchronous work lives in the objects they return (stores,
  providers, services), which the kernel drives in its nursery. Where a hook says so, the kernel
  awaits results that are awaitable ("await me maybe"), so those hooks may be ``async def``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from ._commands import CliCommand
    from ._config import ConfigSection, Settings
    from ._contracts import (
        ApprovalKeeper,
        Compactor,
        ProgressDetector,
        RunParticipant,
        RunStrategy,
        ToolLoop,
    )
    from ._errors import ConfigIssue
    from ._events import Event
    from ._kernel import AgentSpec, Kernel, Service
    from ._messages import Usage
    from ._providers import ProviderRegistry, ProviderType
    from ._runs import Run, Runner, Verification
    from ._store import Store
    from ._tools import Tool
    from .policy import ExecutionPolicy, ModelCapacity, PolicyLimit

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


@hookspec(historic=True)
def soulacy_configure(kernel: Kernel) -> None:
    """The configuration is loaded and valid: read your sections from ``kernel.config``.

    Called once per kernel, after every plugin is registered and all configuration has been
    validated, before any service starts. Every implementation is called; historic, so a plugin
    registered later is called at once for every kernel already configured.
    """


@hookspec
def soulacy_unconfigure(kernel: Kernel) -> Awaitable[None] | None:
    """The kernel is closing (``Kernel.aclose``, at the end of ``open_kernel``): release what
    your plugin opened for it, such as a store's connections.

    Called after the services stopped and the provider connections closed; every
    implementation is called, in the reverse order of registration, and may be ``async def``
    (the kernel awaits it; one failing does not keep the others from closing). A kernel used
    after it gets it again when it closes again.
    """


@hookspec
def soulacy_validate_config(kernel: Kernel, config: Settings) -> Sequence[ConfigIssue]:
    """Check rules that span keys (such as the order of timeouts) in a structured config.yaml.

    Called when the kernel loads and before ``update_config`` writes anything; every plugin's
    issues are collected and reported together as one ``ConfigError``. Use
    ``config.source_of(path)`` to point an issue at its line.
    """


@hookspec(firstresult=True)
def soulacy_save_config(kernel: Kernel, changes: Mapping[str, Any]) -> list[str] | None:
    """Save changed fields of the workspace's configuration (``Kernel.update_config``: ``soulacy
    config set``, ``PATCH /config``) and return the dotted keys that changed.

    Validate everything before writing (``kernel.validate_config``), write atomically, then
    set ``kernel.config``; on any error nothing is saved. The builtin ``core`` plugin writes
    config.yaml with :mod:`soulacy.plugins.yamledit`, keeping comments and untouched lines;
    a deployment whose configuration lives elsewhere answers with ``tryfirst=True``. First
    result wins.
    """


@hookspec
def soulacy_validate_agent(kernel: Kernel, agent: AgentSpec) -> Sequence[ConfigIssue]:
    """Check rules that span keys of one SOUL.yaml. Every plugin's issues are collected."""


# --------------------------------------------------------------------------------------------
# Execution policy resolution
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_resolve_policy(
    kernel: Kernel, agent_id: str, overrides: Mapping[str, Any]
) -> ExecutionPolicy | None:
    """Resolve the execution policy of a run of ``agent_id`` with request ``overrides``.

    Returns an ``ExecutionPolicy`` in which every value carries its source; the first non-None
    result wins. A plugin that tightens the builtin policy implements this hook as a wrapper
    (``@hookimpl(wrapper=True)``), receives the resolved policy from ``yield`` and returns a new
    one.
    """


@hookspec
def soulacy_policy_limits() -> Sequence[PolicyLimit]:
    """Declare limits of this plugin's own for the execution policy, as ``PolicyLimit``s: the
    workspace key each is read from, its default, what means unlimited, its range and its rule.

    Every plugin's list is collected (``soulacy.kernel.policy.declared_limits``); a name two
    plugins declare, or the name of a core limit, is an error naming them. The policy resolves
    each beside its core limits, reports it in ``run.limits`` and ``policy show``, and holds it
    by name: ``policy.limit(name)``. With the declaring plugin blocked the limit does not exist.
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
def soulacy_provider_registry(kernel: Kernel) -> ProviderRegistry | None:
    """Return the ``ProviderRegistry`` that resolves provider names for ``kernel``: which
    provider a name means, which an agent uses, what its model can hold.

    Asked once per kernel, the first time a provider is needed; the kernel closes it with
    itself. The builtin ``providers`` plugin answers last, from ``llm.providers`` and the
    provider types; block it (``-p no:providers``) or answer first to resolve them otherwise.
    """


@hookspec(firstresult=True)
def soulacy_model_capacity(
    kernel: Kernel, provider: str | None, model: str | None
) -> ModelCapacity | None:
    """Return the ``ModelCapacity`` (context window, output tokens) of a provider's model, or
    None when unknown. The execution policy never grants more than this. First result wins.
    """


@hookspec(firstresult=True)
def soulacy_price(kernel: Kernel, provider: str, model: str | None, usage: Usage) -> float | None:
    """The price in US dollars of one model call's ``usage`` (a ``Usage``), or None when no
    price is known. Called after every model call; the first non-None answer wins.
    """


# --------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_tools(kernel: Kernel, agent_id: str, agent: AgentSpec | None) -> Sequence[Tool]:
    """Contribute tools for agent ``agent_id``. Every plugin's list is collected.

    ``agent`` is its validated SOUL.yaml (a studio candidate may not be saved yet), or None when
    a caller asks what plugins contribute without one (studio's prompt lists the tools).

    An agent is offered exactly the tools its SOUL.yaml ``tools:`` lists: names of contributed
    tools, or entries a tool is ``listed_as``, such as the builtin ``file_tools`` plugin's
    ``file.py:function`` references to Python files beside the agent.
    """


# --------------------------------------------------------------------------------------------
# Compaction
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_compactor(kernel: Kernel, run: Run) -> Compactor | None:
    """Return the compactor of one run: the object that turns the run's message list into the
    list sent to the model under an input allowance.

    Called once per run, before its first model call, so the compactor may keep running totals
    instead of re-measuring the whole history on every call. The first non-None result wins;
    the builtin ``compaction`` plugin answers, and ``passthrough`` (the messages as they are)
    answers last; with no answer the run fails with a PluginError naming this hook.
    """


# --------------------------------------------------------------------------------------------
# Progress detection
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_progress_detector(kernel: Kernel, run: Run) -> ProgressDetector | None:
    """Return the progress detector of one run, which gives a verdict on every tool result
    (progress, repeated, stalled) and, through its optional ``observe_reply``, on replies that
    are not answers (the tool loop's idle stop).

    Called once per run; the first non-None result wins. With no answer, a run whose policy
    sets ``no_progress_limit`` fails with a PluginError: the limit would not be enforced.
    """


# --------------------------------------------------------------------------------------------
# Outcome verification
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_verify_outcome(kernel: Kernel, run: Run) -> Verification | None:
    """Evaluate the declared outcome assertions of a run that completed into a
    ``Verification`` (``verified`` or ``failed``, with the evidence of each assertion).

    Called once per completed run; ``run.evidence`` holds what the run produced (workflow
    step results, the reply). None (no assertions declared) leaves the run ``unverified``:
    completion is never claimed as independently verified. The first non-None result wins.
    """


# --------------------------------------------------------------------------------------------
# Running, and run strategies
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_runner(kernel: Kernel) -> Runner | None:
    """Return what runs this kernel's runs: reservation, conversations' turns and their
    leases, deadlines, identity checks, the run's records and proof, and its terminal event
    (``Kernel.run``, ``continue_run``, ``cancel_run``, ``request_cancel`` and ``kernel.leases``
    go through it, and transports reserve with ``kernel.runner().reserve``).

    Asked once per kernel. The essential builtin ``engine`` plugin answers, as pytest's
    ``main`` plugin runs its sessions; a replacement answers with ``tryfirst=True`` and
    implements :class:`soulacy.kernel.engine.Runner`. First result wins.
    """


@hookspec
def soulacy_run_participants(kernel: Kernel, run: Run) -> Sequence[RunParticipant] | None:
    """Return the objects that take part in this run's turns (see
    :class:`soulacy.kernel.contracts.RunParticipant`: before and after each model call,
    before a tool call, whether it needs approval, after it, and the run's end), or None.

    Called once per run, after it holds its conversation's lease (``run.held``) and loaded
    its history, before its strategy: decide here, once, whether this plugin has anything to
    do in this run (its configuration, the agent's keys), so that a turn calls only what
    takes part. Every implementation is called. The builtins ``costs`` (prices, budgets,
    quotas), ``approvals`` (``confirm_tools``) and ``http`` (its shared event logs) answer.
    """


@hookspec(firstresult=True)
def soulacy_approval_keeper(kernel: Kernel) -> ApprovalKeeper | None:
    """Return what obtains a person's decision on a tool call that a participant's
    ``needs_approval`` gave a reason for: stores the request, waits for the decision (through
    :meth:`Run.wait_for_decision`) and records it (see
    :class:`soulacy.kernel.contracts.ApprovalKeeper`).

    Asked once per kernel, when a call first needs a decision. The builtin ``approvals``
    plugin answers (durably, in the store; docs/approvals.md); without an answer such a call
    is refused, never run unapproved. First result wins.

    The keeper also takes decisions for other transports (``decide``: AG-UI's answers to its
    interrupts) and runs a run on whose waiting process is gone (``resume``), typed in the
    protocol: a plugin asks this hook for them, never another plugin's module. Its ``ask``
    may answer :class:`~soulacy.kernel.contracts.Happened` (a call cut while it ran was told
    it happened, with its result): callers must handle it.
    """


@hookspec(firstresult=True)
def soulacy_run_strategy(kernel: Kernel, run: Run) -> RunStrategy | None:
    """Drive this run: a workflow, a reasoning strategy, or the tool loop.

    Called once per run after its history and limits are set up; return an async callable
    that takes the run and ends it with ``run.complete(reply)`` or by raising ``RunStop``
    (returning with the run unfinished is a bug). Each model call follows a turn boundary,
    ``run.turn()``, which stores what is pending and checks the limits, and goes through
    ``run.call_model()``, which accounts for it; each tool call goes through
    ``run.call_tool()``. ``soulacy.testing.check_run_strategy`` checks a strategy
    against this.

    The engine still owns serialization, timeouts, storage and the terminal event; a strategy
    times a step of its own with ``run.start_step(seconds)`` (the next ``run.turn()`` or
    ``run.end_step()`` ends it): a step or model call that outlasts its deadline raises
    ``RunStop`` (``step_timeout``, ``llm_timeout``) from the innermost ``run.timeouts()``
    block, or from the call itself outside any, and the strategy may catch it. The first
    non-None result wins; the builtin ``classic`` plugin answers last with the tool loop
    (through ``run.tool_loop``), and with no answer at all the run fails with a PluginError
    naming this hook.
    """


@hookspec(firstresult=True)
def soulacy_tool_loop(kernel: Kernel, run: Run) -> ToolLoop | None:
    """Return the tool loop, what ``run.tool_loop(limit)`` runs: an async callable
    ``(run, limit)`` that calls the model and the tools it asks for until a reply is an answer
    (``run.complete``) or a limit stops the run; ``limit="steps"`` counts each model call as a
    reasoning step.

    The builtin ``classic`` strategy runs its loop through ``run.tool_loop("turns")``, and
    reasoning's ``react`` through ``run.tool_loop("steps")``: the loop answered here drives
    every run that no other strategy takes. Before each model call the loop passes
    ``run.turn(limit)``, which checks the limits (``max_turns``, or ``reasoning.max_steps``
    for steps), and times the step with ``run.start_step`` (the step timeout, or the reasoning
    step timeout for steps); it runs each tool call of a reply, in order, through
    ``run.call_tool(name, arguments, call.id)``, so that its result reaches the next model call
    and a call id executed before (a same-id retry) replays instead of running again; a failed
    call is a result the model reads, not the end of the run.
    ``soulacy.testing.check_tool_loop`` checks a loop against this.

    The builtin ``classic`` plugin answers last (its loop also decides which replies are
    answers, and nudges the model after one that is not). The first non-None result wins.
    """


# --------------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def soulacy_store(kernel: Kernel) -> Store | None:
    """Return the store of everything a run keeps: history with reply metadata, runs, tool
    records and proofs, workflow checkpoints, leases and shared counters. First result wins.

    Asked once per kernel. The builtin ``sqlite_store`` answers, ``memory_store`` last; with no
    answer, using the store is a PluginError naming this hook. One store plays every role:
    writes under a lease check its fencing token in the same transaction (decision 0029;
    it replaces the three store hooks of decision 0011).
    """


# --------------------------------------------------------------------------------------------
# Transports and other services
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_services(kernel: Kernel) -> Sequence[Service]:
    """Contribute long-lived services (an HTTP/SSE transport, a scheduler) to the kernel.

    Called when ``open_kernel`` starts. Each service's ``serve(task_status=...)`` is started with
    ``await nursery.start(...)`` and must call ``task_status.started()`` once ready. On shutdown
    the kernel sets ``kernel.stopping``: ``serve`` then ends its work and returns by itself, at
    once when idle (``soulacy.testing.check_service_stops`` checks it). What still runs after the
    grace period is cancelled, with a warning naming the service.
    """


# --------------------------------------------------------------------------------------------
# Run events
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_event(kernel: Kernel, event: Event) -> None:
    """Observe one event of the kernel's event stream (``run.started``, ``run.limits``, tool
    calls, ``run.completed`` …). Every implementation is called, in order, before the event
    reaches stream subscribers; implementations may be ``async def`` (the kernel awaits them).
    A plugin that implements it reads every event, so the engine builds every event; one that
    reads a few types, or only while it serves, adds ``kernel.events.observe(callback, types)``
    instead (decision 0042): an event nobody reads is not built.
    """


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


@hookspec
def soulacy_cli_commands() -> Sequence[CliCommand]:
    """Contribute subcommands of the ``soulacy`` launcher. Every plugin's list is collected; a
    name already taken is an error that names both plugins.
    """
