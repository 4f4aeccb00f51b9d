"""Context-length refusals as the OpenAI-compatible servers word them.

Each body is what that server sends (the llama.cpp and LiteLLM ones were also seen from the
real servers: see tests/interop). A refusal is recognised from its structured code or its
wording; the limit and the prompt's size in tokens are read when it states them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from soulacy.kernel.providers import ProviderConfig
from soulacy.plugins.openai import OpenAIProvider

LIMITS: list[tuple[str, int, Any, int | None, int | None]] = [
    (
        "openai, messages",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your"
                " messages resulted in 9013 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        8192,
        9013,
    ),
    (
        "openai, messages and completion",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 4097 tokens. However, you"
                " requested 4200 tokens (3200 in the messages, 1000 in the completion). Please"
                " reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        4097,
        3200,
    ),
    (
        "openai, code only",
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust"
                " your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
        None,
        None,
    ),
    (
        "llama.cpp",
        400,
        {
            "error": {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096"
                " tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
        4096,
        4476,
    ),
    (
        "vllm, requested with a split",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 2048 tokens. However, you"
            " requested 2100 tokens (2000 in the messages, 100 in the completion). Please reduce"
            " the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        2048,
        2000,
    ),
    (
        "vllm, your request has",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 2048 tokens. However, your"
                " request has 3000 input tokens. Please reduce the length of the input messages.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
        2048,
        3000,
    ),
    (
        "vllm, your prompt contains",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 2048 tokens. However, you"
            " requested 512 output tokens and your prompt contains at least 1537 input tokens,"
            " for a total of at least 2049 tokens. Please reduce the length of the input prompt"
            " or the number of requested output tokens.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        2048,
        1537,
    ),
    (
        "litellm, wrapping openai",
        400,
        {
            "error": {
                "message": "litellm.ContextWindowExceededError: litellm.BadRequestError:"
                " ContextWindowExceededError: OpenAIException - This model's maximum context"
                " length is 16385 tokens. However, your messages resulted in 20000 tokens.\n"
                "Received Model Group=gpt-3.5-turbo\nAvailable Model Group Fallbacks=None",
                "type": None,
                "param": None,
                "code": "400",
            }
        },
        16385,
        20000,
    ),
    (
        "litellm, its own wording",
        400,
        {
            "error": {
                "message": "litellm.ContextWindowExceededError: litellm.BadRequestError:"
                " context window exceeded",
                "type": None,
                "param": None,
                "code": "400",
            }
        },
        None,
        None,
    ),
    (
        "litellm, its pre-call check",
        400,
        {
            "error": {
                "message": "litellm.ContextWindowExceededError: litellm.BadRequestError:"
                " litellm._pre_call_checks: Context Window exceeded for given call. No models"
                " have context window large enough for this call.\nModel=openai/small-model,"
                " Max Input Tokens=300, Got=410\nmodel=small. context_window_fallbacks=None."
                " fallbacks=None.\n\nSet 'context_window_fallback' -"
                " https://docs.litellm.ai/docs/routing#fallbacks\n\nLiteLLM: model group"
                " 'small' failed with the error above. No fallback was attempted.",
                "type": "invalid_request_error",
                "param": None,
                "code": "400",
            }
        },
        300,
        410,
    ),
    (
        "litellm, a mock",
        400,
        {
            "error": {
                "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: this is"
                " a mock context window exceeded error\nmodel=toolong."
                " context_window_fallbacks=None. fallbacks=None.",
                "type": "invalid_request_error",
                "param": None,
                "code": "400",
            }
        },
        None,
        None,
    ),
    (
        "ollama",
        400,
        {
            "error": {
                "message": "the input length exceeds the context length",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
        None,
        None,
    ),
    (
        "a 500 worded as a context refusal (a proxy passing it on)",
        500,
        {"error": "input length exceeds the context length"},
        None,
        None,
    ),
    (
        "ollama, truncation",
        400,
        {
            "error": {
                "message": 'msg="truncating input prompt" limit=4096 prompt=7268 keep=4 new=4096',
                "type": "invalid_request_error",
            }
        },
        4096,
        7268,
    ),
    (
        "ollama, exceeded by",
        400,
        {"error": "prompt too long; exceeded max context length by 152 tokens"},
        None,
        None,
    ),
]

NOT_LIMITS: list[tuple[str, int, Any]] = [
    (
        "openai, a rate limit that names tokens",
        429,
        {
            "error": {
                "message": "Request too large for gpt-4 in organization org-x on tokens per min"
                " (TPM): Limit 10000, Requested 12000.",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        },
    ),
    (
        "openai, max_tokens too large",
        400,
        {
            "error": {
                "message": "max_tokens is too large: 9000. This model supports at most 4096"
                " completion tokens, whereas you provided 9000.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": None,
            }
        },
    ),
    ("a bad temperature", 400, {"error": {"message": "temperature must be at most 2"}}),
    ("llama.cpp, another error", 500, {"error": {"code": 500, "type": "server_error"}}),
    ("plain text", 502, "Bad Gateway"),
    (
        "litellm, a rate limit",
        429,
        {
            "error": {
                "message": "litellm.RateLimitError: this is a mock rate limit error\n\nLiteLLM:"
                " model group 'ratelimited' failed with the error above.",
                "type": "throttling_error",
                "param": None,
                "code": "429",
            }
        },
    ),
]


@pytest.fixture
def provider() -> OpenAIProvider:
    return OpenAIProvider("p", ProviderConfig(type="openai", base_url="http://127.0.0.1:9/v1"))


@pytest.mark.parametrize(
    ("status", "body", "limit", "requested"),
    [case[1:] for case in LIMITS],
    ids=[case[0] for case in LIMITS],
)
def test_a_context_length_refusal_is_recognised_with_what_it_states(
    provider: OpenAIProvider, status: int, body: Any, limit: int | None, requested: int | None
) -> None:
    refusal = provider.refusal(status, json.dumps(body))
    assert (refusal.too_long, refusal.limit, refusal.requested) == (True, limit, requested)


@pytest.mark.parametrize(
    ("status", "body"), [case[1:] for case in NOT_LIMITS], ids=[case[0] for case in NOT_LIMITS]
)
def test_other_errors_are_not_context_length_refusals(
    provider: OpenAIProvider, status: int, body: Any
) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    assert provider.refusal(status, text).too_long is False
