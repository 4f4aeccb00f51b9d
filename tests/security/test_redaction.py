"""Redaction (step 13, observation 9): every value whose key names a secret is hidden, at any
depth and in headers; settings that only mention tokens as a count stay visible; free text is
scrubbed of bearer tokens and keys."""

from __future__ import annotations

import pytest

from soulacy.kernel import redact, redact_text


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "api_keys",
        "Authorization",
        "authorization",
        "X-Api-Key",
        "token",
        "tokens",
        "hf_token",
        "access_token",
        "client_secret",
        "password",
        "db_password",
        "Cookie",
        "Set-Cookie",
        "secret",
        "dsn",
        "key",
        "X-Custom-Auth",
        "Ocp-Apim-Subscription-Key",
        "x-functions-key",
        "access_key",
        "AWS_ACCESS_KEY_ID",
        "signing_key",
        "PGPASSWORD",
        "database_url",
        "connection_string",
    ],
)
def test_a_secret_named_value_is_hidden(key: str) -> None:
    assert redact({key: "sk-live-123456"}) == {key: "***"}


@pytest.mark.parametrize(
    "key",
    [
        "max_tokens",
        "max_build_tokens",
        "default_max_output_tokens",
        "chars_per_token",
        "input_tokens",
        "max_output_tokens_ceiling",
        "per_user_tokens_day",
        "keyboard",
        "session_id",
        "message_overhead_tokens",
        "tokens_per_day",
        "api_key_env",
    ],
)
def test_a_setting_that_counts_tokens_stays_visible(key: str) -> None:
    assert redact({key: 42}) == {key: 42}


def test_secrets_are_hidden_at_any_depth_headers_included() -> None:
    config = {
        "llm": {
            "providers": {
                "gw": {
                    "base_url": "https://gw.example/v1",
                    "options": {"headers": {"Authorization": "Bearer sk-abcdef123456"}},
                }
            }
        },
        "server": {"api_keys": {"alice": "k-alice", "ghost": ""}, "admins": ["alice"]},
        "list": [{"password": "pw"}],
    }
    out = redact(config)
    gw = out["llm"]["providers"]["gw"]
    assert gw["options"]["headers"]["Authorization"] == "***"
    assert gw["base_url"] == "https://gw.example/v1"
    assert out["server"]["api_keys"] == {"alice": "***", "ghost": ""}
    assert out["server"]["admins"] == ["alice"]
    assert out["list"] == [{"password": "***"}]
    assert "sk-abcdef123456" not in repr(out)


def test_free_text_is_scrubbed_of_bearer_tokens_and_keys() -> None:
    text = (
        "401 from https://api.example: Authorization: Bearer sk-proj-abcdef1234567890"
        " (api_key=abcd1234efgh, token: 'zzzz9999')"
    )
    clean = redact_text(text)
    for secret in ("abcdef1234567890", "abcd1234efgh", "zzzz9999"):
        assert secret not in clean
    assert clean.startswith("401 from https://api.example")
    assert redact_text("max_tokens: 4096 reached") == "max_tokens: 4096 reached"


async def test_a_run_error_carries_no_key(workspace: object, make_kernel: object) -> None:
    from soulacy.kernel.messages import ModelRequest
    from soulacy.kernel.providers import ProviderError, ProviderType
    from soulacy.testing import Workspace, throwaway_plugin

    class Leaky:
        name = "leaky"

        def capacity(self, model: str | None) -> None:
            return None

        async def aclose(self) -> None:
            return None

        async def complete(self, request: ModelRequest, on_text: object = None) -> object:
            raise ProviderError(
                "upstream said: invalid header Authorization: Bearer sk-abcdef123456"
            )

    assert isinstance(workspace, Workspace)
    workspace.write_agent("a", {"llm": {"provider": "leaky"}})
    plugin = throwaway_plugin(
        "leaky", soulacy_provider_types=lambda: [ProviderType("leaky", lambda *a: Leaky())]
    )
    kernel = make_kernel(extra_plugins=[plugin])  # type: ignore[operator]
    events = kernel.events.subscribe(buffer=float("inf"))
    result = await kernel.run("a", "hi")
    assert result.status == "failed"
    assert "sk-abcdef123456" not in (result.error or "")
    assert "invalid header" in (result.error or "")
    seen = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except Exception:
            break
    assert all("sk-abcdef123456" not in repr(e.data) for e in seen)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abcdefghijklmnopqrstuv", "abcdefghijklmnopqrstuv"),
        ("{'Authorization': 'Bearer abcdefghij0123'}", "abcdefghij0123"),
        ("Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("access_token=abcd1234efgh", "abcd1234efgh"),
        ("refresh_token: zzzzyyyy", "zzzzyyyy"),
        ("client_secret=qqqqwwww", "qqqqwwww"),
        ("GET https://user:pw1234@host/x failed", "pw1234"),
    ],
)
def test_the_value_after_a_scheme_word_is_what_is_hidden(text: str, secret: str) -> None:
    """A reviewer found "Authorization: Bearer TOKEN" masked as "Authorization: *** TOKEN"."""
    clean = redact_text(text)
    assert secret not in clean
    assert "***" in clean


async def test_a_tool_error_preview_carries_no_key(workspace: object, make_kernel: object) -> None:
    from soulacy.kernel import Tool
    from soulacy.testing import Workspace, throwaway_plugin

    def leak() -> str:
        """Fails quoting a header."""
        raise RuntimeError("proxy refused Authorization: Bearer abcdefghij0123456789")

    assert isinstance(workspace, Workspace)
    workspace.scripted_agent("a", [{"tool": "leak"}, {"text": "done"}], tools=["leak"])
    tools = [Tool.from_function(leak)]
    plugin = throwaway_plugin("leaky_tool", soulacy_tools=lambda kernel, agent_id: tools)
    kernel = make_kernel(extra_plugins=[plugin])  # type: ignore[operator]
    events = kernel.events.subscribe(buffer=float("inf"))
    await kernel.run("a", "go")
    previews = []
    while True:
        try:
            event = events.receive_nowait()
        except Exception:
            break
        if event.type == "tool.result":
            previews.append(event.data["preview"])
    assert previews
    assert all("abcdefghij0123456789" not in p for p in previews), previews


def test_every_value_of_a_headers_mapping_is_hidden() -> None:
    # A collector's headers carry credentials under vendor names no word list knows.
    config = {"otel": {"headers": {"x-honeycomb-team": "hc-secret-1234", "x-empty": ""}}}
    out = redact(config)
    assert out["otel"]["headers"] == {"x-honeycomb-team": "***", "x-empty": ""}
    assert redact({"extra_headers": {"X-Team": "t-1234"}}) == {"extra_headers": {"X-Team": "***"}}
