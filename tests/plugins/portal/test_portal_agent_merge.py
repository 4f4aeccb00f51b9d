"""``PATCH /api/v1/agents/{agent_id}`` merges the changed fields into the saved SOUL.yaml by
round-trip editing, the mechanism ``PATCH /config`` uses for config.yaml (issue 39,
observations 1 and 2): every other line stays byte-for-byte, an original-system file keeps its
``llm:`` block, ``confirm_tools`` is edited as the active key it is; agents are an admin's."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from _support.http_server import open_server

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

# Comments, blank lines, quoting, flow and block collections, spelled nulls, a multi-line
# prompt and keys no plugin implements: what a person's file holds.
HAND_WRITTEN = """\
# The researcher: reviewed by the team.

id: helper
name: 'Helper'          # quoted on purpose
description: "finds things"
system_prompt: |
  You help.
    Indented line.
llm:
  provider: scripted    # the team's model
  model: ~
  temperature: 0.30
tools: [ ]
max_turns: 40           # chosen on purpose
budget: {max_tokens: 120000, max_llm_calls: 30}
reasoning:
  max_steps: 9
identity: {role: researcher}   # the original system's persona: kept
tags:
- a
-   b
"""

# As the original system's editor saved an agent: Go's "" for every unset string.
ORIGINAL_SOUL = """\
id: helper
name: Helper
description: ""
version: ""
system_prompt: "You are a helpful assistant."
llm:
  provider: ""
  model: ""
  tool_choice: ""
  base_url: ""
tools:
  - name: word_count
    inline: "print(len(input().split()))"
reasoning:
  strategy: ""
max_turns: 12
budget:
  max_tokens: 40000
  max_llm_calls: 8
