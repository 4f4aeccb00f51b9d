"""Invalid values in the portal, in a real browser (issue 39, observations 4 and 5): Debian's
Chromium driven by Playwright, against a real ``soulacy serve`` on loopback.

- A misspelt workspace provider is refused at save, named beside its field, and nothing is
  saved; an agent is never written with a provider that does not exist.
- Every invalid field of a save is named at once; the first is scrolled into view (its view
  chosen) and focused, never left under the sticky save bar; text typed into a number field is
  told a number is expected.

Without a browser these tests skip, saying why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _support.http_server import CHROMIUM, KEYS
from portal_support import add_agents, advanced_config, browser_page, page_errors, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)
REFUSED = ("Failed to load resource",)  # the 422 answers the tests ask for


def clear_of_the_save_bar(page: Any, element: Any) -> None:
    """``element`` is inside the window and not covered by the sticky save bar."""
    box = element.bounding_box()
    bar = page.locator("main .actions").bounding_box()
    height = page.viewport_size["height"]
    assert box is not None
    assert bar is not None
    assert box["y"] >= 0, box
    assert box["y"] + box["height"] <= height, (box, height)
    assert box["y"] + box["height"] <= bar["y"], (box, bar)


# -- observation 4: a misspelt workspace provider ----------------------------------------------


def test_a_misspelt_workspace_provider_is_refused_beside_its_field_and_nothing_is_saved(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    config = workspace.path / "config.yaml"
    before = config.read_bytes()
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["root"], height=700)
        page.goto(url + "/#/settings")
        provider = page.get_by_label("Workspace provider", exact=True)
        provider.fill("locl")
        page.get_by_role("button", name="Save changes").click()
        error = page.locator(".field[data-key='llm.default.provider'] .error")
        error.wait_for()
        assert "unknown provider 'locl'" in error.inner_text()
        assert "did you mean 'local'?" in error.inner_text()
        assert "Workspace provider" in page.locator(".save-status").inner_text()
        assert provider.get_attribute("aria-invalid") == "true"
        assert page.evaluate("document.activeElement.name") == "llm.default.provider"
        clear_of_the_save_bar(page, error)
        assert config.read_bytes() == before

        provider.fill("local")  # a configured one is saved
        page.get_by_role("button", name="Save changes").click()
        page.locator(".save-status", has_text="Saved: llm.default.provider").wait_for()
        assert page_errors(page, REFUSED) == []
        page.context.close()
    assert "provider: local" in config.read_text()


def test_no_agent_is_written_with_a_workspace_provider_that_does_not_exist(
    workspace: Workspace, browser: Any
) -> None:
    # Written by hand (the file loads; only a chat would fail): the portal creates no agent
    # with it, and says where to correct it.
    workspace.write_config(
        advanced_config().replace("provider: scripted   #", "provider: locl       #")
    )
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["root"])
        page.goto(url + "/#/agents")
        page.get_by_label("Agent id").fill("bot")
        page.get_by_role("button", name="Create agent").click()
        status = page.locator(".new-agent .save-status", has_text="Not created")
        status.wait_for()
        text = status.inner_text()
        assert "the workspace provider 'locl' (llm.default.provider) does not exist" in text
        assert "did you mean 'local'?" in text
        assert not (workspace.path / "agents" / "bot").exists()

        # Choosing an existing provider for it instead works.
        page.get_by_label("Provider", exact=True).fill("local")
        page.get_by_role("button", name="Create agent").click()
        page.get_by_role("heading", name="bot", exact=True).wait_for()
        assert page_errors(page, REFUSED) == []
        page.context.close()
    soul = (workspace.path / "agents" / "bot" / "SOUL.yaml").read_text()
    assert "provider: local" in soul
    assert "locl" not in soul


def test_an_agent_written_with_a_misspelt_provider_says_so_in_its_editor_until_corrected(
    workspace: Workspace, browser: Any
) -> None:
    # As the portal wrote agents before: the misspelt workspace provider copied into it.
    workspace.write_config(advanced_config())
    soul = workspace.write_agent("old", "name: Old\nllm:\n  provider: locl\n")
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["root"])
        page.goto(url + "/#/agents/old")
        alert = page.locator(".provider-error")
        alert.wait_for()
        assert "unknown provider 'locl'; did you mean 'local'?" in alert.inner_text()
        page.get_by_label("Provider", exact=True).fill("local")
        page.get_by_role("button", name="Save agent").click()
        page.locator(".save-status", has_text="Saved: llm.provider").wait_for()
        assert alert.count() == 0
        assert page_errors(page) == []
        page.context.close()
    assert "provider: local" in soul.read_text()


# -- observation 5: every invalid field at once, in view ---------------------------------------


def test_every_invalid_agent_field_is_named_at_once_and_the_first_is_scrolled_into_view(
    workspace: Workspace, browser: Any, screenshots: Path
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    soul = workspace.path / "agents" / "echo" / "SOUL.yaml"
    before = soul.read_bytes()
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["root"], width=390, height=700)
        page.goto(url + "/#/agents/echo")
        page.get_by_role("button", name="Advanced").click()
        page.get_by_label("Temperature", exact=True).fill("5")
        page.get_by_label("Nucleus sampling (top_p)", exact=True).fill("2")
        page.get_by_label("Run timeout", exact=True).fill("-1h")
        page.get_by_role("button", name="Save agent").click()
        status = page.locator(".save-status", has_text="Not saved")
        status.wait_for()
        for label in ("Temperature", "Nucleus sampling (top_p)", "Run timeout"):
            assert label in status.inner_text(), label
        errors = {
            key: page.locator(f".field[data-key='{key}'] .error")
            for key in ("llm.temperature", "llm.top_p", "run_timeout")
        }
        assert errors["llm.temperature"].inner_text() == "expected 0 to 2"
        assert errors["llm.top_p"].inner_text() == "expected 0 to 1"
        assert "expected a duration" in errors["run_timeout"].inner_text()
        # The first invalid field in the page (Limits come before Model tuning) has the focus,
        # in view above the sticky save bar.
        assert page.evaluate("document.activeElement.name") == "run_timeout"
        clear_of_the_save_bar(page, errors["run_timeout"])
        page.screenshot(path=str(screenshots / "agent-editor-errors-390.png"))
        assert soul.read_bytes() == before
        assert page_errors(page, REFUSED) == []
        page.context.close()


def test_text_typed_into_a_number_field_is_told_a_number_is_expected(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    config = workspace.path / "config.yaml"
    before = config.read_bytes()
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["root"], height=700)
        page.goto(url + "/#/settings")
        page.get_by_role("button", name="Advanced").click()
        spend = page.get_by_label("Dollar budget per run", exact=True)
        spend.fill("")
        spend.press_sequentially("2e")  # not a number: the browser hides it from scripts
        assert page.evaluate("document.activeElement.validity.badInput")
        assert page.locator(".pending").inner_text() == "1 unsaved change"
        page.get_by_role("button", name="Everyday").click()  # the field is out of sight
        page.get_by_role("button", name="Save changes").click()
        error = page.locator(".field[data-key='costs.max_run_cost_usd'] .error")
        error.wait_for()
        assert error.inner_text() == "a number is expected"
        assert page.get_by_role("button", name="Advanced").get_attribute("aria-pressed") == "true"
        assert page.evaluate("document.activeElement.name") == "costs.max_run_cost_usd"
        clear_of_the_save_bar(page, error)
        assert config.read_bytes() == before
        assert page_errors(page) == []
        page.context.close()
