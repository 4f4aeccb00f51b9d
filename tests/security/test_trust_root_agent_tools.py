"""Which code runs is the trust root: over HTTP an agent's ``tools:`` may name only tools that
are registered (contributed by a plugin) and ``file.py:function`` files inside the agent's own
folder (``agents/ID/``, where file tools are looked for), resolved: no absolute path, no ``..``,
no symlink pointing out. Anything else is ``422`` naming the entry, with SOUL.yaml byte for
byte as it was. An entry written in SOUL.yaml by hand keeps working, and stays when the editor
sends the list back; a principal that is no admin changes no agent at all.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support.http_server import KEYS, open_server

from soulacy.kernel import Kernel, Tool
from soulacy.testing import Workspace, throwaway_plugin

KEYS_FLOW = "{" + ", ".join(f"{p}: {k}" for p, k in KEYS.items()) + "}"
CONFIG = f"server:\n  port: 0\n  api_keys: {KEYS_FLOW}\n  admins: [alice]\n"
TOOLS_PY = 'def add(a: int, b: int) -> int:\n    """Add."""\n    return a + b\n'
EVIL_PY = (
    "import os\n\n"
    'def run(command: str) -> str:\n    """Run."""\n    return os.popen(command).read()\n'
)


def saved(path: Path) -> bytes:
    return path.read_bytes()


def fetch() -> str:
    """Fetches nothing."""
    return "fetched"


def registered() -> Any:
    """A plugin that registers the tool ``fetch``."""
    return throwaway_plugin("registered", soulacy_tools=lambda: [Tool.from_function(fetch)])


@pytest.fixture
def calc(workspace: Workspace) -> Path:
    """The agent ``calc`` with tools.py in its folder; another agent's folder beside it; a file
    outside every agent's folder; and links in calc's folder that point out of it."""
    workspace.write_config(CONFIG)
    workspace.scripted_agent("calc", [{"text": "ok"}], repeat=True)
    workspace.scripted_agent("other", [{"text": "ok"}], repeat=True)
    folder = workspace.path / "agents" / "calc"
    (folder / "tools.py").write_text(TOOLS_PY)
    (folder / "lib").mkdir()
    (folder / "lib" / "more.py").write_text(TOOLS_PY)
    (workspace.path / "agents" / "other" / "tools.py").write_text(EVIL_PY)
    outside = workspace.path.parent / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text(EVIL_PY)
    (workspace.path / "evil.py").write_text(EVIL_PY)
    (folder / "link.py").symlink_to(outside / "evil.py")
    (folder / "linked").symlink_to(outside)
    return folder / "SOUL.yaml"


OUTSIDE = [
    pytest.param(f"{subprocess.__file__}:getoutput", id="absolute-stdlib"),
    pytest.param("../../evil.py:run", id="dotdot-workspace"),
    pytest.param("../other/tools.py:run", id="dotdot-other-agent"),
    pytest.param("lib/../../other/tools.py:run", id="dotdot-inside-path"),
    pytest.param("link.py:run", id="symlinked-file"),
    pytest.param("linked/evil.py:run", id="symlinked-folder"),
]


@pytest.mark.parametrize("entry", OUTSIDE)
async def test_a_tool_file_outside_the_agents_folder_is_refused(
    calc: Path, make_kernel: Callable[..., Kernel], entry: str
) -> None:
    before = saved(calc)
    async with (
        open_server(make_kernel, extra_plugins=[registered()]) as server,
        server.client("alice") as alice,
    ):
        answer = await alice.patch(
            "/agents/calc", json={"changes": {"tools": ["tools.py:add", entry]}}
        )
    assert answer.status_code == 422, answer.text
    fields = answer.json()["fields"]
    assert list(fields) == ["changes.tools.1"], fields
    assert "agent's folder" in fields["changes.tools.1"], fields
    assert saved(calc) == before, "nothing was saved"


@pytest.mark.parametrize("entry", OUTSIDE)
async def test_a_new_agent_gets_no_tool_file_from_outside_either(
    calc: Path, make_kernel: Callable[..., Kernel], entry: str
) -> None:
    new = calc.parents[1] / "made"
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        answer = await alice.put("/agents/made", json={"tools": [entry]})
    assert answer.status_code == 422, answer.text
    assert list(answer.json()["fields"]) == ["tools.0"]
    assert not new.exists()


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param("missing.py:add", id="no-such-file"),
        pytest.param("tools.py:_private", id="private-name"),
        pytest.param("SOUL.yaml:add", id="not-python"),
        pytest.param("nosuchtool", id="unregistered-name"),
    ],
)
async def test_an_entry_that_names_no_registered_tool_or_tool_file_is_refused(
    calc: Path, make_kernel: Callable[..., Kernel], entry: str
) -> None:
    before = saved(calc)
    async with (
        open_server(make_kernel, extra_plugins=[registered()]) as server,
        server.client("alice") as alice,
    ):
        answer = await alice.patch("/agents/calc", json={"changes": {"tools": [entry]}})
    assert answer.status_code == 422, answer.text
    assert list(answer.json()["fields"]) == ["changes.tools.0"]
    assert saved(calc) == before


async def test_a_tool_file_in_the_agents_folder_and_a_registered_tool_are_accepted(
    calc: Path, make_kernel: Callable[..., Kernel]
) -> None:
    tools = ["tools.py:add", "lib/more.py:add", "./tools.py:add", "fetch"]
    async with open_server(make_kernel, extra_plugins=[registered()]) as server:
        async with server.client("alice") as alice:
            answer = await alice.patch("/agents/calc", json={"changes": {"tools": tools}})
            made = await alice.put(
                "/agents/made", json={"tools": ["fetch"], "llm": {"provider": "scripted"}}
            )  # an agent is never written without a provider (docs/portal.md)
        offered = [
            t.listed_as or t.name
            for t in server.kernel.runner().tools_for(server.kernel.agent("calc"))
        ]
    assert answer.status_code == 200, answer.text
    assert answer.json()["changed"] == ["tools"]
    assert made.status_code == 201, made.text
    assert offered == tools


async def test_bob_who_is_no_admin_cannot_patch_an_agent_at_all(
    calc: Path, make_kernel: Callable[..., Kernel]
) -> None:
    before = saved(calc)
    async with (
        open_server(make_kernel, extra_plugins=[registered()]) as server,
        server.client("bob") as bob,
    ):
        changed = await bob.patch("/agents/calc", json={"changes": {"tools": ["fetch"]}})
        created = await bob.put("/agents/made", json={})
    assert (changed.status_code, created.status_code) == (403, 403)
    assert saved(calc) == before
    assert not (calc.parents[1] / "made").exists()


def hand_written(soul: Path, shared: Path) -> Path:
    """SOUL.yaml names, by hand, a tool file outside the agent's folder and a link out of it."""
    shared.write_text(TOOLS_PY)
    text = soul.read_text().replace("tools: []", f"tools: ['{shared}:add', link.py:run]")
    soul.write_text(text)
    return shared


async def test_entries_written_in_soul_yaml_by_hand_keep_working_and_are_kept_by_edits(
    calc: Path, workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    shared = hand_written(calc, workspace.path.parent / "outside" / "shared.py")
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        kernel = server.kernel
        by_hand = [t.listed_as for t in kernel.runner().tools_for(kernel.agent("calc"))]
        # the editor sends the whole list back, with one entry more: the saved ones stay
        answer = await alice.patch(
            "/agents/calc",
            json={
                "changes": {
                    "description": "adds",
                    "tools": [f"{shared}:add", "link.py:run", "tools.py:add"],
                }
            },
        )
        reordered = await alice.patch(
            "/agents/calc", json={"changes": {"tools": ["link.py:run", f"{shared}:add"]}}
        )
    assert by_hand == [f"{shared}:add", "link.py:run"]
    assert answer.status_code == 200, answer.text
    assert reordered.status_code == 200, reordered.text
