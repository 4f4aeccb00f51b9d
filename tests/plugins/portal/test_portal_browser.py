"""The portal in a real browser: Debian's Chromium driven by Playwright, against a real
``soulacy serve`` on loopback. Without a browser these tests skip, saying why.

Each page's screenshot is saved to $SOULACY_PORTAL_SCREENSHOTS (docs/portal.md shows them), or
to the test's temporary folder.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.http_server import CHROMIUM, KEYS
from portal_support import add_agents, advanced_config, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)
TIMEOUT = 30_000  # ms


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SOULACY_PORTAL_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def page_with_key(browser: Any, key: str | None, width: int = 1280, height: int = 900) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height})
    if key:
        context.add_init_script(f"sessionStorage.setItem('soulacy-key', {json.dumps(key)})")
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.errors = errors  # type: ignore[attr-defined]
    return page


def hide_toast(page: Any) -> None:
    page.evaluate("document.getElementById('toast').hidden = true")


def no_page_errors(page: Any, allowed: tuple[str, ...] = ()) -> None:
    found = [e for e in page.errors if not any(a in e for a in allowed)]
    assert found == [], found


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


# -- Settings ----------------------------------------------------------------------------------


def test_settings_open_in_everyday_keep_pending_edits_across_views_and_save_one_line(
    workspace: Workspace, browser: Any, shots: Path
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    config = workspace.path / "config.yaml"
    before = config.read_text()
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, KEYS["root"])
        page.goto(url + "/")
        page.get_by_role("link", name="Settings").click()  # in the simple menu
        everyday = page.get_by_role("button", name="Everyday")
        advanced = page.get_by_role("button", name="Advanced")
        assert everyday.get_attribute("aria-pressed") == "true"
        assert page.get_by_role("heading", name="Provider").is_visible()
        for card in ("Search", "Memory", "Updates", "Support"):
            assert page.get_by_role("heading", name=card, exact=True).is_visible(), card
        assert page.get_by_role("heading", name="Execution limits").is_hidden()
        page.get_by_text("search", exact=True).first.wait_for()  # the kept search: section
        page.screenshot(path=str(shots / "settings-everyday.png"))

        provider = page.get_by_label("Workspace provider", exact=True)
        assert provider.input_value() == "scripted"
        provider.fill("local")
        assert page.locator(".pending").inner_text() == "1 unsaved change"

        advanced.click()
        assert advanced.get_attribute("aria-pressed") == "true"
        turns = page.get_by_label("Default max turns", exact=True)
        assert turns.is_visible()
        assert turns.is_enabled()
        assert turns.input_value() == "300"  # the override, intact
        assert (
            "config.yaml line 16"
            in page.locator(".field[data-key='runtime.default_max_turns']").inner_text()
        )
        assert page.get_by_label("Build attempts", exact=True).input_value() == "12"
        assert page.get_by_label("Dollar budget per run", exact=True).input_value() == "3"
        page.evaluate("document.getElementById('card-execution-limits').scrollIntoView()")
        page.screenshot(path=str(shots / "settings-advanced.png"))

        everyday.click()
        assert provider.input_value() == "local"  # the pending edit survived
        assert page.locator(".pending").inner_text() == "1 unsaved change"
        page.get_by_role("button", name="Save changes").click()
        page.locator(".save-status", has_text="Saved:").wait_for()
        assert page.get_by_role("button", name="Everyday").get_attribute("aria-pressed") == "true"
        no_page_errors(page)
        page.context.close()
    assert changed_lines(before, config.read_text()) == [
        "-    provider: scripted   # the workspace provider",
        "+    provider: local      # the workspace provider",
    ]


def test_zero_turns_in_settings_makes_the_resolved_policy_unlimited_with_its_source(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, KEYS["root"])
        page.goto(url + "/#/settings")
        page.get_by_role("button", name="Advanced").click()
        page.get_by_label("Default max turns", exact=True).fill("0")
        page.get_by_label("Max turns ceiling", exact=True).fill("0")
        assert page.locator(".pending").inner_text() == "2 unsaved changes"
        page.get_by_role("button", name="Save changes").click()
        page.locator(".save-status", has_text="Saved:").wait_for()
        assert page.get_by_role("button", name="Advanced").get_attribute("aria-pressed") == "true"
        page.goto(url + "/#/agents/echo")
        row = page.locator("tr[data-limit='max_turns']")
        row.wait_for()
        assert row.locator("td.value").inner_text() == "unlimited"
        assert "config.yaml" in row.locator("td.source").inner_text()
        no_page_errors(page)
        page.context.close()
    text = (workspace.path / "config.yaml").read_text()
    assert re.search(r"\n  default_max_turns: 0 +# generous\n", text)
    assert "  max_turns_ceiling: 0\n" in text


# -- the agent editor --------------------------------------------------------------------------


def test_the_editor_creates_an_agent_without_caps_and_edits_one_key_keeping_the_rest(
    workspace: Workspace, browser: Any, shots: Path
) -> None:
    workspace.write_config("llm:\n  default: {provider: scripted}\nserver:\n  port: 0\n")
    workspace.scripted_agent("echo", [{"text": "hi"}], repeat=True)
    soul = workspace.path / "agents" / "writer" / "SOUL.yaml"
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, None)  # keyless loopback mode: local, an admin
        page.goto(url + "/#/agents")
        page.get_by_label("Agent id").fill("writer")
        page.get_by_label("Name", exact=True).fill("Writer")
        page.get_by_label("Description", exact=True).fill("drafts text")
        page.get_by_role("button", name="Create agent").click()
        page.get_by_role("heading", name="Writer", exact=True).wait_for()
        created = soul.read_text()
        for cap in ("max_turns", "budget", "run_timeout", "max_tokens", "top_p", "temperature"):
            assert cap not in created, cap
        assert "provider: scripted" in created
        # A person edits the file by hand: comments and a key of the original system.
        soul.write_text(
            "# Writer: reviewed.\n"
            + created.replace("tools: []", "tools: []  # none yet")
            + "identity: {role: author}   # kept\n"
        )
        before = soul.read_text()
        page.reload()
        # is_visible() does not wait: the reloaded page renders its sections once it has fetched
        # the agent, which a loaded machine may not have done yet.
        page.get_by_role("heading", name="Purpose", exact=True).wait_for()
        for section in ("Purpose", "Model", "Tools", "Permissions"):
            assert page.get_by_role("heading", name=section, exact=True).is_visible(), section
        assert page.get_by_role("heading", name="Limits", exact=True).is_hidden()
        assert page.locator("tr[data-limit='max_turns'] td.value").inner_text() == "256"
        page.get_by_label("Description", exact=True).fill("drafts and edits text")
        page.get_by_role("button", name="Advanced").click()
        turns = page.get_by_label("Max turns", exact=True)
        assert turns.input_value() == ""  # inherits
        assert turns.get_attribute("max") is None  # no fixed ceiling of its own
        assert page.get_by_label("Output tokens per response").get_attribute("max") is None
        page.get_by_role("button", name="Everyday").click()
        assert page.get_by_label("Description", exact=True).input_value() == "drafts and edits text"
        page.get_by_role("button", name="Save agent").click()
        page.locator(".save-status", has_text="Saved: description").wait_for()
        assert changed_lines(before, soul.read_text()) == [
            "-description: drafts text",
            "+description: drafts and edits text",
        ]

        # Advanced: -1 requests unlimited turns; a large output allowance is accepted as it is.
        page.get_by_role("button", name="Advanced").click()
        page.get_by_label("Max turns", exact=True).fill("-1")
        page.get_by_label("Output tokens per response").fill("100000")
        page.get_by_role("button", name="Save agent").click()
        page.locator(".save-status", has_text="Saved:").wait_for()
        row = page.locator("tr[data-limit='max_turns']")
        assert row.locator("td.value").inner_text() == "unlimited"
        assert "SOUL.yaml" in row.locator("td.source").inner_text()
        assert page.get_by_role("button", name="Advanced").get_attribute("aria-pressed") == "true"
        hide_toast(page)
        page.evaluate("document.getElementById('sec-limits').scrollIntoView()")
        page.screenshot(path=str(shots / "agent-editor-advanced.png"))
        page.get_by_role("button", name="Everyday").click()
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(shots / "agent-editor.png"))
        no_page_errors(page)
        page.context.close()
    after = soul.read_text()
    assert "# Writer: reviewed." in after
    assert "tools: []  # none yet" in after
    assert "identity: {role: author}   # kept" in after
    assert "max_turns: -1" in after
    assert "max_tokens: 100000" in after


# -- chat --------------------------------------------------------------------------------------


def chat_workspace(workspace: Workspace) -> None:
    workspace.write_config("llm:\n  default: {provider: scripted}\nserver:\n  port: 0\n")
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    workspace.scripted_agent(
        "short",
        [{"tool": "missing", "arguments": {}}, {"text": "done"}],
        repeat=True,
        max_turns=1,
    )
    workspace.scripted_agent(
        "checked",
        [{"text": "the answer is 42"}],
        repeat=True,
        outcome={"assertions": [{"target": "reply", "op": "contains", "value": "42"}]},
    )


EXPECTED = {
    "echo": ("completed", "Completed · unverified"),
    "short": ("incomplete", "Incomplete: the turn limit was reached (max_turns)"),
    "checked": ("completed", "Completed · verified"),
}


def send(page: Any, agent: str, text: str) -> str:
    """Send ``text`` to ``agent`` in a new conversation; returns its session id."""
    page.locator("#chat-agent").select_option(agent)
    page.get_by_role("button", name="New conversation").click()
    page.locator("#chat-agent").select_option(agent)
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("button", name="Send").click()
    status = EXPECTED[agent][0]
    page.locator(f"article.assistant[data-status='{status}']").wait_for()
    return page.locator(".session").inner_text().removeprefix("session ")


def notices(page: Any) -> list[str]:
    return page.locator("article.assistant .notice").all_inner_texts()


def test_chat_shows_each_reply_s_status_through_a_reload_and_from_durable_history(
    workspace: Workspace, browser: Any, shots: Path
) -> None:
    chat_workspace(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, None)
        page.goto(url + "/#/chat")
        sessions = {agent: send(page, agent, f"hello {agent}") for agent in EXPECTED}
        page.screenshot(path=str(shots / "chat.png"))
        page.reload()
        for agent, session in sessions.items():
            page.goto(f"{url}/#/chat?session={session}")
            page.locator(".msg.user", has_text=f"hello {agent}").wait_for()
            shown = notices(page)
            assert len(shown) == 1, shown
            assert shown[0].startswith(EXPECTED[agent][1]), (agent, shown)

        fresh = page_with_key(browser, None)  # another browser: nothing in local storage
        fresh.goto(url + "/#/chat")
        assert fresh.evaluate("Object.keys(localStorage).length") == 0
        for agent, session in sessions.items():
            fresh.get_by_label("Open a conversation by its session id").fill(session)
            fresh.get_by_role("button", name="Open", exact=True).click()
            fresh.locator(".msg.user", has_text=f"hello {agent}").wait_for()
            shown = notices(fresh)
            assert len(shown) == 1, shown
            assert shown[0].startswith(EXPECTED[agent][1]), (agent, shown)
        no_page_errors(page)
        no_page_errors(fresh)
        page.goto(url + "/#/runs")
        page.locator("table.runs tbody tr").first.wait_for()
        assert page.locator("table.runs tbody tr").count() == 3
        page.screenshot(path=str(shots / "runs.png"))
        page.context.close()
        fresh.context.close()


def test_a_late_result_updates_only_its_own_reply(workspace: Workspace, browser: Any) -> None:
    """The chat's state module in the browser: results are applied by run id."""
    chat_workspace(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, None)
        page.goto(url + "/#/chat")
        outcome = page.evaluate(
            """async () => {
              const s = await import('/portal/chatstate.js');
              const conv = s.newConversation('echo', 's1');
              for (const id of ['r1', 'r2']) {
                conv.messages.push({role: 'user', text: id, run_id: id}, s.pendingReply(id));
              }
              s.applyResult(conv, 'r1', {status: 'incomplete', verification: 'unverified',
                                         incomplete_reason: 'max_turns', reply: 'partial'});
              const before = JSON.stringify(s.reply(conv, 'r1'));
              // r2's final verification arrives later, from durable history:
              s.mergeHistory(conv, [
                {id: 1, run_id: 'r2', role: 'user', content: 'r2', agent_id: 'echo'},
                {id: 2, run_id: 'r2', role: 'assistant', content: 'ok', agent_id: 'echo',
                 metadata: {status: 'completed', verification: 'verified'}},
                {id: 3, run_id: 'r1', role: 'user', content: 'r1', agent_id: 'echo'},
              ]);
              const missing = s.applyResult(conv, 'nope', {status: 'failed'});
              return {before, after: JSON.stringify(s.reply(conv, 'r1')),
                      r2: s.notice(s.reply(conv, 'r2')).text, count: conv.messages.length,
                      r1: s.notice(s.reply(conv, 'r1')).text, missing};
            }"""
        )
        page.context.close()
    assert outcome["after"] == outcome["before"]  # r1 untouched (no final metadata for it)
    assert outcome["r1"] == "Incomplete: the turn limit was reached (max_turns)"
    assert outcome["r2"] == "Completed · verified by its outcome assertions"
    assert outcome["count"] == 4
    assert outcome["missing"] is None


