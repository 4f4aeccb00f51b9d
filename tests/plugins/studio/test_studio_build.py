"""Studio builds: generate, validate, check, repair with the problems, save; generated agents
inherit the workspace policy and explicit limits survive."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from ruamel.yaml import YAML
from studio_support import FakeBuilder, Studio, fenced, soul

from soulacy.kernel import UsageError
from soulacy.kernel.messages import ModelRequest
from soulacy.plugins.studio import build

CHECK = {"input": "Write today's report", "expect": [{"op": "contains", "value": "report"}]}
SPEC: dict[str, Any] = {"id": "reporter", "goal": "Write a daily report", "checks": [CHECK]}


def saved(studio: Studio, agent_id: str = "reporter") -> dict[str, Any]:
    path = studio.workspace.path / "agents" / agent_id / "SOUL.yaml"
    doc: dict[str, Any] = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    return doc


async def test_a_valid_first_attempt_is_checked_and_saved(studio: Studio) -> None:
    studio.script("good.yaml", "the daily report is ready")
    builder = FakeBuilder([fenced(soul())])
    result = await build(studio.kernel(builder), SPEC)

    assert (result.status, result.reason, result.attempts) == ("completed", None, 1)
    assert result.mode == "new"
    assert result.changed
    assert result.errors == []
    path = studio.workspace.path / "agents" / "reporter" / "SOUL.yaml"
    assert result.path == path
    assert path.read_text(encoding="utf-8") == result.candidate
    assert result.checks == [
        {
            "name": "check 1",
            "passed": True,
            "status": "completed",
            "reply": "the daily report is ready",
            "failures": [],
        }
    ]
    # the builder's call plus the check run (the scripted model counts len // 4 + 1 output)
    assert result.input_tokens == 100
    assert result.output_tokens == 20 + len("the daily report is ready") // 4 + 1
    assert studio.make_kernel().agent("reporter").section("name") == "Reporter"


async def test_the_prompts_say_what_a_soul_yaml_is_and_forbid_limits(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    builder = FakeBuilder([fenced(soul())])
    await build(studio.kernel(builder), SPEC)

    system, user = (m.content for m in builder.requests[0].messages)
    assert "agents/reporter/SOUL.yaml" in system
    assert "```yaml" in system
    assert "- system_prompt: text" in system
    assert "- tools: list of text" in system
    assert "Do not write execution limits: a generated agent inherits" in system
    assert "the build removes them (max_turns, budget, run_timeout, no_progress_limit" in system
    assert "- max_turns:" not in system  # limits are not offered as keys
    assert "Goal: Write a daily report" in user
    assert "Agent id: reporter" in user
    assert "check 1: input \"Write today's report\"; reply contains 'report'" in user
    assert "rejected" not in user


async def test_a_validation_error_is_fed_back_and_repaired(studio: Studio) -> None:
    studio.script("good.yaml", "the daily report")
    bad = soul().replace("tools: []", "toolz: []")
    builder = FakeBuilder([fenced(bad), fenced(soul())])
    result = await build(studio.kernel(builder), SPEC)

    assert (result.status, result.attempts) == ("completed", 2)
    second = builder.prompts[1]
    assert "Attempt 1 was rejected" in second
    assert "SOUL.yaml:5:1: toolz: unknown key; did you mean 'tools'?" in second
    assert "toolz: []" in second  # the previous attempt itself
    assert str(studio.workspace.path) not in second  # errors name SOUL.yaml, not this machine
    assert "toolz" not in saved(studio)


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("```yaml\nid: [reporter\n```", "the reply:2:1: malformed YAML"),
        ("", "the reply held no YAML"),
        (fenced(soul().replace("tools: []", "tools: [no_such_tool]")), "no_such_tool"),
        (
            fenced(soul().replace("provider: scripted", "provider: openia")),
            "unknown provider 'openia': configure it under llm.providers",
        ),
    ],
)
async def test_unusable_replies_are_problems_for_the_next_attempt(
    studio: Studio, reply: str, problem: str
) -> None:
    studio.script("good.yaml", "report")
    builder = FakeBuilder([reply, fenced(soul())])
    result = await build(studio.kernel(builder), SPEC)

    assert (result.status, result.attempts) == ("completed", 2)
    assert problem in builder.prompts[1]


async def test_a_failing_check_makes_the_build_try_again(studio: Studio) -> None:
    studio.script("bad.yaml", "hello there")
    studio.script("good.yaml", "your daily report")
    builder = FakeBuilder([fenced(soul(script="bad.yaml")), fenced(soul(script="good.yaml"))])
    result = await build(studio.kernel(builder), SPEC)

    assert (result.status, result.attempts) == ("completed", 2)
    assert "check 1: expected reply contains 'report', got 'hello there'" in builder.prompts[1]
    assert saved(studio)["llm"]["model"] == "agents/reporter/good.yaml"
    assert result.checks[0]["passed"] is True


async def test_a_check_on_the_status_replaces_the_completed_requirement(studio: Studio) -> None:
    studio.script("good.yaml", "done")
    spec = {
        **SPEC,
        "checks": [
            {"input": "a", "expect": [{"target": "status", "op": "eq", "value": "completed"}]},
            {"input": "b", "expect": [{"target": "tokens.total", "op": "ne", "value": 0}]},
            {"input": "c", "expect": [{"op": "matches", "value": "^do"}]},
        ],
    }
    result = await build(studio.kernel(FakeBuilder([fenced(soul())])), spec)
    assert result.status == "completed"
    assert [c["passed"] for c in result.checks] == [True, True, True]


async def test_check_runs_stay_out_of_the_workspace(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    result = await build(studio.kernel(FakeBuilder([fenced(soul())])), SPEC)
    assert result.status == "completed"
    # the runs were stored in the scratch workspace's own store, which is gone
    assert sorted(p.name for p in studio.workspace.path.iterdir()) == ["agents", "config.yaml"]


async def test_a_generated_agent_embeds_no_caps(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    body = """\
id: reporter
name: Reporter
system_prompt: You write the daily report.
max_turns: 20
budget: {max_tokens: 5000, max_llm_calls: 10}
run_timeout: 10m
no_progress_limit: 3
reasoning: {max_steps: 4}
llm: {provider: scripted, model: agents/reporter/good.yaml, max_tokens: 1024}
tools: []
"""
    result = await build(studio.kernel(FakeBuilder([fenced(body)])), SPEC)

    assert result.status == "completed"
    assert result.stripped == [
        "max_turns",
        "budget",
        "run_timeout",
        "no_progress_limit",
        "reasoning.max_steps",
        "llm.max_tokens",
    ]
    doc = saved(studio)
    assert set(doc) == {"id", "name", "system_prompt", "llm", "tools"}
    assert doc["llm"] == {"provider": "scripted", "model": "agents/reporter/good.yaml"}
    policy = studio.make_kernel().resolve_policy("reporter")
    assert (policy.max_turns.value, policy.max_turns.source) == (256, "default")
    assert policy.max_output_tokens.source == "default"


async def test_limits_asked_in_the_spec_are_written(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    reply = fenced(soul(max_turns="20", budget="{max_tokens: 5000}"))
    spec = {
        **SPEC,
        "name": "Daily reporter",
        "limits": {"max_turns": 40, "reasoning": {"max_steps": 8}},
        "llm": {"max_tokens": 2048},
    }
    builder = FakeBuilder([reply])
    result = await build(studio.kernel(builder), spec)

    assert result.status == "completed"
    assert result.stripped == ["budget"]  # max_turns was asked for: set from the spec
    doc = saved(studio)
    assert doc["max_turns"] == 40
    assert doc["reasoning"] == {"max_steps": 8}
    assert doc["llm"]["max_tokens"] == 2048
    assert doc["name"] == "Daily reporter"
    assert "budget" not in doc
    asked = "Limits the person asked for (set by the build): max_turns: 40, reasoning.max_steps: 8"
    assert asked in builder.prompts[0]


EXISTING = """\
# The daily reporter. Edited by hand: keep the caps.
id: reporter
name: Reporter    # shown in the portal
system_prompt: You write a report.
max_turns: 12     # keep runs short
llm:
  provider: scripted
  model: agents/reporter/good.yaml
  max_tokens: 900   # my output cap
