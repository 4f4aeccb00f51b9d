"""Hostile input to the HTTP transport is a 4xx naming what is wrong, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio
from _support.http_server import Server, host_port, open_keyed_server

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

JSON_ROUTES = [
    ("POST", "/chat"),
    ("POST", "/chat/stream"),
    ("POST", "/chat/cancel"),
    ("PATCH", "/config"),
]


@pytest.fixture
async def server(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> AsyncIterator[Server]:
    async with open_keyed_server(workspace, make_kernel) as running:
        yield running


@pytest.mark.parametrize(("method", "path"), JSON_ROUTES)
@pytest.mark.parametrize("body", [b"null", b"[]", b"42", b'"text"', b"true"])
async def test_a_body_that_is_not_an_object_is_a_422_naming_the_body(
    server: Server, method: str, path: str, body: bytes
) -> None:
    async with server.client("root") as client:
        response = await client.request(
            method, path, content=body, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 422, response.text
    assert "body" in response.json()["fields"]


@pytest.mark.parametrize(("method", "path"), JSON_ROUTES)
@pytest.mark.parametrize("opening", [b"[", b'{"a":'])
async def test_deeply_nested_json_is_refused_naming_the_body(
    server: Server, method: str, path: str, opening: bytes
) -> None:
    body = opening * (200_000 // len(opening))
    async with server.client("root") as client:
        response = await client.request(
            method, path, content=body, headers={"Content-Type": "application/json"}
        )
    assert response.status_code in (413, 422), response.text
    assert "body" in response.json()["fields"]
    assert "nest" in response.json()["fields"]["body"]


@pytest.mark.parametrize("value", ["²", "٣", "1.5", "-1", "1" * 40])
async def test_a_last_event_id_that_is_not_ascii_digits_is_a_400_naming_the_header(
    server: Server, value: str
) -> None:
    async with server.client() as client:
        run = (await client.post("/chat", json={"agent_id": "echo", "text": "x"})).json()
        try:  # one byte per character where it can be (the server reads headers as latin-1)
            raw = value.encode("latin-1")
        except UnicodeEncodeError:
            raw = value.encode()
        headers = [(b"Last-Event-ID", raw)]
        response = await client.get(f"/runs/{run['run_id']}/events", headers=headers)
    assert response.status_code == 400, response.text
    assert "Last-Event-ID" in response.json()["fields"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/chat", "POST"),
        ("GET", "/chat/stream", "POST"),
        ("PUT", "/config", "GET, PATCH"),
        ("POST", "/health", "GET"),
        ("DELETE", "/runs/x/events", "GET"),
        ("PATCH", "/agents", "GET"),
    ],
)
async def test_every_405_carries_an_allow_header(
    server: Server, method: str, path: str, allowed: str
) -> None:
    async with server.client() as client:
        response = await client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allowed


@pytest.mark.parametrize(("method", "path"), JSON_ROUTES)
@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"],
)
async def test_json_routes_accept_only_application_json(
    server: Server, method: str, path: str, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    async with server.client("root") as client:
        response = await client.request(
            method, path, content=b'{"agent_id": "echo", "text": "x"}', headers=headers
        )
    assert response.status_code == 415, response.text
    assert response.json()["fields"] == {"Content-Type": "expected application/json"}


async def test_application_json_with_a_charset_is_accepted(server: Server) -> None:
    async with server.client() as client:
        response = await client.post(
            "/chat",
            content=b'{"agent_id": "echo", "text": "x"}',
            headers={"Content-Type": "Application/JSON; charset=utf-8"},
        )
    assert response.status_code == 200, response.text


async def test_a_run_refused_for_its_content_type_never_starts(server: Server) -> None:
    async with server.client() as client:
        response = await client.post(
            "/chat",
            content=b'{"agent_id": "echo", "text": "x", "run_id": "plain-text"}',
            headers={"Content-Type": "text/plain"},
        )
        assert response.status_code == 415
        assert (await client.get("/runs/plain-text")).status_code == 404


async def test_no_error_answer_shows_a_traceback(server: Server) -> None:
    # A raw request with a body that claims more than it sends, then hangs up.
    stream = await trio.open_tcp_stream(*host_port(server.url))
    await stream.send_all(
        b"POST /api/v1/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer key-alice\r\nContent-Length: 100\r\n\r\n{"
    )
    await stream.aclose()
    async with server.client() as client:
        assert (await client.get("/agents")).status_code == 200  # still serving


@pytest.mark.parametrize("run_id", ["a/b", "../x", "", "x" * 201])
async def test_a_run_id_outside_the_id_alphabet_is_a_422_naming_it(
    server: Server, run_id: str
) -> None:
    async with server.client() as client:
        response = await client.post(
            "/chat", json={"agent_id": "echo", "text": "x", "run_id": run_id}
        )
    assert response.status_code == 422, response.text
    assert "run_id" in response.json()["fields"]
