"""The samples of the pages below run in the tests (issue 38): each ```sh, ```console or
```python block is run by tests/test_docs_commands.py (marked runnable; a python block also when a
marked block writes it as one of its ``files`` or shows what it prints) or is listed here with the
reason it cannot run offline in seconds. A new unmarked block fails until it is marked or listed."""

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
    "running.md",
    "sdk.md",
    "plugins.md",
    "observability.md",
    "compaction.md",
    "reasoning.md",
    "mcp.md",
    "install.md",
    "architecture.md",
    "approvals.md",
    "cli.md",
    "contrib-postgres.md",
    "benchmarks.md",
    "index.md",
    "security.md",
    "a2a.md",
    "agui.md",
)
# the pages left out of PAGES, and why
NOT_CHECKED_HERE = {
    "hooks.md": "generated from the hook specs (tests/kernel/test_hook_docs.py keeps it so)",
    "tutorial.md": "tests/test_tutorial.py runs the whole page, in order, as one script",
}
SHELL = ("sh", "bash", "shell", "console")
CHECKED = (*SHELL, "python")
# pages whose python blocks another test runs
PYTHON_RUN_ELSEWHERE = {
    "sdk.md": "tests/sdk/test_sdk_docs.py runs every python block against a live server",
}
NEEDS_SERVE = "needs `soulacy serve` running for minutes: cron ticks come once a minute"
POSTGRES = "needs the PostgreSQL server of deploy.md's walk-through (roles, DSNs on 127.0.0.1:5432)"
SERVE_STOPPED = "a long-lived server, then stopped by a signal"
KILLED = "a process killed with kill -9 mid-run: the owner's pid and the heartbeat's age vary"
NETWORK = "installs from the network (git, the package index)"
PROTOCOL = "a protocol's signatures, not a program"
FRAGMENT = "a fragment: names (kernel, run, compactor) bound by code around it"
ACME = "a sketch of the reader's own tests: it imports modules of the reader's project"
OTLP = "exports to an OTLP collector that is not there: the run waits out the export timeout"
COMPACTION_DOCS = "tests/plugins/compaction/test_compaction_docs.py"
DEADLINE = "waits out 3-second HTTP deadlines behind a 1.8-second model: seconds of sleeping"

# (page, first line of the block) -> the test that checks it otherwise (its path first)
CHECKED_ELSEWHERE = {
    ("cli.md", "$ soulacy plugins"): "tests/test_doc_samples.py compares it with what `soulacy"
    " plugins` prints without the installed plugins (the output of this environment has them)",
    ("compaction.md", '{"messages": 50, "roles": {"assistant": 25, "tool": 25}, "chars": 34156,'): (
        COMPACTION_DOCS + " compares it with the marker of a real compaction"
    ),
    (
        "compaction.md",
        '{"truncated": True, "original_chars": 6338971, "kept_chars": 8070, "omitted_chars":'
        " 6330901}",
    ): COMPACTION_DOCS + " compares it with the cut of a real 6 MB log",
    (
        "compaction.md",
        '"""A compactor plugin that adds a model-written summary of older messages to the builtin',
    ): COMPACTION_DOCS + " runs the plugin in a kernel",
    ("running.md", "_PROGRESS_ONLY = re.compile("): "tests/test_doc_samples.py checks that it is"
    " the source of soulacy.plugins.classic, verbatim",
}

# (page, how the first line of the block starts) -> the test that checks those blocks
SIGNATURES_CHECKED_ELSEWHERE = {
    ("storage.md", "async def "): "tests/kernel/test_kits_contract_doc.py renders the store"
    " contract's signatures from the protocols and compares",
    ("storage.md", "multi_process: ClassVar[bool]"): "tests/kernel/test_kits_contract_doc.py"
    " renders it from the Store protocol",
}

