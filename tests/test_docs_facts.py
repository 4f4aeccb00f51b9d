"""What the reference pages state about the program is what it does (issue 38, observation 12):
running.md's Python sample prints what it shows and its `tools:` rule holds, plugins.md names
live hooks and the real `soulacy plugins` lines, storage.md's roles are the `Store` protocol's
and its helpers are documented, sdk.md lists every key of the `tool.approval` event, and the
index puts the tutorial first and the decision records last."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from soulacy.kernel import Kernel

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SOULACY = [sys.executable, "-m", "soulacy.cli"]


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _fence_after(text: str, anchor: str, lang: str) -> str:
    """The body of the first ```LANG block after ``anchor``."""
    start = text.index(anchor)
    opening = text.index(f"```{lang}\n", start) + len(f"```{lang}\n")
    return text[opening : text.index("```\n", opening)]


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}


def test_running_md_python_sample_prints_what_the_page_shows(tmp_path: Path) -> None:
    text = _page("running.md")
    code = _fence_after(text, "## From Python", "python")
    shown = _fence_after(text, "## From Python", "console")
    (tmp_path / "sample.py").write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "sample.py"],
        cwd=tmp_path,
        env=_environ(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == shown, (
        "docs/running.md's Python output sample differs from what the sample prints:\n"
        f"{done.stdout}"
    )


def test_a_tools_entry_naming_no_tool_is_refused_before_the_run(tmp_path: Path) -> None:
    """running.md: `config validate` reports it and `soulacy run` exits 2 recording no run."""
    agent = tmp_path / "agents" / "typo"
    agent.mkdir(parents=True)
    (agent / "SOUL.yaml").write_text("id: typo\nllm: {provider: scripted}\ntools: [nosuch]\n")

    def soulacy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SOULACY, *args],
            cwd=tmp_path,
            env=_environ(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    validated = soulacy("config", "validate")
    assert validated.returncode == 2
    assert "tools.0" in validated.stderr
    assert "'nosuch'" in validated.stderr
    ran = soulacy("run", "typo", "hi")
    assert ran.returncode == 2
    assert "'nosuch'" in ran.stderr
    runs = soulacy("runs", "--agent", "typo")
    assert runs.returncode == 0
    assert runs.stdout.startswith("no runs"), runs.stdout
    page = _page("running.md")
    assert "`tools:` entry that names no tool a loaded plugin provides" in page


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    kernel = Kernel.load(tmp_path_factory.mktemp("empty"), autoload=False, environ={})
    return {name for name in dir(kernel.pm.hook) if name.startswith("soulacy_")}


@pytest.mark.parametrize("page", ["plugins.md", "running.md", "storage.md", "sdk.md"])
def test_the_pages_name_only_hooks_that_exist(page: str, hooks: set[str]) -> None:
    not_hooks = {"soulacy_acme", "soulacy_tool"}  # a module name; the typo of an example
    named = set(re.findall(r"\bsoulacy_[a-z_]*[a-z]\b", _page(page))) - not_hooks
    assert not named - hooks, f"docs/{page} names hooks that do not exist: {named - hooks}"


def test_plugins_md_first_result_sample_is_what_soulacy_plugins_prints(tmp_path: Path) -> None:
    sample = _fence_after(_page("plugins.md"), "`soulacy plugins` ends with each", "console")
    command, *shown = sample.splitlines()
    assert command.startswith("$ soulacy plugins | ")
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command[2:]],
        cwd=tmp_path,
        env={**_environ(), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.splitlines() == shown, done.stdout + done.stderr


def test_plugins_md_keeps_per_kernel_state_in_the_stash() -> None:
    text = _page("plugins.md")
    assert "WeakKeyDictionary" not in text
    assert "kernel.stash" in text


def test_storage_md_roles_table_is_the_store_protocol() -> None:
    from soulacy.kernel.store import Store

    roles = [base.__name__ for base in Store.__bases__ if base.__name__.endswith("Store")]
    text = _page("storage.md")
    table = text[text.index("| role | what |") :]
    table = table[: table.index("\n\n")]
    listed = re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE)
    assert sorted(listed) == sorted(roles), f"Store's roles are {roles}; the table lists {listed}"
    counted = re.findall(
        r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d+)"
        r" (?:roles|multi-process (?:store )?checks)\b",
        text,
    )
    assert not counted, f"docs/storage.md counts roles or checks that change: {counted}"


