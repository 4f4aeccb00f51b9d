"""Routes other plugins add through ``soulacy_http_routes`` are served behind the same guards as
the HTTP plugin's own: Host, Origin, keys and principals, admins, body limits, JSON errors."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel, PluginError, hookimpl
from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse, HttpRoute, StreamWriter
from soulacy.testing import Workspace, throwaway_plugin

ALONE = ["no:portal"]  # the HTTP plugin's mechanism alone: the builtin portal adds routes too
NOTES: dict[str, str] = {}  # note id -> owner, the throwaway plugin's "store"


async def whoami(request: HttpRequest) -> HttpResponse:
    return HttpResponse.json({"principal": request.principal, "admin": request.is_admin})


async def add_note(request: HttpRequest) -> HttpResponse:
    body = await request.json()
    if not isinstance(body, dict) or not isinstance(body.get("id"), str):
        raise HttpError(422, "invalid request body", {"id": "expected a string"})
    NOTES[body["id"]] = request.principal or ""
    return HttpResponse.json({"id": body["id"]}, status=201)


async def get_note(request: HttpRequest) -> HttpResponse:
    note = request.params["note_id"]
    if note not in NOTES or not request.sees(NOTES[note]):
        raise HttpError(404, f"no note {note!r}")
    return HttpResponse.json({"id": note, "owner": NOTES[note]})


async def admin_only(request: HttpRequest) -> HttpResponse:
    return HttpResponse.json({"secret": "for admins"})


async def page(request: HttpRequest) -> HttpResponse:
    return HttpResponse(200, b"<h1>hi</h1>", {"content-type": "text/html"})


async def broken(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug with api_key=sk-123456789")


def routes(kernel: Kernel) -> Sequence[HttpRoute]:
    return [
        HttpRoute("GET", "/whoami", whoami),
        HttpRoute("POST", "/notes", add_note),
        HttpRoute("GET", "/notes/(?P<note_id>[^/]+)", get_note),
        HttpRoute("GET", "/admin-only", admin_only, auth="admin"),
        HttpRoute("POST", "/agents/(?P<agent_id>[^/]+)/poke", add_note, auth="admin"),
        HttpRoute("GET", "/broken", broken),
        HttpRoute("GET", "/hello", page, auth="none", api=False),
        HttpRoute("POST", "/agents", add_note),  # GET /agents is the plugin's own
    ]


def plugin(**hooks: Any) -> Any:
    return throwaway_plugin("notes", **hooks)


@pytest.fixture
def keyed(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    workspace.scripted_agent("echo", [{"text": "hi"}], repeat=True)
    NOTES.clear()
    return workspace


async def test_a_contributed_route_answers_each_principal_as_itself(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    extra = [plugin(soulacy_http_routes=routes)]
    async with open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server:
        async with server.client("alice") as alice, server.client("bob") as bob:
            assert (await alice.get("/whoami")).json() == {"principal": "alice", "admin": False}
            assert (await bob.get("/whoami")).json() == {"principal": "bob", "admin": False}
            created = await alice.post("/notes", json={"id": "n1"})
            assert created.status_code == 201, created.text
            assert (await alice.get("/notes/n1")).json() == {"id": "n1", "owner": "alice"}
            # Bob gets what he would get for a note that does not exist.
            other = await bob.get("/notes/n1")
            assert other.status_code == 404
            assert other.json() == {"error": "no note 'n1'", "status": 404}
        async with server.client(None) as nobody:
            missing = await nobody.get("/whoami")
            assert missing.status_code == 401
            assert missing.json()["error"] == "missing or invalid bearer token"
            wrong = await nobody.get("/whoami", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401


async def test_an_admin_route_is_refused_to_other_principals(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    extra = [plugin(soulacy_http_routes=routes)]
    async with (
        open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server,
        server.client("alice") as alice,
        server.client("root") as root,
    ):
        refused = await alice.get("/admin-only")
        assert refused.status_code == 403
        assert refused.json()["error"] == "this principal is not an admin (server.admins)"
        assert (await root.get("/admin-only")).json() == {"secret": "for admins"}
        poke = await alice.post("/agents/echo/poke", json={"id": "x"})
        assert poke.status_code == 403
        assert "x" not in NOTES  # refused before the handler ran


async def test_contributed_routes_obey_the_host_and_origin_guards_and_body_limits(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    extra = [plugin(soulacy_http_routes=routes)]
    async with (
        open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server,
        server.client("alice") as alice,
    ):
        rebinding = await alice.get("/whoami", headers={"Host": "evil.example"})
        assert rebinding.status_code == 421
        forged = await alice.post(
            "/notes", json={"id": "csrf"}, headers={"Origin": "http://evil.example"}
        )
        assert forged.status_code == 403
        assert "csrf" not in NOTES
        host = server.url.removeprefix("http://")
        same = await alice.post("/notes", json={"id": "same"}, headers={"Origin": f"http://{host}"})
        assert same.status_code == 201
        form = await alice.post(
            "/notes", content=b'{"id": "form"}', headers={"content-type": "text/plain"}
        )
        assert form.status_code == 415
        deep = await alice.post(
            "/notes",
            content=b"[" * 100 + b"]" * 100,
            headers={"content-type": "application/json"},
        )
        assert deep.status_code == 422
        assert set(NOTES) == {"same"}


async def test_methods_of_a_path_combine_and_the_plugin_s_own_routes_stay(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    extra = [plugin(soulacy_http_routes=routes)]
    async with (
        open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server,
        server.client("alice") as alice,
    ):
        listed = await alice.get("/agents")
        assert [a["id"] for a in listed.json()["agents"]] == ["echo"]
        assert (await alice.post("/agents", json={"id": "a"})).status_code == 201
        put = await alice.put("/agents", json={})
        assert put.status_code == 405
        assert put.headers["allow"] == "GET, POST"
        assert (await alice.get("/nowhere")).status_code == 404


async def test_pages_are_served_at_the_root_without_a_key_and_api_paths_stay_json(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    extra = [plugin(soulacy_http_routes=routes)]
    async with (
        open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server,
        server.client(None) as nobody,
    ):
        hello = await nobody.get(server.url + "/hello")
        assert hello.status_code == 200
        assert hello.text == "<h1>hi</h1>"
        assert hello.headers["content-type"] == "text/html"
        assert (
            await nobody.get(server.url + "/hello", headers={"Host": "evil.example"})
        ).status_code == 421
        assert (await nobody.get(server.url + "/elsewhere")).status_code == 404
        assert (await nobody.get(server.url + "/api/v2/x")).status_code == 404


async def test_a_failing_handler_is_a_500_with_a_redacted_log_and_the_server_goes_on(
    keyed: Workspace, make_kernel: Callable[..., Kernel], caplog: pytest.LogCaptureFixture
) -> None:
    extra = [plugin(soulacy_http_routes=routes)]
    async with (
        open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server,
        server.client("alice") as alice,
    ):
        failed = await alice.get("/broken")
        assert failed.status_code == 500
        assert failed.json() == {"error": "internal error in GET /api/v1/broken", "status": 500}
        assert (await alice.get("/whoami")).status_code == 200
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "soulacy.http")
    assert "RuntimeError" in logged
    assert "sk-123456789" not in logged


async def test_keyless_loopback_mode_serves_contributed_routes_as_local(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("server:\n  port: 0\n")
    extra = [plugin(soulacy_http_routes=routes)]
    async with (
        open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server,
        server.client(None) as local,
    ):
        assert (await local.get("/whoami")).json() == {"principal": "local", "admin": True}
        assert (await local.get("/admin-only")).status_code == 200


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (HttpRoute("GET", "/agents", whoami), "which is the http plugin's own"),
        (HttpRoute("FETCH", "/x", whoami), "method 'FETCH' is not one of"),
        (HttpRoute("GET", "x", whoami), "the path must start with '/'"),
        (HttpRoute("GET", "/api/x", page, api=False), "a page (api=False) may not be under /api/"),
        (HttpRoute("GET", "/(", whoami), "the path is not a regular expression"),
    ],
)
def test_a_bad_route_is_a_plugin_error_naming_the_plugin(
    keyed: Workspace, make_kernel: Callable[..., Kernel], route: HttpRoute, message: str
) -> None:
    kernel = make_kernel(extra_plugins=[plugin(soulacy_http_routes=lambda: [route])], plugins=ALONE)
    with pytest.raises(PluginError, match="plugin 'notes'") as caught:
        kernel.services()  # the HTTP service collects the routes when it is made
    assert message in str(caught.value)


def test_two_plugins_with_the_same_route_is_an_error_naming_both(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    one = throwaway_plugin("one", soulacy_http_routes=lambda: [HttpRoute("GET", "/x", whoami)])
    two = throwaway_plugin("two", soulacy_http_routes=lambda: [HttpRoute("GET", "/x", page)])
    with pytest.raises(PluginError) as caught:
        make_kernel(extra_plugins=[one, two], plugins=ALONE).services()
    assert str(caught.value) == "plugins 'one' and 'two' both define the HTTP route 'GET /api/v1/x'"


def test_an_optional_implementation_loads_with_the_http_plugin_disabled(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    class Optional:
        @hookimpl(optionalhook=True)
        def soulacy_http_routes(self) -> Sequence[HttpRoute]:
            return []

    kernel = make_kernel(plugins=["no:http"], extra_plugins=[Optional()])
    assert kernel.pm.has_plugin("http") is False


class Ticker:
    """A streamed route: one chunk, then another only once the test says so; it records how its
    producer ended."""

    def __init__(self) -> None:
        self.go_on = trio.Event()
        self.ended = trio.Event()
        self.how = ""

    async def stream(self, request: HttpRequest) -> HttpResponse:
        async def produce(write: StreamWriter) -> None:
            try:
                await write(b"data: first\n\n")
                await self.go_on.wait()
                await write(b"data: second\n\n")
                self.how = "returned"
            except trio.Cancelled:
                self.how = "cancelled"
                raise
            finally:
                self.ended.set()

        return HttpResponse.streamed(produce, {"content-type": "text/event-stream"})

    def routes(self, kernel: Kernel) -> Sequence[HttpRoute]:
        return [HttpRoute("GET", "/ticks", self.stream)]


async def test_a_streamed_answer_is_sent_as_it_is_written_and_stops_with_its_client(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    ticker = Ticker()
    extra = [plugin(soulacy_http_routes=ticker.routes)]
    async with (
        open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server,
        server.client("alice") as alice,
    ):
        async with alice.stream("GET", "/ticks") as response:
            chunks = response.aiter_raw()
            first = await anext(chunks)  # while the producer waits: sent as written
            assert "content-length" not in response.headers
            ticker.go_on.set()
            rest = b"".join([chunk async for chunk in chunks])
        assert (first, rest, ticker.how) == (b"data: first\n\n", b"data: second\n\n", "returned")


async def test_a_streamed_answer_is_cancelled_when_its_client_disconnects(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    ticker = Ticker()
    extra = [plugin(soulacy_http_routes=ticker.routes)]
    async with (
        open_server(make_kernel, extra_plugins=extra, plugins=ALONE) as server,
        server.client("alice") as alice,
    ):
        async with alice.stream("GET", "/ticks") as response:
            chunks = response.aiter_raw()
            assert await anext(chunks) == b"data: first\n\n"
            # gone before the second chunk (httpx's readers end once the connection closed)
            await response.aclose()
            with contextlib.suppress(Exception):
                async for _ in chunks:
                    pass
        await ticker.ended.wait()
        assert ticker.how == "cancelled"
