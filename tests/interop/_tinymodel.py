# ruff: noqa: E501 - the chat template keeps its own lines
"""A tiny llama for llama.cpp's server, written here with ``gguf``: no download, no training.

One layer, every weight zero: attention and feed-forward add nothing, so the hidden state is
the embedding of the last token. Embeddings are one-hot vectors of a few classes, so the logits
are one column of the output matrix, set to the scores the test chooses: the model prefers the
same tokens after every token of a class (a bigram model). Under the grammar llama-server
applies once a ``<tool_call>`` is emitted, it writes the allowed token it prefers most, which
makes its JSON tool calls predictable. The vocabulary is GPT-2's 256 byte tokens (one token a
byte: a character of ASCII is exactly one token) plus the chat and tool-call tokens; the chat
template is Qwen 2.5's (with no newline inside ``<tool_call>…</tool_call>``, so that the
grammar's trigger is that one token), from which llama-server learns the tool-call format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
CONTROL = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}  # the others are text to the parser

QWEN25_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""


def byte_tokens() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    stand_in = dict(zip(printable, printable, strict=True))
    extra = 0
    for b in range(256):
        if b not in stand_in:
            stand_in[b] = 256 + extra
            extra += 1
    return [chr(stand_in[b]) for b in range(256)]


def vocabulary() -> list[str]:
    return byte_tokens() + SPECIALS


def token_id(text: str) -> int:
    """The id of a special token or of a one-byte character."""
    if text in SPECIALS:
        return 256 + SPECIALS.index(text)
    (byte,) = text.encode()
    return byte


def write_model(
    path: Path,
    preferred: Sequence[str],
    after: Mapping[str, Sequence[str]] | None = None,
    *,
    context_length: int = 4096,
) -> Path:
    """Write the model to ``path``; it prefers the tokens of ``preferred`` in that order, then
    every other token equally little, except after a token of ``after``: then it prefers that
    token's list. (A token's embedding is one of a few one-hot vectors, so the logits depend
    on the last token only: a bigram model.)"""
    import gguf
    import numpy as np

    tokens = vocabulary()
    n_vocab, n_embd, n_ff, n_head = len(tokens), 32, 64, 2
    lists = [preferred, *(after or {}).values()]
    # RMS-normalised, a one-hot vector is sqrt(n_embd) at its one: the output matrix is scaled
    # by its inverse so that a logit is the score itself.
    output = np.zeros((n_vocab, n_embd), dtype=np.float32)
    for column, ranked in enumerate(lists):
        output[:, column] = -10.0
        for rank, text in enumerate(ranked):
            output[token_id(text), column] = 10.0 * (len(ranked) - rank)
    output /= math.sqrt(n_embd)
    embeddings = np.zeros((n_vocab, n_embd), dtype=np.float32)
    embeddings[:, 0] = 1.0
    for column, text in enumerate(after or {}, start=1):
        embeddings[token_id(text)] = 0.0
        embeddings[token_id(text), column] = 1.0

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("soulacy-interop-tiny")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(1)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    types = [
        gguf.TokenType.CONTROL
        if t in CONTROL
        else gguf.TokenType.USER_DEFINED
        if t in SPECIALS
        else gguf.TokenType.NORMAL
        for t in tokens
    ]
    writer.add_token_types(types)
    # llama.cpp wants merges; one between two control bytes never applies to text.
    writer.add_token_merges([f"{tokens[1]} {tokens[2]}"])
    writer.add_bos_token_id(token_id("<|endoftext|>"))
    writer.add_eos_token_id(token_id("<|im_end|>"))
    writer.add_eot_token_id(token_id("<|im_end|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(QWEN25_TEMPLATE)

    zeros = np.zeros
    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", output)
    block = {
        "attn_norm.weight": np.ones(n_embd, dtype=np.float32),
        "ffn_norm.weight": np.ones(n_embd, dtype=np.float32),
        "attn_q.weight": zeros((n_embd, n_embd), dtype=np.float32),
        "attn_k.weight": zeros((n_embd, n_embd), dtype=np.float32),
        "attn_v.weight": zeros((n_embd, n_embd), dtype=np.float32),
        "attn_output.weight": zeros((n_embd, n_embd), dtype=np.float32),
        "ffn_gate.weight": zeros((n_ff, n_embd), dtype=np.float32),
        "ffn_up.weight": zeros((n_ff, n_embd), dtype=np.float32),
        "ffn_down.weight": zeros((n_embd, n_ff), dtype=np.float32),
    }
    for name, tensor in block.items():
        writer.add_tensor(f"blk.0.{name}", tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
