"""The shell samples of the pages below run in the tests (issue 38): each ```sh or ```console
block is marked runnable (tests/test_docs_commands.py runs it) or is listed here with the reason
it cannot run offline in seconds. A new unmarked block fails until it is marked or listed."""

from __future__ import annotations

from test_docs_commands import ROOT, blocks_of, fenced_blocks

PAGES = (
    "configuration.md",
    "execution-policy.md",
    "scheduling.md",
    "workflows.md",
    "providers.md",
    "progress.md",
    "studio.md",
    "contrib-anthropic.md",
)
SHELL = ("sh", "bash", "shell", "console")
NEEDS_SERVE = "needs `soulacy serve` running for minutes: cron ticks come once a minute"

# (page, first line of the block) -> why it is not run
CANNOT_RUN = {
    ("scheduling.md", "$ soulacy serve"): "a long-lived server, stopped with Ctrl-C",
    ("scheduling.md", "$ soulacy -p watch serve &        # process A, pid 5699"): NEEDS_SERVE
    + ", in two processes",
    ("scheduling.md", "$ soulacy -p watch schedules      # at 08:50:07"): NEEDS_SERVE
    + ", and a process killed with kill -9",
    ("scheduling.md", "$ soulacy runs"): NEEDS_SERVE + ", with a 100-second scripted model",
    (
        "scheduling.md",
        "$ sqlite3 soulacy.db \"DELETE FROM plugin_state WHERE key = 'schedule:flaky'\"",
    ): NEEDS_SERVE + ": the state of the scenario above",
    ("scheduling.md", "$ cat agents/morning/SOUL.yaml"): NEEDS_SERVE
    + ", a tick recorded the day before and the real date",
    ("scheduling.md", "$ soulacy schedules"): NEEDS_SERVE + ": the last result of a tick",
    (
        "scheduling.md",
        "$ sqlite3 soulacy.db \"SELECT value FROM plugin_state WHERE key = 'schedule:long:notes'\""
        " | python -m json.tool   # excerpt",
    ): NEEDS_SERVE + ": a takeover between two processes",
    (
        "workflows.md",
        "$ PUBLISH_WAIT=60 soulacy run report Tromsø --run-id R5 --session S5 &",
    ): "kills a process in the middle of a step; what `tail` shows depends on timing",
    ("workflows.md", "$ soulacy run report Tromsø --run-id R5 --session S5"): "the program no"
    " longer does what it shows: the retry waits for approval of call cut:R5:publish",
    ("workflows.md", "$ soulacy runs reconcile R5 --step publish --completed"): "likewise: the"
    " retry after the reconciliation still waits for approval of call cut:R5:publish",
    (
        "workflows.md",
        "$ for i in 1 2; do PUBLISH_WAIT=2 soulacy run report Lima --run-id R6 --session S6"
        " > out$i.txt & done; wait",
    ): "two processes race: which one runs the steps, and so out1.txt's counts, vary",
    ("providers.md", "$ pip install -e '.[interop]'           # litellm[proxy], gguf, numpy"): (
        "installs from the network and runs the interop suite against model servers"
    ),
    ("contrib-anthropic.md", '$ soulacy -p soulacy.contrib.anthropic run helper "hello"'): (
        "calls the Anthropic API with a real key"
    ),
}


def _unmarked(page: str) -> list[str]:
    path = ROOT / "docs" / page
    marked = {block.line for block in blocks_of(path)[0]}
    fenced = fenced_blocks(path.read_text(encoding="utf-8").splitlines())
    return [
        block.body[0] if block.body else ""
        for block in fenced
        if block.lang in SHELL and block.line not in marked
    ]


def test_every_shell_block_of_these_pages_runs_or_says_why_not() -> None:
    unexplained = [
        f"docs/{page}: {first}"
        for page in PAGES
        for first in _unmarked(page)
        if (page, first) not in CANNOT_RUN
    ]
    assert unexplained == [], (
        "expected every ```sh/```console block to be marked <!-- runnable --> or listed in"
        f" CANNOT_RUN with its reason, got unmarked blocks starting with {unexplained}"
    )


def test_every_block_said_not_to_run_is_still_on_its_page() -> None:
    present = {(page, first) for page in PAGES for first in _unmarked(page)}
    stale = sorted(set(CANNOT_RUN) - present)
    assert stale == [], f"expected CANNOT_RUN to name unmarked blocks of the pages, got {stale}"