toolz: []
"""


async def test_a_repair_keeps_the_persons_limits_and_comments(studio: Studio) -> None:
    studio.script("good.yaml", "the daily report")
    path = studio.workspace.write_agent("reporter", EXISTING)
    reply = """\
id: reporter
name: Reporter
system_prompt: You write the daily report, with figures.
max_turns: 50
budget: {max_tokens: 100}
llm: {provider: scripted, model: agents/reporter/good.yaml}
tools: []
"""
    builder = FakeBuilder([fenced(reply)])
    result = await build(studio.kernel(builder), SPEC)

    assert (result.status, result.mode, result.attempts) == ("completed", "repair", 1)
    assert result.stripped == ["budget"]  # max_turns is the person's: kept, not removed
    text = path.read_text(encoding="utf-8")
    assert text == (
        "# The daily reporter. Edited by hand: keep the caps.\n"
        "id: reporter\n"
        "name: Reporter    # shown in the portal\n"
        "system_prompt: You write the daily report, with figures.\n"
        "max_turns: 12     # keep runs short\n"
        "llm:\n"
        "  provider: scripted\n"
        "  model: agents/reporter/good.yaml\n"
        "  max_tokens: 900   # my output cap\n"
        "tools: []\n"
    )
    first = builder.prompts[0]
    assert "The agent exists. Its current SOUL.yaml" in first
    assert "toolz: []" in first
    assert "Its problems now:\n- SOUL.yaml:10:1: toolz: unknown key; did you mean 'tools'?" in first
    assert result.limits["resolved_by"] == "config.yaml"  # the file did not load


async def test_an_invalid_limit_the_person_set_stops_the_build(studio: Studio) -> None:
    """No attempt could change it, so no model call is spent on it."""
    studio.script("good.yaml", "report")
    path = studio.workspace.write_agent("reporter", soul(max_turns="-5"))
    before = path.read_text(encoding="utf-8")
    builder = FakeBuilder([fenced(soul())])
    result = await build(studio.kernel(builder), SPEC)

    assert (result.status, result.reason, result.attempts) == (
        "failed",
        "explicit_limit_invalid",
        0,
    )
    assert builder.requests == []
    assert result.errors == [
        "SOUL.yaml:6:1: max_turns: expected -1 or more"
        " (0 or omitted inherits, -1 requests unlimited) (got -5)"
    ]
    assert path.read_text(encoding="utf-8") == before
    # asking for another value in the spec replaces it
    fixed = await build(studio.kernel(builder), {**SPEC, "limits": {"max_turns": 30}})
    assert (fixed.status, saved(studio)["max_turns"]) == ("completed", 30)


async def test_an_invalid_limit_asked_in_the_spec_stops_the_build(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    builder = FakeBuilder([fenced(soul())])
    spec = {**SPEC, "limits": {"budget": {"max_tokens": -1}}}
    result = await build(studio.kernel(builder), spec)

    assert (result.status, result.reason, result.attempts) == (
        "failed",
        "explicit_limit_invalid",
        1,
    )
    assert result.errors == [
        "SOUL.yaml:7:3: budget.max_tokens: expected 0 or more (0 requests unlimited) (got -1)"
    ]


async def test_an_edit_made_during_the_build_is_kept(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    path = studio.workspace.path / "agents" / "reporter" / "SOUL.yaml"

    def reply(request: ModelRequest, index: int) -> str:
        # the person creates the file while the model is thinking
        path.write_text("id: reporter\nmax_turns: 7   # set while building\n", encoding="utf-8")
        return fenced(soul(max_turns="99"))

    result = await build(studio.kernel(FakeBuilder([reply])), SPEC)

    assert result.status == "completed"
    text = path.read_text(encoding="utf-8")
    assert "max_turns: 7   # set while building" in text
    assert "99" not in text
    assert saved(studio)["system_prompt"] == "You write the daily report."
    assert any("changed during the build" in w for w in result.warnings)


async def test_a_malformed_agent_file_is_not_overwritten(studio: Studio) -> None:
    studio.workspace.write_agent("reporter", "id: [reporter\n")
    with pytest.raises(UsageError, match=r"cannot repair .* not valid YAML"):
        await build(studio.kernel(FakeBuilder([fenced(soul())])), SPEC)
    assert studio.workspace.path.joinpath("agents/reporter/SOUL.yaml").read_text() == (
        "id: [reporter\n"
    )


async def test_an_unchanged_repair_writes_nothing(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    path = studio.workspace.write_agent("reporter", soul())
    stamp = path.stat().st_mtime_ns
    result = await build(studio.kernel(FakeBuilder([fenced(soul())])), SPEC)
    assert (result.status, result.changed, result.path) == ("completed", False, path)
    assert path.stat().st_mtime_ns == stamp


async def test_build_events(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    kernel = studio.kernel(FakeBuilder([fenced("id: reporter\nbogus: 1\n"), fenced(soul())]))
    events = kernel.events.subscribe()
    result = await build(kernel, SPEC)
    seen = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            break
    studio_events = [e for e in seen if e.type.startswith("studio.")]
    assert [e.type for e in studio_events] == [
        "studio.started",
        "studio.attempt",
        "studio.attempt",
        "studio.finished",
    ]
    assert {e.run_id for e in studio_events} == {result.build_id}
    assert studio_events[1].data["errors"]
    assert not studio_events[2].data["errors"]
    assert studio_events[3].data["status"] == "completed"


async def test_checks_see_the_agents_files_and_the_workspace_folders(studio: Studio) -> None:
    """The scratch workspace links the agent's folder (a file tool) and top-level folders (a
    script), so a candidate runs there as it will in the workspace."""
    folder = studio.workspace.path / "agents" / "reporter"
    folder.mkdir(parents=True)
    (folder / "report.py").write_text("def today() -> str:\n    return 'sunny'\n")
    scripts = studio.workspace.path / "scripts"
    scripts.mkdir()
    (scripts / "tool.yaml").write_text(
        "steps: [{tool: today, arguments: {}}, {text: the daily report}]\n"
    )
    body = soul().replace("agents/reporter/good.yaml", "scripts/tool.yaml")
    body = body.replace("tools: []", "tools: ['report.py:today']")
    check = {"input": "go", "expect": [{"target": "tool_calls", "op": "eq", "value": 1}]}
    result = await build(studio.kernel(FakeBuilder([fenced(body)])), {**SPEC, "checks": [check]})

    assert result.status == "completed", result.errors
    assert result.checks[0]["reply"] == "the daily report"


async def test_without_a_builder_model_the_build_does_not_start(studio: Studio) -> None:
    studio.workspace.write_config({})  # no llm.default.provider
    kernel = studio.make_kernel()
    with pytest.raises(UsageError, match=r"no model to build with: set model\.provider"):
        await build(kernel, SPEC)
