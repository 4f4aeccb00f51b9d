"""Attribute and instrument names: the OpenTelemetry GenAI semantic conventions where they
define one (``gen_ai.*``, ``server.*``, ``error.type``), ``soulacy.*`` for what only Soulacy has.

Written out rather than imported from ``opentelemetry.semconv._incubating``: that module is
private, and its GenAI names are marked as moved to the GenAI conventions repository.
"""

from __future__ import annotations

from typing import Final

# -- GenAI semantic conventions -----------------------------------------------------------------
OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
SYSTEM: Final = "gen_ai.system"  # the older name of gen_ai.provider.name, still read by backends
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_STREAM: Final = "gen_ai.request.stream"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
AGENT_ID: Final = "gen_ai.agent.id"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT: Final = "gen_ai.tool.call.result"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
TOKEN_TYPE: Final = "gen_ai.token.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"

CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"
INVOKE_AGENT: Final = "invoke_agent"

OPERATION_DURATION: Final = "gen_ai.client.operation.duration"  # histograms
TOKEN_USAGE: Final = "gen_ai.client.token.usage"

# -- Soulacy ------------------------------------------------------------------------------------
RUN_ID: Final = "soulacy.run.id"
SESSION_ID: Final = "soulacy.session.id"
USER_ID: Final = "soulacy.user.id"
PRINCIPAL: Final = "soulacy.principal"
PARENT_RUN: Final = "soulacy.parent_run.id"
STATUS: Final = "soulacy.run.status"
REASON: Final = "soulacy.run.incomplete_reason"
VERIFICATION: Final = "soulacy.run.verification"
ERROR: Final = "soulacy.run.error"
ATTEMPT: Final = "soulacy.run.attempt"
TURNS: Final = "soulacy.run.turns"
LLM_CALLS: Final = "soulacy.run.llm_calls"
TOOL_CALLS: Final = "soulacy.run.tool_calls"
COST: Final = "soulacy.run.cost_usd"
STRATEGY: Final = "soulacy.run.strategy"
QUEUED: Final = "soulacy.run.queued_s"
LIMIT: Final = "soulacy.limit."  # + the limit's name: its value, or "unlimited"
TURN: Final = "soulacy.turn"
MESSAGES: Final = "soulacy.llm.messages"
REPLY_TOOL_CALLS: Final = "soulacy.llm.tool_calls"
RETRIED: Final = "soulacy.llm.retried"
COMPACTED: Final = "soulacy.llm.compacted"  # the call's view was compacted
COMPACTION: Final = "soulacy.compaction."  # + messages_before, tokens_after, …: a span event's
REPLAYED: Final = "soulacy.tool.replayed"
VERDICT: Final = "soulacy.tool.verdict"
RESULT_CHARS: Final = "soulacy.tool.result_chars"
STEP: Final = "soulacy.workflow.step"
STEP_STATUS: Final = "soulacy.workflow.step.status"
RESTORED: Final = "soulacy.workflow.step.restored"
REASONING: Final = "soulacy.reasoning.strategy"
REASONING_STEP: Final = "soulacy.reasoning.step"
LINK_TYPE: Final = "soulacy.link.type"
AGENT: Final = "soulacy.agent.id"  # metrics
TOOL_OUTCOME: Final = "soulacy.tool.outcome"
PROGRESS_KIND: Final = "soulacy.progress.kind"
DROP_REASON: Final = "soulacy.otel.reason"
SIGNAL: Final = "soulacy.otel.signal"
