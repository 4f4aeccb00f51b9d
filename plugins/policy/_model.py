"""The configuration keys the execution policy owns (``runtime``, ``costs``, the agent keys)."""

from __future__ import annotations

import attrs

from soulacy.kernel import Duration

# -- config.yaml ------------------------------------------------------------------------------


@attrs.frozen
class Budget:
    """Tokens and model calls per run; 0 means unlimited for that dimension."""

    max_tokens: int = 0
    max_llm_calls: int = 0


@attrs.frozen
class Timeouts:
    """Per-operation deadlines; ``"0"`` means no deadline (0 counts as infinity in the order).

    ``http`` is where the file format puts the HTTP plugin's deadline: the key is parsed here,
    in the ``runtime`` section, but the limit ``http_timeout``, its rule (it carries the run)
    and its check are the HTTP plugin's, declared through ``soulacy_policy_limits``.
    """

    tool: Duration = Duration(120)
    llm: Duration = Duration(300)
    step: Duration = Duration(600)
    run: Duration = Duration(48 * 3600)
    http: Duration = Duration(48 * 3600 + 60)


@attrs.frozen
class RuntimeConfig:
    """``runtime:`` in config.yaml."""

    default_max_turns: int = 256
    max_turns_ceiling: int = 0
    default_budget: Budget = Budget()
    max_budget: Budget = Budget()
    timeouts: Timeouts = Timeouts()
    no_progress_limit: int = 20
    # Runs at once in this kernel, and per principal; 0 means no cap. Beyond them a run is
    # refused before it starts (HTTP 429 with Retry-After), never queued without bound.
    max_concurrent_sessions: int = 100
    max_concurrent_sessions_per_principal: int = 50
    # Characters of one tool result kept (an excerpt beyond: its start and end, and how much
    # was left out); the model sees what the store keeps. 0: no cap.
    max_tool_result_chars: int = 100_000


@attrs.frozen
class Price:
    """Price metadata of a provider's models; ``*`` and ``?`` are wildcards."""

    input_per_mtok: float  # US dollars per million input tokens
    output_per_mtok: float
    provider: str = "*"
    model: str = "*"


@attrs.frozen
class CostsConfig:
    """``costs:`` in config.yaml: output allowances, price metadata and dollar budgets.

    The budgets are enforced by the ``costs`` plugin; 0 means none.
    """

    default_max_output_tokens: int = 16384
    max_output_tokens_ceiling: int = 0
    pricing: list[Price] = attrs.Factory(list)
    max_run_cost_usd: float = 0.0
    max_daily_cost_usd: float = 0.0


# -- SOUL.yaml and requests -------------------------------------------------------------------


@attrs.frozen
class AgentBudget:
    """``budget:`` in SOUL.yaml or a request. An omitted dimension inherits; 0 is unlimited."""

    max_tokens: int | None = None
    max_llm_calls: int | None = None


@attrs.frozen
class Reasoning:
    """``reasoning:`` in SOUL.yaml. ``max_steps``: omitted inherits, -1 is unlimited."""

    strategy: str | None = None
    max_steps: int | None = None
    step_timeout: Duration | None = None
    total_timeout: Duration | None = None


@attrs.frozen
class RequestOverrides:
    """What one request may ask for; the same semantics as the agent keys of the same name."""

    max_turns: int | None = None
    budget: AgentBudget | None = None
    run_timeout: Duration | None = None
    max_output_tokens: int | None = None
    no_progress_limit: int | None = None
    reasoning_max_steps: int | None = None
