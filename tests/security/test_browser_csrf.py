"""Cross-site request forgery in a real headless Chromium: a foreign page cannot start a run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from _support.http_server import (
    CHROMIUM,
    serve_in_thread,
    standard_agents,
    static_site,
)

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")


def test_a_no_cors_text_plain_post_from_another_origin_starts_no_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel], browser: Any
) -> None:
    workspace.write_config("server:\n  port: 0\n")  # keyless loopback mode: the weakest spot
    standard_agents(workspace)
    with serve_in_thread(make_kernel) as api:
        forged = (
            "<script>window.done = Promise.all(["
            + ",".join(
                f"fetch('{api}/api/v1/{path}', {{method: 'POST', mode: 'no-cors',"
                " headers: {'Content-Type': 'text/plain'},"
                f" body: JSON.stringify({{agent_id: 'echo', text: 'forged', run_id: '{run}'}})}})"
                ".then(() => 'sent', e => String(e))"
                for path, run in (("chat", "csrf-chat"), ("chat/stream", "csrf-stream"))
            )
            + "]);</script>"
        )
        with static_site(forged) as page_url:
            context = browser.new_context()
            try:
                page = context.new_page()
                page.goto(page_url)
                outcome = page.evaluate("window.done")
            finally:
                context.close()
        assert outcome == ["sent", "sent"]  # the browser did send them (opaque answers)
        with httpx.Client(base_url=api + "/api/v1") as client:
            for run in ("csrf-chat", "csrf-stream"):
                assert client.get(f"/runs/{run}").status_code == 404
