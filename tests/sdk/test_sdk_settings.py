"""Where the client connects and how long it waits: arguments, environment, defaults."""

from __future__ import annotations

import httpx
import pytest
from sdk_support import GREETING, LiveServer, in_thread

from soulacy.sdk import DEFAULT_TIMEOUT, DEFAULT_URL, AsyncClient, Client, SoulacyError

CLIENTS = [Client, AsyncClient]


def test_the_default_timeout_is_48_hours_plus_one_minute() -> None:
    assert DEFAULT_TIMEOUT == 48 * 3600 + 60 == 172_860.0
    with Client() as client:
        assert client.timeout == 172_860.0
        assert client.http.timeout == httpx.Timeout(172_860.0)
        timeout = client.http.timeout
        assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (172_860.0,) * 4


@pytest.mark.parametrize("unlimited", [None, 0, 0.0])
async def test_none_or_zero_waits_without_limit(unlimited: float | None) -> None:
    with Client(timeout=unlimited) as client:
        assert client.timeout is None
        assert client.http.timeout == httpx.Timeout(None)
    async with AsyncClient(timeout=unlimited) as async_client:
        assert async_client.timeout is None
        timeout = async_client.http.timeout
        assert (timeout.connect, timeout.read, timeout.write, timeout.pool) == (None,) * 4


async def test_a_timeout_applies_to_every_phase() -> None:
    async with AsyncClient(timeout=12.5) as client:
        assert client.http.timeout == httpx.Timeout(12.5)
    async with AsyncClient() as default:
        assert default.timeout == DEFAULT_TIMEOUT
        assert default.http.timeout == httpx.Timeout(DEFAULT_TIMEOUT)


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_a_negative_timeout_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="timeout must be"):
        Client(timeout=bad)


def test_without_environment_the_local_default_server_and_no_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SOULACY_URL", raising=False)
    monkeypatch.delenv("SOULACY_API_KEY", raising=False)
    with Client() as client:
        assert client.base_url == DEFAULT_URL == "http://127.0.0.1:8484"
        assert str(client.http.base_url) == "http://127.0.0.1:8484"
        assert "authorization" not in client.http.headers
        assert client.settings.api_key is None


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOULACY_URL", "http://env.example:1")
    monkeypatch.setenv("SOULACY_API_KEY", "env-key")
    with Client("http://arg.example:2/", "arg-key") as client:
        assert client.base_url == "http://arg.example:2"  # without its trailing slash
        assert client.http.headers["authorization"] == "Bearer arg-key"


async def test_the_environment_gives_url_and_key(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOULACY_URL", server.url)
    monkeypatch.setenv("SOULACY_API_KEY", "key-b")

    def call() -> tuple[str, str]:
        with Client() as client:
            assert client.http.headers["authorization"] == "Bearer key-b"
            reply = client.chat("hello", "hi")
            return reply, client.chat_response("hello", "hi").metadata["run_id"]

    reply, run_id = await in_thread(call)
    assert reply == GREETING
    async with AsyncClient() as async_client:  # bob's run: visible to bob only
        assert (await async_client.run(run_id))["status"] == "completed"
    async with AsyncClient(api_key="key-a") as alice:
        with pytest.raises(SoulacyError) as caught:
            await alice.run(run_id)
    assert caught.value.status == 404


async def test_a_wrong_key_in_the_environment_is_a_401(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOULACY_URL", server.url)
    monkeypatch.setenv("SOULACY_API_KEY", "nope")
    async with AsyncClient() as client:
        with pytest.raises(SoulacyError) as caught:
            await client.agents()
    assert caught.value.status == 401
