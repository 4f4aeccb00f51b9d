"""The run engine, as an essential builtin plugin (pytest's ``main`` and ``runner`` are its
model): it answers ``soulacy_runner`` with what runs a kernel's runs.

It owns everything of a run's life that is mechanism rather than contract: reservation and
the admission caps (``runtime.max_concurrent_sessions*``), each conversation's turn and its
lease (``leases:`` is its section), the lease keeper, deadlines, identity checks, the run's
records and proof, and the terminal event; and what is asked of a run by its id rather than
run: continuing a stored one, cancelling one in another process (decision 0083). The kernel
keeps the contract — ``RunRequest``, ``RunResult``, the ``Run`` and ``Runner`` protocols in
:mod:`soulacy.kernel.engine` — and the hooks through which plugins take part
(docs/decisions/0060-the-engine-is-an-essential-plugin.md).
It cannot be disabled; a replacement answers ``soulacy_runner`` with ``tryfirst=True``. The
deprecated per-turn hooks it still calls through adapters are its own (``hookspecs.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulacy.kernel import hookimpl

if TYPE_CHECKING:  # the rest is imported by the hooks that need it (decision 0038)
    import pluggy

    from soulacy.kernel import ConfigIssue, ConfigSection, Kernel, Settings
    from soulacy.kernel.engine import Runner


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)  # the deprecated per-turn hooks, for one release


@hookimpl
def soulacy_config_sections() -> list[ConfigSection]:
    from soulacy.kernel import ConfigSection, Effects

    from ._settings import LeaseSettings, OnLimit

    return [
        ConfigSection("leases", LeaseSettings, doc="ownership across processes"),
        ConfigSection(
            "tool_effects",
            dict[str, Effects],
            scope="agent",
            default=dict,
            doc="what running a tool's call again does, by tool: read, idempotent or unsafe",
        ),
        ConfigSection(
            "on_limit",
            OnLimit,
            default=lambda: "end",
            doc="a run that reaches a turn, step, call or token limit: end, or pause for a person",
        ),
        ConfigSection(
            "on_limit",
            OnLimit | None,
            scope="agent",
            doc="this agent's on_limit (end or pause); omitted: the workspace's",
        ),
    ]


@hookimpl
def soulacy_validate_config(kernel: Kernel, config: Settings) -> list[ConfigIssue]:
    from ._settings import lease_issues

    return lease_issues(config)


@hookimpl(trylast=True)
def soulacy_runner(kernel: Kernel) -> Runner:
    from ._engine import Engine  # the run machinery is imported when a kernel first runs

    return Engine(kernel)