# (page, first line of the block) -> why it is not run
CANNOT_RUN = {
    ("contrib-postgres.md", "$ pip install 'soulacy[postgres]'"): NETWORK,
    ("contrib-postgres.md", '$ soulacy -p soulacy.contrib.postgres run helper "hello"'): "where"
    " -p goes, for a database the page leaves to the reader; deploy.md's blocks run the store",
    (
        "contrib-postgres.md",
        "$ export SOULACY_POSTGRES__DSN='postgresql://soulacy@db.internal/soulacy'",
    ): "a database on the host db.internal",
    ("contrib-postgres.md", "$ soulacy store copy"): "tests/test_doc_samples.py checks that it is"
    " deploy.md's `store copy` transcript, which runs against PostgreSQL",
    (
        "contrib-postgres.md",
        "$ soulacy -p soulacy.contrib.postgres store copy --to"
        " postgresql://soulacy@127.0.0.1:5432/soulacy_copy",
    ): POSTGRES + "; tests/contrib/postgres/test_postgres_copy.py covers --to",
    ("contrib-postgres.md", "async def test_my_store(postgres_server):"): "a test for the"
    " reader's suite, with a postgres_server fixture the page does not show",
    ("cli.md", "$ soulacy serve                  # then Ctrl-C (or SIGTERM)"): SERVE_STOPPED,
    ("cli.md", "$ soulacy serve --port 0"): SERVE_STOPPED + ", with a schedule and keys",
    ("cli.md", "$ soulacy serve --port 8484      # another process listens on 8484"): "needs"
    " another process listening on the fixed port 8484; tests/plugins/http covers the busy port",
    (
        "cli.md",
        "$ soulacy --log-level info serve        # then agents/a/SOUL.yaml is edited twice,"
        " once badly",
    ): "a server running while its files are edited: what it logs depends on when it looks",
    ("cli.md", "$ soulacy runs                      # R1 was killed with kill -9 in a tool call"): (
        KILLED
    ),
    (
        "cli.md",
        '$ soulacy run fetcher "get both files" --run-id R3 --session S3 &      # in another'
        " terminal",
    ): "a run in another terminal, cancelled while it runs: what `runs show` says after"
    " `sleep 1` depends on timing",
    (
        "cli.md",
        "$ soulacy run report Tromsø --run-id R5 --session S5 | tail -1     # after kill -9 in"
        " step publish",
    ): KILLED + ", in a workflow step (workflows.md's walk-through)",
    (
        "cli.md",
        "$ soulacy -p watch schedules       # watch.py contributes the uptime monitor"
        " (soulacy_schedules)",
    ): NEEDS_SERVE,
    (
        "cli.md",
        "$ soulacy mcp tools                # docs: tests/plugins/mcp/mcp_server.py; search:"
        " nothing listens",
    ): "starts the test suite's MCP server (tests/plugins/mcp/mcp_server.py), outside the"
    " block's folder; tests/plugins/mcp covers `mcp tools`",
    (
        "mcp.md",
        "pip install 'soulacy[mcp]'    # where Soulacy is installed: adds the mcp SDK, keeps"
        " Soulacy",
    ): NETWORK,
    (
        "install.md",
        "pip install 'soulacy @ git+https://github.com/soulacy/soulacy-python'",
    ): NETWORK,
    (
        "install.md",
        "git clone https://github.com/soulacy/soulacy-python ~/src/soulacy && cd ~/src/soulacy",
    ): NETWORK + "; the runnable venv blocks below build and install the wheel of this checkout",
    ("install.md", "cd ~/my-project && python3 -m venv .venv && . .venv/bin/activate"): "the"
    " extras come from the package index, and serve runs until Ctrl-C; the runnable venv blocks"
    " below install the wheel and run demo",
    ("architecture.md", "import attrs"): "the http plugin's own declaration of its section,"
    " simplified: loaded beside it, it is the clash shown above",
    ("architecture.md", "from soulacy.kernel import Kernel, open_kernel"): "a fragment with a"
    " top-level async with; the complete example below runs",
    ("architecture.md", "from soulacy.testing import throwaway_plugin"): "a test for the reader's"
    " suite, with the fixtures of soulacy.testing.pytest_plugin; tests/kernel covers the fixtures",
    ("approvals.md", "$ soulacy runs approve R1 call-1"): KILLED,
    (
        "approvals.md",
        """$ curl -sN $B/chat/stream -H "$J" -H "$ALICE" -d '{"agent_id": "cleaner", "text":"""
        """ "remove old.log", "run_id": "R2"}'""",
    ): "a stream that waits until another terminal decides the call;"
    " tests/plugins/approvals covers the route",
    (
        "approvals.md",
        """$ curl -s $B/chat/confirm -H "$J" -H "$ALICE" -d '{"run_id": "R2", "call_id":"""
        """ "call-1", "approved": true}'""",
    ): "decides the call of the stream above, which must be waiting meanwhile",
    ("compaction.md", "view = compactor.compact(run.messages, allowance, tool_specs)"): FRAGMENT,
    ("plugins.md", 'pytest_plugins = ["soulacy.testing.pytest_plugin"]'): "a line of a"
    " conftest.py: the plugin template's tests, which tests/test_plugin_template.py runs, have it",
    ("plugins.md", "from soulacy.testing import check_checkpoint_store, check_store"): ACME
    + " (acme_store, a postgres_url fixture)",
    ("plugins.md", "import pytest"): ACME + " (acme_store, acme_loop, acme_planner)",
    ("plugins.md", "from soulacy.kernel import hookimpl"): "a module of a package (from . import"
    " hookspecs) the page does not show",
    ("plugins.md", "from soulacy.kernel import Kernel, StashKey, hookimpl"): ACME + " (AcmeClient)",
    (
        "plugins.md",
        'found = kernel.pm.unique_contributions("soulacy_reasoning_strategies", "reasoning'
        ' strategy")',
    ): FRAGMENT,
    ("observability.md", '$ soulacy -p soulacy.contrib.otel run helper "hello"'): OTLP,
    (
        "observability.md",
        "$ docker run --rm -p 16686:16686 -p 4318:4318 jaegertracing/all-in-one",
    ): ("starts Jaeger in docker, from the network"),
    ("observability.md", "$ export OTEL_EXPORTER_OTLP_ENDPOINT=https://api.honeycomb.io"): OTLP
    + ": a hosted backend, with a key",
    ("observability.md", 'curl -s localhost:8592/api/v1/chat -H "Authorization: Bearer $KEY" \\'): (
        "a server on port 8592 with a key; tests/contrib/otel/test_otel_traceparent.py sends"
        " the same traceparent"
    ),
    ("observability.md", "$ curl -s http://127.0.0.1:9464/metrics | grep -v _bucket"): "a fixed"
    " port (9464), an agent the page does not show (thinker) and the OpenTelemetry SDK's version",
    (
        "observability.md",
        "$ python bench/otel_turns.py                       # the table above: 5 rounds, JSON",
    ): "a benchmark of the repository, minutes long",
    ("configuration.md", "@hookimpl"): "a fragment: the hook of a plugin whose section class"
    " (WeatherConfig) the page does not show",
    (
        "providers.md",
        "class Provider(Protocol):                     # soulacy.kernel.providers.Provider",
    ): PROTOCOL,
    ("providers.md", "class ProviderRegistry(Protocol):"): PROTOCOL,
    (
        "progress.md",
        "class ProgressDetector(Protocol):        # soulacy.kernel.contracts",
    ): PROTOCOL,
    ("studio.md", "from soulacy.kernel import Kernel"): "a fragment with a top-level await, for a"
    " workspace and a build spec the page leaves to the reader",
    ("storage.md", 'kernel = Kernel.load("ws", plugins=["no:sqlite_store"])'): "a one-line"
    " fragment; the runnable block above runs the same store with -p no:sqlite_store",
    ("storage.md", "from soulacy.kernel import StashKey, hookimpl"): "a sketch of the reader's"
    " store plugin: it imports acme_store, the reader's own store, which the page does not show",
    ("storage.md", "import itertools"): "a sketch of the reader's test suite: it imports"
    " acme_store, the reader's own store",
    ("storage.md", "import pytest"): "a test for the reader's suite, one line of which the kit"
    " answers; tests/kernel/test_kits.py checks the memory store's skip reason",
    ("running.md", "$ soulacy runs approvals"): "a run of 256 turns waiting in another process"
    " for a person's decision (on_limit: pause); tests/kernel covers the pause",
    ("running.md", '$ soulacy run fetcher "get both files" --run-id R1 --session S &'): KILLED,
    ("running.md", 'def lookup(city: str, units: str = "metric") -> dict:'): "a signature, not a"
    " program: the From Python sample prints its schema and runs",
    (
        "running.md",
        '{"type": "object", "properties": {"city": {"type": "string"}, "units": {"type":'
        ' "string"}}, "required": ["city"], "additionalProperties": false}',
    ): "the schema of the signature above: the From Python sample prints it and runs",
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
    (
        "deploy.md",
        """$ psql -h /tmp/pgdoc -U postgres -c "CREATE ROLE soulacy LOGIN PASSWORD"""
        """ 'dev-only-pw'" -c "CREATE DATABASE soulacy OWNER soulacy\"""",
    ): POSTGRES + ": a role and a database made with psql as the server's superuser",
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
    ("storage.md", "$ python - <<'EOF'"): "not run yet: a workspace with three runs; the"
    " runnable block at the end of the section runs the same check on the demo's run",
    ("storage.md", '$ sqlite3 soulacy.db ".backup copy.db"'): "sqlite-utils is not a dependency"
    " (decision 0073) and is not installed where the tests run",
    ("storage.md", "$ sqlite-utils tables soulacy.db --counts"): "sqlite-utils is not a dependency"
    " (decision 0073) and is not installed where the tests run",
}