def test_storage_md_names_every_multi_process_check() -> None:
    from soulacy.testing import PROCESS_CHECK_NAMES

    text = _page("storage.md")
    missing = [name for name in PROCESS_CHECK_NAMES if f"`{name}`" not in text]
    assert not missing, f"docs/storage.md does not describe {missing}"


@pytest.mark.parametrize("helper", ["run_as_read", "label_interrupted"])
def test_storage_md_documents_the_public_store_helpers(helper: str) -> None:
    import soulacy.kernel.store as store

    assert helper in store.__all__
    assert f"**`{helper}(" in _page("storage.md")


def test_storage_md_states_the_event_json_rule() -> None:
    assert "An event reads back as its data" in _page("storage.md")


def _keys(cell: str) -> set[str]:
    return set(re.findall(r"[a-z_0-9]+", cell.split("}")[0]))


def test_sdk_md_lists_every_key_of_the_tool_approval_event() -> None:
    import attrs

    from soulacy.kernel.store import ApprovalDecision, ApprovalRequest
    from soulacy.plugins.approvals._keeper import approval_event as _approval_event

    request = ApprovalRequest("r1", "c1", "delete_file", {"path": "x"}, "a", "s")
    run: Any = SimpleNamespace(result=SimpleNamespace(turns=1))  # the event reads its turns
    told = ApprovalDecision(False, "ops", None, None, result="sent")  # a cut call that happened
    happened = attrs.evolve(request, request={"cut": True}, decision=told)
    keys = set(_approval_event(run, request)) | set(_approval_event(run, happened))
    text = _page("sdk.md")
    row = re.search(r"^\| `tool\.approval` \| `\{([^}]*)\}`", text, re.MULTILINE)
    assert row, "docs/sdk.md's stream table has no tool.approval row"
    assert _keys(row.group(1)) == keys
    section = text[text.index("## Approving tool calls") :]
    table = section[section.index("| key | what |") :]
    table = table[: table.index("\n\n")]
    documented = {
        key
        for line in table.splitlines()[2:]
        for key in re.findall(r"`(\w+)`", line.split(" | ")[0])
    }
    assert documented == keys
    assert "arguments_sha256" in section
    assert "call_id" in section


def test_the_index_starts_with_the_tutorial_and_ends_with_the_decision_records() -> None:
    links = re.findall(r"^- \[[^\]]+\]\(([^)]+)\)", _page("index.md"), re.MULTILINE)
    assert links[0] == "tutorial.md"
    assert links[-1] == "decisions/README.md"


def test_the_readme_next_step_names_a_model_before_running_the_new_agent() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = _fence_after(text, "Next step", "sh")
    assert f"<!-- runnable -->\n```sh\n{block}" in text, "tests/test_docs_commands.py runs it"
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    provider = next(i for i, c in enumerate(commands) if "llm.default.provider" in c)
    new = next(i for i, c in enumerate(commands) if c.startswith("soulacy agents new"))
    run = next(i for i, c in enumerate(commands) if c.startswith("soulacy run "))
    assert provider < run
    assert new < run


@pytest.mark.parametrize("event", ["run.started", "llm.result", "tool.call"])
def test_running_md_events_table_agrees_with_the_sample_output(event: str) -> None:
    text = _page("running.md")
    row = re.search(rf"^\| `{re.escape(event)}` \| [^|]+ \| ([^|]+) \|$", text, re.MULTILINE)
    assert row, f"docs/running.md's events table has no {event} row"
    listed = set(re.findall(r"`(\w+)`", row.group(1)))
    shown = _fence_after(text, "## From Python", "console")
    line = next(line for line in shown.splitlines() if line[3:].startswith(f"{event} "))
    assert listed == set(line[3:].split(None, 1)[1].split(", "))
