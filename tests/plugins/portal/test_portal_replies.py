"""After the reply, in a real browser (issue 39, observation 8): Debian's Chromium driven by
Playwright, against a real ``soulacy serve`` on loopback.

- The header says who the key is (``GET /api/v1/whoami``): the principal, and whether it is
  an admin; each principal sees its own.
- A reply shows its tokens and cost (its run in Runs too), every tool its run called (not
  only the last five), and its Markdown rendered safely: no HTML of the reply reaches the
  page, links go to http(s) only, code blocks have a Copy button.

Without a browser the browser tests skip, saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.http_server import CHROMIUM, KEYS, open_server
from portal_support import add_agents, advanced_config, browser_page, page_errors, soulacy_serve

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

browser_only = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)

TOOLS = ("one", "two", "three", "four", "five", "six", "seven")
TOOLS_PY = "".join(
    f'def {name}() -> str:\n    """Say {name}."""\n    return "{name}"\n\n' for name in TOOLS
)
MARKDOWN = """\
## Plan
Here is **bold**, *soft* and `inline <b>code</b>`.

- first
- second

```python
print("hi")
```

<img src=x onerror="window.__xss = 1"><script>window.__xss = 2</script>
[click](javascript:window.__xss=3) [data](data:text/html,<script>alert(1)</script>) \
[site](https://example.org/)
"""
USAGE = {"input": 1000, "output": 200}


async def test_whoami_says_each_principal_and_whether_it_is_an_admin(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        server.client("root") as root,
        server.client("alice") as alice,
    ):
        assert (await root.get("/whoami")).json() == {
            "principal": "root",
            "admin": True,
            "sees_everything": False,
        }
        assert (await alice.get("/whoami")).json() == {
            "principal": "alice",
            "admin": False,
            "sees_everything": False,
        }
        async with httpx.AsyncClient(base_url=server.url) as anonymous:
            refused = await anonymous.get("/api/v1/whoami")
        assert refused.status_code == 401


@browser_only
def test_the_header_says_who_the_key_is_for_each_principal(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        root = browser_page(browser, KEYS["root"])
        alice = browser_page(browser, KEYS["alice"], width=390, height=800)
        for page in (root, alice):
            page.goto(url + "/#/chat")
        root.locator("#who", has_text="root · admin").wait_for()
        alice.locator("#who", has_text="alice").wait_for()
        assert "admin" not in alice.locator("#who").inner_text()
        assert alice.locator("#who").is_visible()  # at 390 px too
        for page in (root, alice):
            assert page_errors(page) == []
            page.context.close()


@browser_only
def test_a_reply_shows_tokens_cost_every_tool_and_safe_markdown_with_copy(
    workspace: Workspace, browser: Any, screenshots: Path
) -> None:
    config = advanced_config().replace(
        "    - {provider: local,",
        '    - {provider: scripted, model: "*", input_per_mtok: 2.0, output_per_mtok: 10.0}\n'
        "    - {provider: local,",
    )
    workspace.write_config(config)
    steps: list[dict[str, Any]] = [
        {"tool": name, "arguments": {}, "id": f"c{i}", "usage": USAGE}
        for i, name in enumerate(TOOLS)
    ]
    steps.append({"text": MARKDOWN, "usage": USAGE})
    workspace.scripted_agent("writer", steps, tools=[f"tools.py:{n}" for n in TOOLS], repeat=True)
    (workspace.path / "agents" / "writer" / "tools.py").write_text(TOOLS_PY)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
        page.goto(url + "/#/chat?agent=writer")
        page.get_by_role("textbox", name="Message").fill("plan it")
        page.get_by_role("button", name="Send").click()
        reply = page.locator("article.assistant[data-status='completed']")
        reply.wait_for()

        # Every tool of the run, and what it used.
        tools = reply.locator(".tools-used").inner_text()
        for name in TOOLS:
            assert name in tools, (name, tools)
        meta = reply.locator(".meta").first.inner_text()
        assert "9,600 tokens (8,000 in, 1,600 out)" in meta, meta
        assert "cost $0.03" in meta, meta

        # Markdown, rendered; the reply's HTML shown as text, never run.
        text = reply.locator(".text")
        assert text.locator("strong", has_text="bold").count() == 1
        assert text.locator("strong", has_text="Plan").count() == 1
        assert text.locator("em", has_text="soft").count() == 1
        assert text.locator("code", has_text="inline <b>code</b>").count() == 1
        assert text.locator("li").all_inner_texts() == ["first", "second"]
        for tag in ("img", "script", "b", "iframe"):
            assert text.locator(tag).count() == 0, tag
        assert '<img src=x onerror="window.__xss = 1">' in text.inner_text()
        links = text.locator("a")
        assert links.count() == 1
        assert links.get_attribute("href") == "https://example.org/"
        assert links.get_attribute("rel") == "noopener noreferrer nofollow"
        assert "[click](javascript:window.__xss=3)" in text.inner_text()
        assert page.evaluate("window.__xss") is None

        # A code block with its Copy button.
        block = text.locator(".code-block")
        assert block.locator("code").inner_text() == 'print("hi")'
        block.get_by_role("button", name="Copy the python code").click()
        block.get_by_role("button", name="Copy the python code").filter(
            has_text="Copied"
        ).wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == 'print("hi")'
        page.screenshot(path=str(screenshots / "chat-markdown.png"))

        # After a reload (history), the same.
        page.reload()
        again = page.locator("article.assistant[data-status='completed']")
        again.locator(".code-block").wait_for()
        assert again.locator(".text img").count() == 0
        assert page.evaluate("window.__xss") is None
        run_id = again.get_attribute("data-run-id")

        page.get_by_role("link", name="Runs").click()  # the run's cost there too
        cost = page.locator(f"tr[data-run-id='{run_id}'] td.cost")
        cost.wait_for()
        assert cost.inner_text() == "$0.03"
        assert page_errors(page) == []
        page.context.close()
