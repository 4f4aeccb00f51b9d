"""The id a chat-completions server gives its response reaches ``ModelReply.id``, whole or
streamed (OpenTelemetry's ``gen_ai.response.id``)."""

from __future__ import annotations

import json

from soulacy.plugins.openai._wire import StreamAssembler, reply


def test_a_whole_reply_carries_the_response_id() -> None:
    body = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
    }
    assert (reply(body).id, reply(body).model) == ("chatcmpl-1", "m")
    assert reply({"choices": [{"message": {"content": "hi"}}]}).id is None


def test_a_streamed_reply_carries_the_response_id() -> None:
    stream = StreamAssembler()
    for chunk in (
        {"id": "chatcmpl-2", "model": "m", "choices": [{"index": 0, "delta": {"content": "a"}}]},
        {"id": "chatcmpl-2", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ):
        stream.feed(json.dumps(chunk))
    stream.feed("[DONE]")
    assert stream.reply().id == "chatcmpl-2"
