"""The pieces of a build that need no model: the spec, YAML extraction, stripping and merging."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from soulacy.kernel import ConfigError
from soulacy.plugins.studio import LIMIT_PATHS, BuildSpec, as_spec, load_spec
from soulacy.plugins.studio._document import compose, extract_yaml

FILE = Path("/ws/agents/a/SOUL.yaml")


def spec(**keys: Any) -> BuildSpec:
    return as_spec({"id": "a", "goal": "g", **keys})


def load(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Sure:\n```yaml\nid: a\n```\nDone.", "id: a\n"),
        ("```\nx: 1\n```\n```yml\nid: a\n```", "id: a\n"),  # the yaml block wins
        ("```text\nid: a\n```", "id: a\n"),
        ("id: a\nname: b\n", "id: a\nname: b\n"),  # no fence: the whole reply
        ("```yaml\nid: a\nname: cut off", "id: a\nname: cut off"),  # truncated reply
    ],
)
def test_extract_yaml(reply: str, expected: str) -> None:
    assert extract_yaml(reply) == expected


def test_the_spec_is_checked() -> None:
    with pytest.raises(ConfigError) as raised:
        as_spec(
            {
                "id": "no/slashes",
                "goal": " ",
                "limits": {"max_turns": 3, "reasoning": {"strategy": "x"}, "tools": []},
                "checks": [{"input": "go", "expect": [{"op": "startswith", "target": ""}]}],
            }
        )
    assert [f"{i.path}: {i.message}" for i in raised.value.issues] == [
        "id: expected letters, digits, '-' and '_'",
        "goal: required: what the agent is for",
        "limits.reasoning.strategy: not an execution limit (limits: max_turns, budget,"
        " run_timeout, no_progress_limit, reasoning.max_steps, reasoning.step_timeout,"
        " reasoning.total_timeout, llm.max_tokens)",
        "limits.tools: not an execution limit (limits: max_turns, budget, run_timeout,"
        " no_progress_limit, reasoning.max_steps, reasoning.step_timeout,"
        " reasoning.total_timeout, llm.max_tokens)",
        "checks.0.expect.0.op: expected one of contains, not_contains, eq, ne, matches",
        "checks.0.expect.0.target: required: reply, status, …",
    ]


def test_spec_types_are_strict(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"spec\.checks\.0\.input: expected a string"):
        as_spec({"id": "a", "goal": "g", "checks": [{"input": 3}]})
    file = tmp_path / "spec.yaml"
    file.write_text("id: a\ngoal: g\nmodel: {provider: p, modle: m}\n")
    with pytest.raises(ConfigError, match=r"spec\.yaml:3:22: model\.modle: unknown key"):
        load_spec(file)


def test_a_new_agent_gets_the_id_first_and_the_spec_values() -> None:
    candidate = compose(
        "name: model name\nid: other\nsystem_prompt: hi\nmax_turns: 20\n",
        "",
        spec(name="Chosen", tools=["clock"], llm={"provider": "p"}),
        FILE,
    )
    assert candidate.stripped == ("max_turns",)
    assert candidate.text == (
        "name: Chosen\nid: a\nsystem_prompt: hi\ntools:\n  - clock\nllm:\n  provider: p\n"
    )


def test_a_merge_keeps_what_did_not_change_byte_for_byte() -> None:
    base = "# top\nid: a   # the id\nsystem_prompt: |\n  line one\n  line two\ntools: [x]  # t\n"
    candidate = compose(
        "id: a\nsystem_prompt: |\n  line one\n  line two\ntools: [x, y]\n", base, spec(), FILE
    )
    # a changed value keeps the comment of its line
    assert candidate.text == (
        "# top\nid: a   # the id\nsystem_prompt: |\n  line one\n  line two\ntools: [x, y] # t\n"
    )


def test_an_emptied_llm_does_not_drop_the_persons_output_cap() -> None:
    base = "id: a\nllm:\n  model: m\n  max_tokens: 900\n"
    for reply in ("id: a\nllm:\n", "id: a\n", "id: a\nllm: {max_tokens: 5}\n"):
        assert load(compose(reply, base, spec(), FILE).text) == {
            "id": "a",
            "llm": {"max_tokens": 900},
        }


LIMIT_VALUES = st.fixed_dictionaries(
    {},
    optional={
        "max_turns": st.integers(-1, 500),
        "budget": st.fixed_dictionaries({"max_tokens": st.integers(0, 10**6)}),
        "run_timeout": st.sampled_from(["0", "10m", "2h"]),
        "no_progress_limit": st.integers(0, 30),
        "reasoning": st.fixed_dictionaries({"max_steps": st.integers(-1, 9)}),
        "llm": st.fixed_dictionaries({"max_tokens": st.integers(0, 9999), "model": st.just("m")}),
    },
)


def _limits(doc: Any) -> dict[str, Any]:
    out = {}
    for path in LIMIT_PATHS:
        node = doc
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            out[".".join(path)] = node
    return out


@given(person=LIMIT_VALUES, model=LIMIT_VALUES, asked=LIMIT_VALUES)
def test_limits_come_from_the_person_never_from_the_model(
    person: dict[str, Any], model: dict[str, Any], asked: dict[str, Any]
) -> None:
    """Whatever the model writes: the limits of the saved file are the ones of the file on disk,
    overridden by the ones the spec asks for."""
    yaml = YAML(typ="safe", pure=True)
    texts = []
    for doc in ({"id": "a", **person}, {"id": "a", "system_prompt": "p", **model}):
        out = io.StringIO()
        yaml.dump(doc, out)
        texts.append(out.getvalue())
    base_text, reply = texts
    asked_limits = {k: v for k, v in asked.items() if k != "llm"}
    llm_asked = {"max_tokens": asked["llm"]["max_tokens"]} if "llm" in asked else {}
    chosen = spec(limits=asked_limits, llm=llm_asked)
    saved = load(compose(reply, base_text, chosen, FILE).text)

    expected = _limits({"id": "a", **person})
    expected.update({".".join(p): v for p, v in chosen.asked_limits().items()})
    assert _limits(saved) == expected
    assert saved["system_prompt"] == "p"


@pytest.mark.parametrize(
    "base",
    [
        "id: a\ntools:\n- x\nllm:\n  model: m\n",  # lists flush with their key
        "id: a\ntools:\n  - x\nllm:\n  model: m\n",  # lists indented under it
        "id: a\nllm:   # mine\n    model: m\ntools:\n    - x\n",  # four spaces, a comment
        "id: a\nllm:\n    model: m\ntools:\n- x\n",
    ],
)
def test_a_merge_keeps_the_files_indentation(base: str) -> None:
    reply = "id: a\nllm: {model: m}\ntools: [x]\nsystem_prompt: new\n"
    assert compose(reply, base, spec(), FILE).text == base + "system_prompt: new\n"
