"""One run's timeline, in a real browser (issue 39, "a run timeline"): Debian's Chromium driven
by Playwright, against a real ``soulacy serve`` on loopback.

- Reached from a chat reply and from Runs: the run's turns, model calls with tokens and time,
  tool calls with their arguments and results redacted and excerpted, its limits, how it ended
  and its cost; complete after a reload (kept in the store); live while the run goes on.
- Only the run's own principal sees it (``GET /api/v1/runs/{run_id}/timeline``).

Without a browser these tests skip, saying why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.http_server import CHROMIUM, KEYS
from portal_support import add_agents, advanced_config, browser_page, page_errors, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)
SECRET = "sk-live-0123456789abcdef0123456789"
TOOLS_PY = '''
def fetch(url: str, api_key: str) -> str:
    """Fetch a page (a long one)."""
    return "page " + "x" * 2000
'''


def test_a_run_timeline_from_chat_and_runs_complete_after_a_reload_and_only_its_own(
    workspace: Workspace, browser: Any, screenshots: Path
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    workspace.scripted_agent(
        "worker",
        [
            {
                "tool": "fetch",
                "arguments": {"url": "https://example.org/", "api_key": SECRET},
                "id": "c1",
                "usage": {"input": 700, "output": 30},
            },
            {"text": "fetched", "usage": {"input": 900, "output": 10}},
        ],
        tools=["tools.py:fetch"],
        repeat=True,
    )
    (workspace.path / "agents" / "worker" / "tools.py").write_text(TOOLS_PY)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.goto(url + "/#/chat?agent=worker")
        page.get_by_role("textbox", name="Message").fill("fetch it")
        page.get_by_role("button", name="Send").click()
        reply = page.locator("article.assistant[data-status='completed']")
        reply.wait_for()
        run_id = reply.get_attribute("data-run-id")
        reply.get_by_role("link", name="Timeline of this run").click()

        steps = page.locator("ol.timeline > li")
        page.locator("ol.timeline > li[data-kind='ended']").wait_for()

        def shown() -> list[str]:
            return [" ".join(t.split()) for t in steps.all_inner_texts()]

        first = shown()
        text = "\n".join(first)
        assert first[0] == "Started (agent worker) fetch it"  # with what was asked
        assert "Turn 1 · model replied: 700 in / 30 out tokens" in text
        assert "Turn 2 · model replied: 900 in / 10 out tokens" in text
        assert "Turn 1 · tool call fetch (c1)" in text
        assert "https://example.org/" in text
        assert SECRET not in page.content()  # redacted, as events are
        result = page.locator("li[data-kind='tool_result'] .step-detail").inner_text()
        assert result.startswith("page xxx")
        assert len(result) <= 300  # excerpted
        assert "max_turns: 300" in text  # the limits it ran under
        assert first[-1] == "Ended · Completed · unverified: nothing independent checked this reply"
        assert "1,640 (1,600 in, 40 out)" in page.locator("dl.pairs").inner_text()
        assert "null" not in page.locator("main").inner_text().split()
        page.screenshot(path=str(screenshots / "run-timeline.png"))

        page.reload()  # complete after a reload: from the store
        page.locator("ol.timeline > li[data-kind='ended']").wait_for()
        assert shown() == first

        page.get_by_role("link", name="All runs").click()
        page.get_by_role("link", name=f"Timeline of run {run_id[:12]}").click()
        page.locator("ol.timeline > li[data-kind='ended']").wait_for()
        assert shown() == first
        assert page_errors(page) == []
        page.context.close()

        # Only its own principal: another, admin or not, is not told it exists.
        path = f"{url}/api/v1/runs/{run_id}/timeline"
        for who in ("alice", "bob", "root"):
            answer = httpx.get(path, headers={"authorization": f"Bearer {KEYS[who]}"})
            assert answer.status_code == (200 if who == "alice" else 404), (who, answer.text)
        assert httpx.get(path).status_code == 401


def test_the_timeline_of_a_running_run_is_live_until_it_ends(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)  # "slow" answers after 30 s: cancelled here long before
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.goto(url + "/#/chat?agent=slow")
        page.get_by_role("textbox", name="Message").fill("take your time")
        page.get_by_role("button", name="Send").click()
        running = page.locator("article.assistant[data-status='running']")
        running.get_by_role("button", name="Cancel").wait_for()
        run_id = running.get_attribute("data-run-id")

        timeline = browser_page(browser, KEYS["alice"])
        timeline.goto(f"{url}/#/runs/{run_id}")
        timeline.get_by_text("live: this page follows it until it ends").wait_for()
        timeline.locator("ol.timeline > li[data-kind='model_call']").wait_for()
        assert timeline.locator("li[data-kind='ended']").count() == 0

        running.get_by_role("button", name="Cancel").click()
        ended = timeline.locator("ol.timeline > li[data-kind='ended']")
        ended.wait_for()  # the open page followed the run to its end
        assert "Cancelled" in ended.inner_text()
        assert timeline.get_by_text("live: this page follows it").count() == 0
        assert page_errors(timeline) == []
        page.context.close()
        timeline.context.close()
