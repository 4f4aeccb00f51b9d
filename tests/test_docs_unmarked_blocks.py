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
    "http.md",
    "deploy.md",
    "storage.md",
    "portal.md",
)
SHELL = ("sh", "bash", "shell", "console")
NEEDS_SERVE = "needs `soulacy serve` running for minutes: cron ticks come once a minute"
POSTGRES = "needs the PostgreSQL server of deploy.md's walk-through (roles, DSNs on 127.0.0.1:5432)"
KILLED = "a process killed with kill -9 mid-run: the owner's pid and the heartbeat's age vary"
DEADLINE = "waits out 3-second HTTP deadlines behind a 1.8-second model: seconds of sleeping"

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
    (
        "http.md",
        """$ curl -s $B/chat/confirm -H "$J" -H "$ALICE" -d '{"run_id": "R2","""
        """ "call_id": "call-1", "approved": false, "note": "not today"}'""",
    ): "not run yet: needs a run waiting on a person's approval of a delete_file call;"
    " tests/plugins/approvals covers the route",
    (
        "http.md",
        "$ curl -s $B/runs/R5           # keyless mode; the `soulacy run` of R5 was killed"
        " with kill -9",
    ): KILLED,
    (
        "http.md",
        """$ curl -s $B/chat -H "$J" -d '{"agent_id": "slow", "text": "take your time","""
        """ "session_id": "l1", "run_id": "late-1"}' | cut -c1-80""",
    ): "restarts the server in the middle (kill %1; soulacy serve &)",
    (
        "http.md",
        """$ curl -sN $B/chat/stream -H "$J" -H "$ALICE" -d '{"agent_id": "calc","""
        """ "text": "19 + 23?", "session_id": "a3", "run_id": "alice-3"}' | cut -c1-100""",
    ): "what a stream reading a little behind a fast run misses depends on timing",
    (
        "http.md",
        "$ curl -s $B/health",
    ): "stops and starts a PostgreSQL server under a running server",
    ("http.md", "$ cat config.yaml"): DEADLINE,
    (
        "http.md",
        """$ curl -sN $B/chat/stream -H "$J" -d '{"agent_id": "slow", "text": "second","""
        """ "session_id": "q2", "run_id": "second2"}' | cut -c1-100""",
    ): DEADLINE,
    ("deploy.md", "$ soulacy runs"): POSTGRES + "; the first shows the SQLite workspace it starts"
    " from, after runs of its fetcher agent",
    (
        "deploy.md",
        """$ psql -h /tmp/pgdoc -U postgres -c "CREATE ROLE soulacy LOGIN PASSWORD"""
        """ 'dev-only-pw'" -c "CREATE DATABASE soulacy OWNER soulacy\"""",
    ): POSTGRES,
    (
        "deploy.md",
        "$ export DATABASE_URL='postgresql://soulacy:dev-only-pw@127.0.0.1:5432/soulacy"
        "?application_name=web-1'",
    ): POSTGRES,
    ("deploy.md", "$ soulacy store copy"): POSTGRES,
    (
        "deploy.md",
        "$ DATABASE_URL='postgresql://soulacy:dev-only-pw@127.0.0.1:5432/soulacy"
        "?application_name=web-1' SOULACY_SERVER__PORT=8484 FETCH_SECONDS=20 soulacy serve"
        " > web1.log 2>&1 &",
    ): POSTGRES + ", with two long-lived servers on fixed ports",
    ("deploy.md", "$ curl -s http://127.0.0.1:8592/api/v1/health"): POSTGRES
    + ", stopped and started again under a running server",
    (
        "deploy.md",
        '$ FETCH_SECONDS=60 soulacy run fetcher "get the report" --session S3 --run-id R3'
        " > r3.out 2>&1 &",
    ): KILLED,
    (
        "deploy.md",
        "$ FETCH_SECONDS=120 unshare -u sh -c 'hostname web-2 && exec soulacy run fetcher"
        ' "get the report" --session S4 --run-id R4\' > r4.out 2>&1 &',
    ): KILLED + "; waits out a 30-second lease, as another host (unshare -u, root only)",
    (
        "deploy.md",
        "$ FETCH_SECONDS=40 unshare -u sh -c 'hostname web-2 && exec soulacy run fetcher"
        ' "get the report" --session S5 --run-id R5\' > r5.out 2>&1 &',
    ): "a process stopped with SIGSTOP past its 30-second lease, as another host (unshare -u)",
    ("deploy.md", "$ soulacy runs --limit 2"): POSTGRES + "; the runs of the walk-through above",
    (
        "deploy.md",
        """$ psql -h 127.0.0.1 -U soulacy soulacy -c "SELECT r.run_id, r.agent_id, l.host, l.pid,"""
        """ round(extract(epoch FROM now()) - l.renewed_at) AS silent_s FROM runs r JOIN leases l"""
        """ ON l.key = r.lease_key AND l.holder = r.run_id WHERE r.status = 'running' AND"""
        """ l.expires_at < extract(epoch FROM now())"""
        '"',
    ): POSTGRES,
    ("deploy.md", '$ soulacy run fetcher "get the report" --session S6'): POSTGRES + ", stopped",
    (
        "deploy.md",
        """$ psql -h 127.0.0.1 -U soulacy soulacy -c "SELECT application_name, count(*) AS"""
        """ connections, max(now() - state_change) AS idle_for FROM pg_stat_activity WHERE"""
        """ datname = 'soulacy' AND application_name LIKE 'web-%' GROUP BY 1 ORDER BY 1"""
        '"',
    ): POSTGRES + ", with the servers above connected",
    ("deploy.md", "$ pg_dump -h 127.0.0.1 -U soulacy -Fc -f soulacy.dump soulacy"): POSTGRES,
    ("storage.md", '$ soulacy run fetcher "get both files" --run-id R1 --session S &'): KILLED,
    ("storage.md", "$ soulacy history w1 | head -3"): "not run yet: the agent of a run that ended"
    " no_progress (progress.md's job_status) is not on this page",
    (
        "storage.md",
        "$ soulacy runs show f2a4bff86aa646e3a220bdbdd1e9a4f6 --json | sed -n '1,/\"run\": {/p'",
    ): "not run yet: names a run id of an earlier session; the runnable block below checks proofs",
    ("storage.md", "$ python - <<'EOF'"): "not run yet: a workspace with three runs; the"
    " runnable block at the end of the section runs the same check on the demo's run",
    ("storage.md", '$ sqlite3 soulacy.db ".backup copy.db"'): "sqlite-utils is not a dependency"
    " (decision 0073) and is not installed where the tests run",
    ("storage.md", "$ sqlite-utils tables soulacy.db --counts"): "sqlite-utils is not a dependency"
    " (decision 0073) and is not installed where the tests run",
    ("storage.md", "$ pytest -q test_capped_store.py"): "not run yet: a pytest session of the"
    " whole store kit, in a project with test_capped_store.py;"
    " tests/kernel/test_kit_planted_bugs.py proves the kit catches the cap",
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