class CuttingProxy:
    """Forwards loopback TCP to the server; cuts the first POST /chat/stream answer right after
    its first delta event, as a dropped connection would."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self.requests: list[str] = []  # request heads seen, for the assertions
        self._lock = threading.Lock()

    def serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(client,), daemon=True).start()

    def _connection(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.target)
        state = {"cut_this": False}

        def pipe_up() -> None:
            try:
                while data := client.recv(65536):
                    head = data.decode("latin-1")
                    if re.match(r"(GET|POST|PUT|PATCH) ", head):
                        with self._lock:
                            self.requests.append(head.split("\r\n\r\n")[0])
                            if (
                                head.startswith("POST /api/v1/chat/stream")
                                and not self.cut.is_set()
                            ):
                                state["cut_this"] = True
                                self.cut.set()
                    upstream.sendall(data)
            except OSError:
                pass

        threading.Thread(target=pipe_up, daemon=True).start()
        try:
            while data := upstream.recv(65536):
                if state["cut_this"] and b"event: delta" in data:
                    end = data.index(b"\n\n", data.index(b"event: delta")) + 2
                    client.sendall(data[:end])
                    time.sleep(1.0)  # let the browser take it in before the line drops
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self.listener.close()


@contextmanager
def cutting_proxy(url: str) -> Iterator[CuttingProxy]:
    host, port = url.removeprefix("http://").split(":")
    proxy = CuttingProxy((host, int(port)))
    threading.Thread(target=proxy.serve, daemon=True).start()
    try:
        yield proxy
    finally:
        proxy.close()


def test_a_stream_cut_mid_reply_resumes_without_losing_or_repeating_text(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config("server:\n  port: 0\n")
    words = " ".join(f"word{n}" for n in range(40))
    workspace.scripted_agent("talker", [{"text": words, "sleep": 0.3}], repeat=True)
    with soulacy_serve(workspace.path) as (url, _), cutting_proxy(url) as proxy:
        page = page_with_key(browser, None)
        page.goto(f"http://127.0.0.1:{proxy.port}/#/chat")
        page.locator("#chat-agent").select_option("talker")
        page.get_by_role("textbox", name="Message").fill("talk to me")
        page.get_by_role("button", name="Send").click()
        page.locator("article.assistant[data-status='completed']").wait_for()
        shown = page.locator("article.assistant .text").inner_text()
        stored = page.evaluate(
            """() => {
              const key = Object.keys(localStorage).find(k => k.startsWith('soulacy-chat:'));
              const state = JSON.parse(localStorage.getItem(key));
              return state.conversations[state.current].messages[1];
            }"""
        )
        page.reload()
        page.locator("article.assistant[data-status='completed']").wait_for()
        after_reload = page.locator("article.assistant .text").inner_text()
        no_page_errors(page, allowed=("Failed to load resource",))
        page.context.close()
    assert proxy.cut.is_set()
    resumed = [r for r in proxy.requests if r.startswith("GET /api/v1/runs/")]
    assert resumed, proxy.requests
    last_ids = [
        int(m.group(1)) for r in resumed if (m := re.search(r"(?im)^last-event-id: *(\d+)", r))
    ]
    assert last_ids, resumed
    assert last_ids[0] >= 3  # run, run.limits and the first delta were received before the cut
    assert stored["streamed"] == words  # every delta applied once, in order
    assert shown == words
    assert after_reload == words
    assert stored["status"] == "completed"


# -- two principals ----------------------------------------------------------------------------


def test_two_principals_see_neither_the_other_s_runs_nor_conversations(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        alice = page_with_key(browser, KEYS["alice"])
        alice.goto(url + "/#/chat")
        alice.locator("#chat-agent").select_option("echo")
        alice.get_by_role("textbox", name="Message").fill("my secret plan")
        alice.get_by_role("button", name="Send").click()
        alice.locator("article.assistant[data-status='completed']").wait_for()
        session = alice.locator(".session").inner_text().removeprefix("session ")
        alice.goto(url + "/#/runs")
        alice.locator("table.runs tbody tr").first.wait_for()
        assert alice.locator("table.runs tbody tr").count() == 1

        bob = page_with_key(browser, None)  # no key yet: the API asks for one
        bob.goto(url + "/#/chat")
        dialog = bob.get_by_role("dialog", name="API key")
        dialog.wait_for()
        bob.get_by_label("Key", exact=True).fill(KEYS["bob"])
        bob.get_by_role("button", name="Use this key").click()
        bob.locator("#chat-agent").wait_for()
        bob.get_by_label("Open a conversation by its session id").fill(session)
        bob.get_by_role("button", name="Open", exact=True).click()
        bob.locator("#toast", has_text="No stored conversation").wait_for()
        assert "my secret plan" not in bob.content()
        bob.goto(url + "/#/runs")
        bob.get_by_text("No runs yet.").wait_for()
        bob.goto(url + "/#/settings")
        bob.get_by_text("Settings need an admin").wait_for()
        bob.goto(url + "/#/agents/echo")
        bob.get_by_text("Editing agents needs an admin").wait_for()
        no_page_errors(alice)
        no_page_errors(bob, allowed=("Failed to load resource",))  # the 401, 403s and 404 asked
        alice.context.close()
        bob.context.close()


def test_the_pages_read_at_360_pixels_wide(workspace: Workspace, browser: Any, shots: Path) -> None:
    chat_workspace(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, None, width=360, height=740)
        for fragment in ("#/chat", "#/settings", "#/agents/echo", "#/runs"):
            page.goto(f"{url}/{fragment}")
            page.locator("main h1").first.wait_for()
            page.wait_for_timeout(300)
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, (fragment, overflow)
        page.goto(url + "/#/chat")
        page.locator("#chat-agent").wait_for()
        page.screenshot(path=str(shots / "chat-360.png"))
        no_page_errors(page)
        page.context.close()


def test_cancel_ends_a_running_reply_as_cancelled(workspace: Workspace, browser: Any) -> None:
    workspace.write_config("server:\n  port: 0\n")
    workspace.scripted_agent("slow", [{"text": "late", "sleep": 30}], repeat=True)
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, None)
        page.goto(url + "/#/chat")
        page.get_by_role("textbox", name="Message").fill("take your time")
        page.get_by_role("button", name="Send").click()
        page.locator("article.assistant[data-status='running']").wait_for()
        page.get_by_role("button", name="Cancel").click()
        page.locator("article.assistant[data-status='cancelled']").wait_for()
        assert notices(page) == ["Cancelled"]
        page.reload()
        page.locator("article.assistant[data-status='cancelled']").wait_for()
        # (cancelled in its first model call, the run stored no entry: the history read is a 404)
        no_page_errors(page, allowed=("Failed to load resource",))
        page.context.close()


# -- runs: limits, interrupted runs, reconcile -------------------------------------------------

STEPS_PY = '''
import os, time
from pathlib import Path


def first() -> str:
    """Quick."""
    return "done"


def second() -> str:
    """Counts its starts, then takes a minute (the test kills the server meanwhile)."""
    path = Path(os.environ["SOULACY_TEST_COUNTERS"]) / "second"
    path.write_text(str(int(path.read_text()) + 1 if path.exists() else 1))
    time.sleep(60)
    return "acted"
'''


def start_and_hang_up(url: str, who: str, run_id: str) -> None:
    headers = {"Authorization": f"Bearer {KEYS[who]}"}
    body = {"agent_id": "wf", "text": "go", "run_id": run_id}
    with (
        httpx.Client(base_url=url + "/api/v1", headers=headers, timeout=30) as client,
        client.stream("POST", "/chat/stream", json=body) as response,
    ):
        assert response.status_code == 200
        next(response.iter_lines())  # the run is under way; it goes on without this client


def wait_for_count(path: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.read_text() == str(count):
            return
        time.sleep(0.05)
    raise AssertionError(f"the workflow never reached its step ({path})")


def test_runs_show_limits_and_interrupted_runs_and_an_admin_reconciles_a_step(
    workspace: Workspace, browser: Any, shots: Path
) -> None:
    workspace.write_config(advanced_config())
    workspace.write_agent(
        "wf",
        {
            "tools": ["steps.py:first", "steps.py:second"],
            "workflow": {
                "steps": [{"id": "first", "tool": "first"}, {"id": "act", "tool": "second"}]
            },
        },
    )
    (workspace.path / "agents" / "wf" / "steps.py").write_text(STEPS_PY)
    counters = workspace.path / "counters"
    counters.mkdir()
    env = {"SOULACY_TEST_COUNTERS": str(counters)}
    with soulacy_serve(workspace.path, env) as (url, server):
        start_and_hang_up(url, "alice", "A1")
        wait_for_count(counters / "second", 1)
        start_and_hang_up(url, "root", "R1")
        wait_for_count(counters / "second", 2)
        server.send_signal(signal.SIGKILL)  # the process dies in the middle of both steps
        server.wait(timeout=30)
    with soulacy_serve(workspace.path, env) as (url, _):
        alice = page_with_key(browser, KEYS["alice"])
        alice.goto(url + "/#/runs")
        row = alice.locator("table.runs tbody tr[data-run-id='A1']")
        row.wait_for()
        assert alice.locator("table.runs tbody tr").count() == 1  # not root's run
        assert row.get_attribute("data-status") == "interrupted"
        assert row.locator(".notice").inner_text() == "Interrupted: the process running it stopped"
        assert "Last owner pid" in row.inner_text()
        summary = row.locator(".limits summary")
        assert summary.inner_text() == "turns 300 · tokens 400000 · run 12h"
        summary.click()
        assert row.locator(".limits dd[data-limit='tool_timeout']").inner_text() == (
            "1m30s · config.yaml"
        )
        steps = alice.get_by_role("region", name="Workflow steps to reconcile")
        assert "soulacy runs reconcile A1 --step act --completed|--failed" in steps.inner_text()
        assert steps.get_by_role("button").count() == 0  # alice is no admin

        root = page_with_key(browser, KEYS["root"])
        root.goto(url + "/#/runs")
        root.locator("table.runs tbody tr[data-run-id='R1']").wait_for()
        assert root.get_by_role("region", name="Interrupted runs").is_visible()
        again = root.get_by_role(
            "button", name="It did not happen (run it again): step act of run R1"
        )
        again.wait_for()
        root.screenshot(path=str(shots / "runs-reconcile.png"), full_page=True)
        again.click()
        root.locator(
            "#toast", has_text="step 'act' of run 'R1' recorded as failed by the operator"
        ).wait_for()
        root.get_by_role("region", name="Workflow steps to reconcile").wait_for(state="detached")
        with httpx.Client(
            base_url=url + "/api/v1", headers={"Authorization": f"Bearer {KEYS['root']}"}
        ) as client:
            [r1] = client.get("/runs").json()["runs"]
        assert (r1["run_id"], r1["steps_in_progress"]) == ("R1", [])
        alice.reload()
        alice.locator("table.runs tbody tr[data-run-id='A1']").wait_for()
        assert (
            "--step act"
            in alice.get_by_role("region", name="Workflow steps to reconcile").inner_text()
        )
        no_page_errors(alice)
        no_page_errors(root)
        alice.context.close()
        root.context.close()
