"""Requests cannot hold the server: a body must arrive in time and at a minimum rate (408), one
principal has a bounded number of requests open at once (429), a WebSocket upgrade is refused
with a 4xx after the Host and key checks (never a 500), and rotating a key revokes the events
tokens minted for it. Real servers on loopback; slow bodies on raw sockets."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from _support.http_server import (
    KEYS,
    Server,
    host_port,
    keyed_config,
    open_keyed_server,
    open_server,
    sse_events,
    standard_agents,
)

from soulacy.kernel import ConfigError, Kernel
from soulacy.testing import Workspace

PATIENCE = 60.0  # seconds: the bound of every wait below; none takes it when things work
CHAT = b'{"agent_id": "echo", "text": "hi"}'


@attrs.frozen
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def _connect(server: Server) -> trio.SocketStream:
    return await trio.open_tcp_stream(*host_port(server.url))


def _head(
    who: str | None,
    length: int | None,
    path: str = "/api/v1/chat",
    method: str = "POST",
    extra: str = "",
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if who is not None:
        lines.append(f"Authorization: Bearer {KEYS[who]}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


async def _read_answer(stream: trio.SocketStream) -> Answer:
    """One HTTP answer with a ``Content-Length``, read as soon as it is whole."""
    data = b""
    with trio.fail_after(PATIENCE):
        while True:
            head, found, rest = data.partition(b"\r\n\r\n")
            if found:
                status_line, *lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)
                }
                size = int(headers.get("content-length", "0"))
                if len(rest) >= size:
                    return Answer(int(status_line.split()[1]), headers, rest[:size])
            chunk = await stream.receive_some(65536)
            assert chunk, f"the server hung up without a whole answer: {data!r}"
            data += chunk


async def _closed_by_server(stream: trio.SocketStream) -> bool:
    """Whether the server closes the connection (end of stream or a reset)."""
    with trio.fail_after(PATIENCE):
        try:
            while await stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            pass
    return True


@pytest.fixture
async def server(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> AsyncIterator[Server]:
    # Short on purpose: a body must come within 1 s, plus 1 s per 10 bytes received.
    extra = "  body_timeout: 1s\n  body_min_rate: 10\n"
    async with open_keyed_server(workspace, make_kernel, extra) as running:
        yield running


# -- slow bodies -----------------------------------------------------------------------------


async def test_a_body_that_stops_coming_is_a_408_and_the_connection_is_closed(
    server: Server,
) -> None:
    stream = await _connect(server)
    async with stream:
        await stream.send_all(_head("alice", len(CHAT)) + CHAT[:5])  # then nothing more
        answer = await _read_answer(stream)
        assert answer.status == 408, answer
        assert answer.headers["content-type"] == "application/json"
        body = answer.json()
        assert body["status"] == 408
        assert "server.body_timeout" in body["error"]
        assert await _closed_by_server(stream)
    async with server.client() as alice:  # the server still serves, alice included
        assert (await alice.post("/chat", content=CHAT, headers=_json_type())).status_code == 200


async def test_a_body_that_keeps_coming_below_the_minimum_rate_is_a_408(server: Server) -> None:
    """A byte every 200 ms never leaves the connection idle, yet is half of 10 bytes/s: the
    deadline moves only with what arrives, so the server ends it (an idle timeout would not)."""
    declared = 10_000
    stream = await _connect(server)
    async with stream:
        await stream.send_all(_head("alice", declared))
        sent = 0

        async def trickle() -> None:
            nonlocal sent
            try:
                while sent < declared:
                    await stream.send_all(b" ")
                    sent += 1
                    await trio.sleep(0.2)  # the pace of the upload, not a synchronisation
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the server closed the connection: what this test expects

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trickle)
            answer = await _read_answer(stream)
            nursery.cancel_scope.cancel()
        assert answer.status == 408, answer
        assert answer.json()["status"] == 408
        assert 0 < sent < declared
        assert await _closed_by_server(stream)


async def test_a_body_that_arrives_at_a_good_rate_may_take_longer_than_the_timeout(
    server: Server,
) -> None:
    """Every 10 bytes received earn one more second: five chunks of 200 bytes, 0.4 s apart
    (500 bytes/s, fifty times the minimum: each chunk earns 20 s), take longer than
    ``body_timeout`` (1 s) and are served."""
    body = CHAT + b" " * (1000 - len(CHAT))
    stream = await _connect(server)
    async with stream:
        await stream.send_all(_head("alice", len(body)) + body[:200])
        for start in range(200, len(body), 200):
            await trio.sleep(0.4)  # the pace of the upload, not a synchronisation
            await stream.send_all(body[start : start + 200])
        answer = await _read_answer(stream)
    assert answer.status == 200, answer
    assert answer.json()["reply"] == "hello there"


async def test_headers_that_never_end_are_closed_by_the_server(server: Server) -> None:
    """Before a route sees a request, hypercorn closes a connection whose headers do not end
    within its keep-alive timeout (5 s): they are never a request of anyone's."""
    stream = await _connect(server)
    async with stream:
        await stream.send_all(b"POST /api/v1/chat HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert await _closed_by_server(stream)


async def test_an_unauthenticated_slow_body_is_refused_before_it_is_read(server: Server) -> None:
    stream = await _connect(server)
    async with stream:
        await stream.send_all(_head(None, 10_000) + b"{")
        answer = await _read_answer(stream)
        assert answer.status == 401
        assert await _closed_by_server(stream)


def _json_type() -> dict[str, str]:
    return {"content-type": "application/json"}


# -- requests open per principal --------------------------------------------------------------


async def test_a_principal_holding_its_most_requests_open_gets_429_and_another_does_not(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    # The body timeout is long here: the stalled uploads must stay open for the test's length.
    extra = "  max_requests_per_principal: 2\n  body_timeout: 10m\n"
    async with open_keyed_server(workspace, make_kernel, extra) as server:
        uploads = [await _connect(server) for _ in range(2)]
        try:
            for stream in uploads:  # two bodies that never finish: two requests held open
                await stream.send_all(_head("alice", 10_000) + b"{")
            async with server.client("alice") as alice, server.client("bob") as bob:
                # Counted once the server has read their headers: asked until it answers 429.
                with trio.fail_after(PATIENCE):
                    while True:
                        refused = await alice.get("/agents")
                        if refused.status_code == 429:
                            break
                        assert refused.status_code == 200, refused.text
                        await trio.sleep(0.01)
                assert refused.headers["retry-after"] == "1"
                assert refused.json()["limit"] == {
                    "scope": "requests",
                    "max": 2,
                    "key": "server.max_requests_per_principal",
                }
                # A third upload is refused before its body is read.
                third = await _connect(server)
                async with third:
                    await third.send_all(_head("alice", 10_000))
                    answer = await _read_answer(third)
                    assert answer.status == 429
                    assert await _closed_by_server(third)
                # bob is not held back by alice's requests.
                assert (await bob.get("/agents")).status_code == 200
                # Hanging up frees a place.
                await uploads[0].aclose()
                with trio.fail_after(PATIENCE):
                    while True:
                        again = await alice.get("/agents")
                        if again.status_code != 429:
                            break
                        await trio.sleep(0.01)
                assert again.status_code == 200
                # The cap is read at each request: an admin's PATCH applies to the next one
                # (the other upload still holds its place).
                async with server.client("root") as root:
                    change = {"changes": {"server": {"max_requests_per_principal": 1}}}
                    assert (await root.patch("/config", json=change)).status_code == 200
                lowered = await alice.get("/agents")
                assert lowered.status_code == 429
                assert lowered.json()["limit"]["max"] == 1
        finally:
            for stream in uploads:
                await stream.aclose()


async def test_the_request_settings_are_checked_naming_the_key(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    for line, key, expected in [
        ("  max_requests_per_principal: -1\n", "server.max_requests_per_principal", "0 or more"),
        ("  body_min_rate: -5\n", "server.body_min_rate", "0 or more"),
        ("  body_timeout: -1s\n", "server.body_timeout", "cannot be negative"),
    ]:
        workspace.write_config(keyed_config(line))
        with pytest.raises(ConfigError) as raised:
            make_kernel()
        assert key in str(raised.value)
        assert expected in str(raised.value)


def test_the_defaults_are_generous(make_kernel: Callable[..., Kernel]) -> None:
    server = make_kernel().config.section("server")
    assert server.body_timeout.seconds == 30
    assert server.body_min_rate == 500
    assert server.max_requests_per_principal == 200
    # Above the streams and runs one principal may hold at once.
    assert server.max_requests_per_principal > server.max_streams_per_principal + 50


# -- WebSocket -------------------------------------------------------------------------------

UPGRADE = (
    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


async def _upgrade(server: Server, who: str | None, host: str = "127.0.0.1") -> Answer:
    stream = await _connect(server)
    async with stream:
        head = _head(who, None, path="/api/v1/runs/r1/events", method="GET", extra=UPGRADE)
        await stream.send_all(head.replace(b"Host: 127.0.0.1", f"Host: {host}".encode()))
        answer = await _read_answer(stream)
        assert await _closed_by_server(stream)
    return answer


async def test_a_websocket_upgrade_is_a_4xx_after_the_host_and_key_checks_never_a_500(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    foreign = await _upgrade(server, "alice", host="evil.example")
    assert foreign.status == 421, foreign
    assert foreign.json()["status"] == 421
    anonymous = await _upgrade(server, None)
    assert anonymous.status == 401, anonymous
    assert anonymous.json()["error"] == "missing or invalid bearer token"
    for _ in range(20):
        refused = await _upgrade(server, "alice")
        assert refused.status == 400, refused
        assert refused.headers["content-type"] == "application/json"
        assert "WebSocket" in refused.json()["error"]
    noisy = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert noisy == [], [r.getMessage() for r in noisy]


# -- rotating a key --------------------------------------------------------------------------


async def test_rotating_a_key_revokes_the_events_tokens_minted_for_it(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    async with open_server(make_kernel) as first, first.client("alice") as alice:
        done = await alice.post("/chat/stream", json={"agent_id": "echo", "text": "go"})
        token = done.headers["soulacy-events-token"]
        run_id = sse_events(done.text)[0]["data"]["run_id"]
    path = f"/runs/{run_id}/events"
    # Restarted with the same keys, the token still reads the run (the store keeps the secret)…
    async with open_server(make_kernel) as same, same.client(None) as browser:
        assert (await browser.get(path, params={"token": token})).status_code == 200
    # …but once alice's key is rotated, what was minted for the old key is refused.
    workspace.write_config(keyed_config().replace("key-alice", "key-alice-rotated"))
    async with open_server(make_kernel) as rotated, rotated.client(None) as browser:
        refused = await browser.get(path, params={"token": token})
        assert refused.status_code == 401, refused.text
        assert token not in refused.text
        # alice's new key still gets her a token that works.
        new = rotated.client(None)
        new.headers["authorization"] = "Bearer key-alice-rotated"
        async with new:
            fresh = (await new.post(f"/runs/{run_id}/token")).json()["token"]
        assert (await browser.get(path, params={"token": fresh})).status_code == 200


def test_the_openapi_document_lists_these_answers() -> None:
    document = json.loads(
        (Path(__file__).parents[3] / "plugins" / "http" / "openapi.json").read_text()
    )
    scopes = document["components"]["schemas"]["CapacityError"]["properties"]["limit"]
    assert "requests" in scopes["properties"]["scope"]["enum"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "put", "post", "patch", "delete"):
                continue  # a path item's own keys (servers, parameters)
            answers = operation["responses"]
            if operation.get("security") != []:  # a key is needed: requests are counted
                assert "429" in answers, (method, path)
            if "requestBody" in operation:  # a body is read: it must come in time
                assert "408" in answers, (method, path)
