"""The ``mcp:`` section of config.yaml and the ``mcp_servers``/``mcp_tools`` keys of SOUL.yaml:
a mistake is an error naming the file, the key and what was expected."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import config, stdio_server
from ruamel.yaml import YAML

from soulacy.kernel import ConfigError, Kernel, UsageError, redact
from soulacy.plugins.mcp import McpConfig, McpServer, tool_name
from soulacy.testing import Workspace

DOCS = Path(__file__).resolve().parents[3] / "docs" / "mcp.md"


def test_an_agent_listing_an_unknown_server_gets_a_validation_error(
    workspace: Workspace, load: Callable[..., Kernel], notes: Path
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    soul = workspace.scripted_agent("a", [{"text": "-"}], mcp_servers=["docs", "nope"])
    kernel = load()
    with pytest.raises(ConfigError) as caught:
        kernel.agent("a")
    (issue,) = caught.value.issues
    assert issue.location.file == str(soul)
    assert issue.location.line is not None
    assert issue.path == "mcp_servers"
    assert issue.message == (
        "unknown MCP server 'nope': expected one of the servers of config.yaml mcp.servers (docs)"
    )
    assert str(soul) in str(caught.value)


def test_mcp_tools_and_tools_entries_must_name_a_server_the_agent_lists(
    workspace: Workspace, load: Callable[..., Kernel], notes: Path
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes), "web": stdio_server(notes)}))
    workspace.scripted_agent(
        "a",
        [{"text": "-"}],
        tools=["web__fetch"],
        mcp_servers=["docs"],
        mcp_tools=["docs__add", "web__fetch", "add"],
    )
    with pytest.raises(ConfigError) as caught:
        load().agent("a")
    problems = sorted((i.path, str(i.value), i.message) for i in caught.value.issues)
    assert problems == [
        ("mcp_tools", "add", "expected <server>__<tool> with a server of mcp_servers (docs)"),
        (
            "mcp_tools",
            "web__fetch",
            "expected <server>__<tool> with a server of mcp_servers (docs)",
        ),
        (
            "tools",
            "web__fetch",
            "a tool of MCP server 'web', which mcp_servers does not list: expected 'web' in"
            " mcp_servers",
        ),
    ]


def test_a_bad_server_entry_names_config_yaml_the_key_and_what_was_expected(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    path = workspace.write_config(
        "mcp:\n"
        "  servers:\n"
        "    nocommand: {args: [x]}\n"
        "    badurl: {url: ftp://example.com/mcp}\n"
        "    mixed: {url: 'http://127.0.0.1:1/mcp', command: python}\n"
        "    two__parts: {command: python}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load()
    text = str(caught.value)
    expected = [
        (3, "mcp.servers.nocommand.command: expected the command that starts a stdio server"),
        (
            4,
            "mcp.servers.badurl.url: expected the http:// or https:// URL of a streamable HTTP"
            " server",
        ),
        (5, "mcp.servers.mixed.command: expected no command for an HTTP server"),
        (6, "mcp.servers.two__parts: expected a server id of letters, digits"),
    ]
    for line, message in expected:
        assert re.search(rf"{re.escape(str(path))}:{line}(:\d+)?: {re.escape(message)}", text), (
            line,
            message,
            text,
        )
    assert "ftp://example.com" not in text  # a URL may carry credentials: never echoed


@pytest.mark.parametrize(
    ("entry", "key", "expected"),
    [
        ("{command: python, args: serve}", "args", "expected a list"),
        ("{transport: sse, url: 'http://127.0.0.1:1/mcp'}", "transport", "'stdio', 'http'"),
        ("{url: 'http://127.0.0.1:1/mcp', headers: [a]}", "headers", ""),
        ("{command: python, restart: always}", "restart", ""),
    ],
)
def test_a_wrongly_typed_or_unknown_value_is_refused_by_the_strict_converter(
    workspace: Workspace, load: Callable[..., Kernel], entry: str, key: str, expected: str
) -> None:
    path = workspace.write_config(f"mcp:\n  servers:\n    docs: {entry}\n")
    with pytest.raises(ConfigError) as caught:
        load()
    (issue,) = caught.value.issues
    assert issue.location.file == str(path)
    assert issue.location.line == 3
    assert issue.path == f"mcp.servers.docs.{key}"
    assert expected in issue.message


def test_header_values_and_env_values_are_redacted_in_config_show(
    workspace: Workspace, soulacy_cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    workspace.write_config(
        config(
            {
                "search": {
                    "url": "https://search.example.com/mcp",
                    "headers": {"X-Team": "team-sekrit-1", "Authorization": "Bearer sekrit-2"},
                },
                "gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "sekrit-3", "LANG": "C"}},
            }
        )
    )
    shown = soulacy_cli(["config", "show", "--json"], cwd=workspace.path)
    assert shown.returncode == 0, shown.stderr
    assert "sekrit" not in shown.stdout
    servers = json.loads(shown.stdout)["config"]["mcp"]["servers"]
    assert servers["search"]["headers"] == {"X-Team": "***", "Authorization": "***"}
    # every env value, as every header value: credentials hide under names no list knows
    assert servers["gh"]["env"] == {"GITHUB_TOKEN": "***", "LANG": "***"}


def test_tool_names_are_what_providers_accept() -> None:
    allowed = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
    assert tool_name("docs", "read") == "docs__read"
    assert tool_name("docs", "look.up/v2") == "docs__look_up_v2"
    long = tool_name("docs", "x" * 100)
    assert len(long) == 64
    assert allowed.match(long)
    assert long != tool_name("docs", "x" * 99)  # the hash keeps long names apart


def test_tools_of_a_server_that_is_not_running_are_a_clear_error(
    workspace: Workspace, load: Callable[..., Kernel], notes: Path
) -> None:
    """Without the kernel's services (no open_kernel) the server's tools are unknown."""
    workspace.write_config(config({"docs": stdio_server(notes)}))
    soul = workspace.scripted_agent("a", [{"text": "-"}], tools=["docs__add"], mcp_servers=["docs"])
    kernel = load()
    with pytest.raises(UsageError) as caught:
        kernel.runner().tools_for(kernel.agent("a"))
    assert str(caught.value).startswith(
        f"{soul}: mcp_servers: MCP server 'docs' is not running (no service runs it); MCP servers"
        " run as the kernel's service 'mcp'"
    )


def test_the_config_example_of_docs_mcp_md_loads(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- config-example -->\n```yaml\n(.*?)```", text, re.S)
    assert len(blocks) == 2, "docs/mcp.md: expected a config.yaml and a SOUL.yaml example"
    workspace_yaml, soul_yaml = blocks
    workspace.write_config(workspace_yaml)
    workspace.write_agent("researcher", soul_yaml)
    kernel = load()
    mcp: McpConfig = kernel.config.section("mcp")
    assert set(mcp.servers) >= {"docs", "search"}
    assert isinstance(mcp.servers["docs"], McpServer)
    assert (mcp.servers["docs"].kind, mcp.servers["search"].kind) == ("stdio", "http")
    shown = redact(kernel.config.to_dict())["mcp"]["servers"]["search"]["headers"]
    assert set(shown.values()) == {"***"}
    agent = kernel.agent("researcher")
    soul = YAML(typ="safe").load(soul_yaml)
    assert agent.section("mcp_servers") == soul["mcp_servers"]
    assert agent.section("mcp_tools") == soul["mcp_tools"]


def test_a_server_entry_written_by_the_original_system_loads(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        "mcp:\n"
        "  servers:\n"
        "    files: {transport: stdio, command: npx, args: [-y, '@mcp/files'], url: ''}\n"
        "    web: {transport: streamable-http, url: 'https://web.example.com/mcp', command: ''}\n"
    )
    workspace.write_agent("a", "mcp_servers: [files, web]\nmcp_tools: [files__read]\n")
    kernel = load()
    servers = kernel.config.section("mcp").servers
    assert (servers["files"].kind, servers["files"].url) == ("stdio", None)
    assert (servers["web"].kind, servers["web"].command) == ("http", None)
    assert kernel.agent("a").section("mcp_tools") == ["files__read"]


def test_with_the_plugin_disabled_the_mcp_keys_are_kept_and_warned(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_config("mcp:\n  servers:\n    files: {command: npx}\n")
    workspace.write_agent("a", "mcp_servers: [files]\n")
    kernel = load(plugins=["no:http", "no:scheduler", "no:sqlite_store", "no:mcp"])
    assert [k.path for k in kernel.config.kept] == ["mcp"]
    assert [k.path for k in kernel.agent("a").settings.kept] == ["mcp_servers"]