enabled: true
allow_shell: false
confirm_tools: [delete_file]
"""


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


async def test_a_patch_of_one_field_leaves_every_other_line_of_soul_yaml_byte_for_byte(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    path = keyed.write_agent("helper", HAND_WRITTEN)
    async with open_server(make_kernel) as server:
        async with server.client("alice") as alice:  # not an admin: refused, as before
            refused = await alice.patch("/agents/helper", json={"changes": {"name": "Mine"}})
            assert refused.status_code == 403
        assert path.read_text() == HAND_WRITTEN
        async with server.client("root") as root:
            answer = await root.patch("/agents/helper", json={"changes": {"name": "Finder"}})
            assert answer.status_code == 200, answer.text
            assert answer.json()["changed"] == ["name"]
            after_name = path.read_text()
            # a member of a section: that line alone; the section's other members stay
            answer = await root.patch(
                "/agents/helper", json={"changes": {"budget": {"max_tokens": 1}}}
            )
            assert answer.json()["changed"] == ["budget.max_tokens"]
            after_budget = path.read_text()
            answer = await root.patch("/agents/helper", json={"changes": {"llm": {"top_p": 0.5}}})
            assert answer.json()["changed"] == ["llm.top_p"]
    assert changed_lines(HAND_WRITTEN, after_name) == [
        "-name: 'Helper'          # quoted on purpose",
        "+name: 'Finder'          # quoted on purpose",
    ]
    assert changed_lines(after_name, after_budget) == [
        "-budget: {max_tokens: 120000, max_llm_calls: 30}",
        "+budget: {max_tokens: 1, max_llm_calls: 30}",
    ]
    assert changed_lines(after_budget, path.read_text()) == ["+  top_p: 0.5"]


async def test_an_original_system_agent_edited_in_one_field_keeps_its_llm_block(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    path = keyed.write_agent("helper", ORIGINAL_SOUL)
    async with open_server(make_kernel) as server, server.client("root") as root:
        answer = await root.patch(
            "/agents/helper", json={"changes": {"system_prompt": "You summarise."}}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["changed"] == ["system_prompt"]
        prompt_only = path.read_text()
        # a partial edit of the block changes its member; the block and Go's "" stay
        answer = await root.patch("/agents/helper", json={"changes": {"llm": {"model": "m1"}}})
        assert answer.status_code == 200, answer.text
        assert answer.json()["changed"] == ["llm.model"]
    assert changed_lines(ORIGINAL_SOUL, prompt_only) == [
        '-system_prompt: "You are a helpful assistant."',
        '+system_prompt: "You summarise."',
    ]
    assert changed_lines(prompt_only, path.read_text()) == ['-  model: ""', '+  model: "m1"']


async def test_confirm_tools_is_shown_as_active_and_changed_by_an_admin(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    path = keyed.write_agent("helper", ORIGINAL_SOUL)
    async with open_server(make_kernel) as server:
        async with server.client("root") as root:
            shown = (await root.get("/agents/helper")).json()
            # implemented by the approvals plugin: not among the keys kept with no effect
            assert shown["implemented_by"]["confirm_tools"] == "approvals"
            assert shown["permissions"] == {"allow_shell": False}
            assert shown["permissions_in_effect"] == {"confirm_tools": ["delete_file"]}
            assert shown["document"]["confirm_tools"] == ["delete_file"]
            answer = await root.patch(
                "/agents/helper", json={"changes": {"confirm_tools": ["delete_file", "send_mail"]}}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["changed"] == ["confirm_tools"]
            bad = await root.patch("/agents/helper", json={"changes": {"confirm_tools": [""]}})
            assert bad.status_code == 422
            assert "changes.confirm_tools.0" in bad.json()["fields"]
        async with server.client("bob") as bob:
            answer = await bob.patch("/agents/helper", json={"changes": {"confirm_tools": []}})
            assert answer.status_code == 403
    assert changed_lines(ORIGINAL_SOUL, path.read_text()) == [
        "-confirm_tools: [delete_file]",
        "+confirm_tools: [delete_file, send_mail]",
    ]


async def test_without_the_approvals_plugin_confirm_tools_is_kept_and_not_changed(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    path = keyed.write_agent("helper", ORIGINAL_SOUL)
    async with (
        open_server(make_kernel, plugins=["no:approvals"]) as server,
        server.client("root") as root,
    ):
        shown = (await root.get("/agents/helper")).json()
        assert "confirm_tools" not in shown["implemented_by"]
        assert shown["permissions"]["confirm_tools"] == ["delete_file"]  # kept, no effect
        assert shown["permissions_in_effect"] == {}
        answer = await root.patch("/agents/helper", json={"changes": {"confirm_tools": []}})
        assert answer.status_code == 422
        assert "approvals" in answer.json()["fields"]["changes.confirm_tools"]
    assert path.read_text() == ORIGINAL_SOUL


def test_untouched_keys_keep_the_text_ruamel_would_rewrite() -> None:
    """The document start, spacing inside flow collections and after colons, a last line
    without a newline: what ruamel writes its own way stays as written when untouched."""
    from soulacy.kernel.yamlio import parse_yaml
    from soulacy.plugins.portal._agents import apply_changes
    from soulacy.plugins.yamledit import dump_round_trip

    text = (
        "# head\n---\ntools: [ ]\nllm:\n  provider:   x   # c\n  model:  ~\n"
        "budget: {max_tokens:  5}"
    )
    doc = parse_yaml(text, "SOUL.yaml")
    assert apply_changes(doc, {"llm": {"model": "m"}, "max_turns": 3}) == [
        "llm.model",
        "max_turns",
    ]
    assert dump_round_trip(doc, text, keep_unchanged_text=True) == (
        "# head\n---\ntools: [ ]\nllm:\n  provider:   x   # c\n  model: m\n"
        "budget: {max_tokens:  5}\nmax_turns: 3\n"
    )


async def test_an_agent_naming_an_unknown_provider_is_refused_and_nothing_is_saved(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """Issue 38 (first day) and 39 (obs. 4): a misspelt provider saved from the portal made
    every later chat of the agent fail; it is refused, naming the field, with a suggestion."""
    path = keyed.write_agent("helper", HAND_WRITTEN)
    async with open_server(make_kernel) as server, server.client("root") as root:
        answer = await root.patch(
            "/agents/helper", json={"changes": {"llm": {"provider": "scriptd"}}}
        )
        assert answer.status_code == 422, answer.text
        assert "llm.provider" in answer.json()["fields"]
        assert "scriptd" in answer.json()["fields"]["llm.provider"]
        made = await root.put("/agents/other", json={"name": "Other", "llm": {"provider": "locl"}})
        assert made.status_code == 422, made.text
    assert path.read_text() == HAND_WRITTEN
    assert not (keyed.path / "agents" / "other").exists()
