"""The HTTP/SSE transport against a real server on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _support.http_server import KEYS, Server, serve_in_thread, sse_events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

OPENAPI = Path(__file__).parents[3] / "plugins" / "http" / "openapi.json"


async def test_chat_returns_the_reply_with_its_metadata(server: Server) -> None:
    async with server.client() as client:
        response = await client.post(
            "/chat", json={"agent_id": "echo", "text": "hi", "session_id": "s1"}
        )
    assert response.status_code == 200
    body = response.json()
    assert (body["reply"], body["session_id"], body["status"], body["verification"]) == (
        "hello there",
        "s1",
        "completed",
        "unverified",
    )
    assert body["metadata"]["run_id"] == body["run_id"]
    assert body["metadata"]["proof"]["sha256"]


async def test_the_stream_ends_with_a_result_event_with_ids_on_every_event(
    server: Server,
) -> None:
    async with server.client() as client:
        response = await client.post("/chat/stream", json={"agent_id": "tooly", "text": "go"})
    events = sse_events(response.text)
    names = [e["event"] for e in events]
    assert names[:2] == ["run", "run.limits"]
    assert "tool.call" in names
    assert "tool.result" in names
    assert names[-1] == "result"
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    result = events[-1]["data"]
    assert result["reply"] == "done"
    assert result["run_id"] == events[0]["data"]["run_id"]
    assert result["metadata"]["status"] == "completed"


async def test_a_dropped_stream_resumes_with_last_event_id_exactly_once(server: Server) -> None:
    async with server.client() as client:
        full = sse_events(
            (
                await client.post(
                    "/chat/stream", json={"agent_id": "tooly", "text": "go", "run_id": "resume-1"}
                )
            ).text
        )
        # A client that saw the first three events reconnects with the last id it got.
        response = await client.get("/runs/resume-1/events", headers={"Last-Event-ID": "3"})
    rest = sse_events(response.text)
    assert [e["id"] for e in rest] == [e["id"] for e in full[3:]]
    assert rest[-1]["event"] == "result"
    assert rest[-1]["data"] == full[-1]["data"]


async def test_a_client_that_disconnects_does_not_cancel_the_run(server: Server) -> None:
    # A raw socket: read until the first event, then hang up mid-stream.
    host, port = server.url.removeprefix("http://").split(":")
    body = json.dumps({"agent_id": "slow", "text": "go", "run_id": "walk-away"}).encode()
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(
        b"POST /api/v1/chat/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + b"Content-Type: application/json\r\n"
        + f"Authorization: Bearer {KEYS['alice']}\r\n".encode()
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    received = b""
    while b"event: run" not in received:
        chunk = await stream.receive_some(65536)
        assert chunk, received  # the server must not hang up first
        received += chunk
    await stream.aclose()
    async with server.client() as client:
        await trio.sleep(0.2)
        run = (await client.get("/runs/walk-away")).json()
        assert run["running"] is True
        assert (await client.post("/chat/cancel", json={"run_id": "walk-away"})).json() == {
            "run_id": "walk-away",
            "cancelled": True,
        }
        events = sse_events((await client.get("/runs/walk-away/events")).text)
    assert events[-1]["event"] == "result"
    assert events[-1]["data"]["status"] == "cancelled"


async def test_cancel_stops_the_right_run_only(server: Server) -> None:
    results: dict[str, Any] = {}

    async def chat(run_id: str) -> None:
        async with server.client() as client:
            response = await client.post(
                "/chat",
                json={"agent_id": "slow", "text": "x", "run_id": run_id, "session_id": run_id},
            )
            results[run_id] = response.json()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(chat, "keep")
        nursery.start_soon(chat, "stop")
        await trio.sleep(0.5)
        async with server.client() as client:
            assert (await client.post("/chat/cancel", json={"run_id": "stop"})).json()["cancelled"]
        await trio.sleep(0.2)
        assert "keep" not in results
        server.kernel.cancel_run("keep")  # end the test: the other run was never touched
    assert results["stop"]["status"] == "cancelled"


ROUTES = [
    ("GET", "/runs/{run}", None),
    ("GET", "/runs/{run}/events", None),
    ("GET", "/history/{session}", None),
    ("POST", "/chat/cancel", {"run_id": "{run}"}),
    ("POST", "/chat", {"agent_id": "echo", "text": "x", "run_id": "{run}"}),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
async def test_another_principals_run_is_not_found_on_every_route(
    server: Server, method: str, path: str, body: dict[str, Any] | None
) -> None:
    async with server.client("alice") as alice:
        done = (
            await alice.post(
                "/chat", json={"agent_id": "echo", "text": "secret", "session_id": "alice-s"}
            )
        ).json()
    run, session = done["run_id"], "alice-s"
    fill = lambda s: s.replace("{run}", run).replace("{session}", session)  # noqa: E731
    async with server.client("bob") as bob:
        payload = json.loads(fill(json.dumps(body))) if body else None
        response = await bob.request(method, fill(path), json=payload)
    assert response.status_code == 404, response.text
    assert "secret" not in response.text


@pytest.mark.parametrize(("who", "status"), [(None, 401), ("wrong", 401)])
async def test_requests_without_a_valid_token_are_refused(
    server: Server, who: str | None, status: int
) -> None:
    headers = {"Authorization": "Bearer nope"} if who == "wrong" else {}
    async with httpx.AsyncClient(base_url=server.url + "/api/v1", headers=headers) as client:
        assert (await client.get("/agents")).status_code == status
        assert (await client.get("/health")).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "x"}, "agent_id"),
        ({"agent_id": "echo", "text": 5}, "text"),
        ({"agent_id": "echo", "text": "x", "session_id": "a b"}, "session_id"),
        ({"agent_id": "echo", "text": "x", "surprise": 1}, "surprise"),
        ({"agent_id": "echo", "text": "x", "overrides": {"max_turns": "many"}}, "max_turns"),
    ],
)
async def test_invalid_bodies_are_4xx_naming_the_field(
    server: Server, body: dict[str, Any], field: str
) -> None:
    async with server.client() as client:
        response = await client.post("/chat", json=body)
    assert response.status_code == 422, response.text
    assert any(field in key for key in response.json()["fields"]), response.json()


async def test_malformed_and_oversized_bodies(server: Server) -> None:
    async with server.client() as client:
        json_type = {"Content-Type": "application/json"}
        bad = await client.post("/chat", content=b"{not json", headers=json_type)
        assert bad.status_code == 400
        assert (
            await client.post("/chat", json={"agent_id": "ghost", "text": "x"})
        ).status_code == 404
        assert (await client.get("/nowhere")).status_code == 404
        assert (await client.delete("/chat")).status_code == 405


async def test_an_oversized_body_is_refused_before_it_is_read(server: Server) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(
        b"POST /api/v1/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000000\r\n"
        + b"Content-Type: application/json\r\n"
        + f"Authorization: Bearer {KEYS['alice']}\r\n\r\n".encode()
    )
    answer = b""
    while not answer.endswith(b"}"):
        chunk = await stream.receive_some(65536)
        assert chunk, answer
        answer += chunk
    await stream.aclose()
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"request body larger than 1048576 bytes" in answer


async def test_agents_and_their_preparation(server: Server) -> None:
    async with server.client() as client:
        agents = (await client.get("/agents")).json()["agents"]
        prep = (await client.get("/agents/echo/preparation")).json()
    assert {a["id"] for a in agents} == {"echo", "slow", "tooly"}
    assert prep["policy"]["max_turns"] == {"value": 256, "unlimited": False, "source": "default"}
    assert prep["policy"]["http_timeout"]["text"] == "48h1m"


async def test_history_keeps_reply_metadata(server: Server) -> None:
    async with server.client() as client:
        for text in ("one", "two"):
            await client.post(
                "/chat", json={"agent_id": "echo", "text": text, "session_id": "hist"}
            )
        entries = (await client.get("/history/hist")).json()["entries"]
    assert [e["content"] for e in entries] == ["one", "hello there", "two", "hello there"]
    assert all(e["metadata"]["status"] == "completed" for e in entries)


async def test_config_is_for_admins_and_patches_changed_fields_only(
    server: Server,
) -> None:
    path = server.kernel.config_file
    async with server.client("alice") as alice:
        assert (await alice.get("/config")).status_code == 403
    async with server.client("root") as root:
        shown = (await root.get("/config")).json()["config"]
        assert shown["server"]["api_keys"]["alice"] == "***"
        before = path.read_bytes()
        bad = await root.patch(
            "/config", json={"changes": {"runtime": {"default_max_turns": "lots"}}}
        )
        assert bad.status_code == 422
        assert "runtime.default_max_turns" in bad.json()["fields"]
        assert path.read_bytes() == before  # nothing saved
        ok = await root.patch("/config", json={"changes": {"runtime": {"max_turns_ceiling": 50}}})
        assert ok.json() == {"changed": ["runtime.max_turns_ceiling"]}
    text = path.read_text()
    assert "max_turns_ceiling: 50" in text
    assert "api_keys" in text  # the other saved values of the file are kept


async def test_the_served_openapi_document_is_the_one_in_the_repo(server: Server) -> None:
    async with server.client(None) as client:
        served = (await client.get("/openapi.json")).json()
    assert served == json.loads(OPENAPI.read_text())
    assert set(served["paths"]) >= {
        "/chat",
        "/chat/stream",
        "/chat/cancel",
        "/history/{session_id}",
        "/runs/{run_id}",
        "/runs/{run_id}/events",
        "/agents",
        "/agents/{agent_id}/preparation",
        "/config",
        "/health",
    }


def test_the_openapi_document_says_how_a_chat_can_end() -> None:
    """Every status a run ends with is in the chat response's enumeration, and both chat routes
    document the ``503`` (with ``Retry-After``) of a server that is stopping."""
    from typing import get_args

    from soulacy.kernel.engine import Status

    doc = json.loads(OPENAPI.read_text())
    statuses = doc["components"]["schemas"]["ChatResponse"]["properties"]["status"]["enum"]
    assert set(statuses) == set(get_args(Status))
    for path in ("/chat", "/chat/stream"):
        answer = doc["paths"][path]["post"]["responses"].get("503")
        assert answer is not None, path
        name = answer["$ref"].rsplit("/", 1)[-1]
        unavailable = doc["components"]["responses"][name]
        assert unavailable["headers"]["Retry-After"]["required"] is True
        assert "shutting down" in unavailable["description"]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def bodies(schema_name: str) -> st.SearchStrategy[Any]:
    """Bodies near the schema: its fields with values of any type, plus junk."""
    schema = json.loads(OPENAPI.read_text())["components"]["schemas"][schema_name]
    fields = st.fixed_dictionaries({}, optional={k: JSON for k in schema["properties"]})
    return fields | JSON


def test_fuzzed_bodies_never_get_a_5xx(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    keys = ", ".join(f"{p}: {k}" for p, k in KEYS.items())
    workspace.write_config(f"server:\n  port: 0\n  api_keys: {{{keys}}}\n  admins: [root]\n")
    workspace.scripted_agent("echo", [{"text": "hello"}], repeat=True)
    headers = {"Authorization": f"Bearer {KEYS['root']}"}
    with (
        serve_in_thread(make_kernel) as url,
        httpx.Client(base_url=url + "/api/v1", headers=headers, timeout=60) as client,
    ):

        @settings(
            max_examples=150,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        @given(data=st.data())
        def check(data: st.DataObject) -> None:
            method, route, schema = data.draw(st.sampled_from(FUZZED))
            body = data.draw(bodies(schema))
            response = client.request(method, route, json=body)
            assert response.status_code < 500, (route, body, response.text)
            assert response.headers["content-type"].startswith(
                ("application/json", "text/event-stream")
            )

        check()


FUZZED = [
    ("POST", "/chat", "ChatRequest"),
    ("POST", "/chat/stream", "ChatRequest"),
    ("POST", "/chat/cancel", "CancelRequest"),
    ("PATCH", "/config", "ConfigPatch"),
]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("events_per_run: 0", "server.events_per_run: expected 1 or more"),
        ("port: 70000", "server.port: expected 0 to 65535"),
    ],
)
def test_server_settings_are_validated(
    workspace: Workspace, make_kernel: Callable[..., Kernel], setting: str, message: str
) -> None:
    from soulacy.kernel import ConfigError

    workspace.write_config(f"server:\n  {setting}\n")
    with pytest.raises(ConfigError, match=message):
        make_kernel()


async def test_a_stored_run_of_another_principal_is_not_confirmed(server: Server) -> None:
    async with server.client("alice") as alice:
        await alice.post("/chat", json={"agent_id": "echo", "text": "x", "run_id": "mine"})
    from soulacy.plugins.http import run_logs

    run_logs(server.kernel)._logs.pop("mine")  # as after a restart: the log is gone
    async with server.client("bob") as bob:
        response = await bob.post("/chat", json={"agent_id": "echo", "text": "x", "run_id": "mine"})
    assert response.status_code == 404