def _unmarked(page: str) -> list[str]:
    """The first line of each block of the page that no marked block runs."""
    path = ROOT / "docs" / page
    run = {line for block in blocks_of(path)[0] for line in (block.line, *block.sources)}
    fenced = fenced_blocks(path.read_text(encoding="utf-8").splitlines())
    checked = SHELL if page in PYTHON_RUN_ELSEWHERE else CHECKED
    return [
        block.body[0] if block.body else ""
        for block in fenced
        if block.lang in checked and block.line not in run
    ]


def test_every_shell_block_of_these_pages_runs_or_says_why_not() -> None:
    unexplained = [
        f"docs/{page}: {first}"
        for page in PAGES
        for first in _unmarked(page)
        if (page, first) not in CANNOT_RUN
        and (page, first) not in CHECKED_ELSEWHERE
        and not any(page == p and first.startswith(s) for p, s in SIGNATURES_CHECKED_ELSEWHERE)
    ]
    assert unexplained == [], (
        "expected every ```sh/```console/```python block to be run or listed in"
        f" CANNOT_RUN with its reason, got unmarked blocks starting with {unexplained}"
    )


def test_every_block_said_not_to_run_is_still_on_its_page() -> None:
    present = {(page, first) for page in PAGES for first in _unmarked(page)}
    stale = sorted((set(CANNOT_RUN) | set(CHECKED_ELSEWHERE)) - present)
    assert stale == [], f"expected CANNOT_RUN to name unmarked blocks of the pages, got {stale}"


def test_every_test_said_to_check_a_block_names_its_page() -> None:
    named = {
        **CHECKED_ELSEWHERE,
        **SIGNATURES_CHECKED_ELSEWHERE,
        **{(page, ""): why for page, why in PYTHON_RUN_ELSEWHERE.items()},
    }
    wrong = []
    for (page, _), why in named.items():
        test = ROOT / why.split()[0]
        if not test.is_file() or page not in test.read_text(encoding="utf-8"):
            wrong.append(f"{page}: {why}")
    assert wrong == [], f"expected each test said to check a block to read its page, got {wrong}"


def test_every_page_is_checked_here_or_says_where() -> None:
    pages = {path.name for path in (ROOT / "docs").glob("*.md")}
    unaccounted = sorted(pages - set(PAGES) - set(NOT_CHECKED_HERE))
    assert unaccounted == [], (
        f"expected every docs/*.md in PAGES or NOT_CHECKED_HERE, got {unaccounted}"
    )
    gone = sorted((set(PAGES) | set(NOT_CHECKED_HERE)) - pages)
    assert gone == [], f"expected PAGES and NOT_CHECKED_HERE to name pages that exist, got {gone}"
