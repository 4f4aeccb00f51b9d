"""The scripted provider reads its scripts from the workspace only: an agent's ``llm.model``, a
configured ``llm.providers.*.model`` or ``options.script`` and ``llm.default.model`` name a
file that resolves inside the workspace (relative paths are relative to it; no ``..`` out, no
absolute path elsewhere, no symlink out). Anything else is an error naming the key and the
file when the configuration loads (``soulacy config validate`` says it), and a ``422`` naming
the field over HTTP with nothing saved; the file is never read, so its contents never show.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support.http_server import KEYS, open_server

from soulacy.cli import main
from soulacy.kernel import ConfigError, Kernel, UsageError
from soulacy.kernel.messages import Message, ModelRequest
from soulacy.testing import Workspace

KEYS_FLOW = "{" + ", ".join(f"{p}: {k}" for p, k in KEYS.items()) + "}"
CONFIG = f"server:\n  port: 0\n  api_keys: {KEYS_FLOW}\n  admins: [alice]\n"
SECRET = "steps: [{text: the-secret-contents}]\npassword: hunter2-do-not-show\n"


@pytest.fixture
def outside(workspace: Workspace) -> Path:
    """A YAML file outside the workspace, and links inside the workspace that point to it."""
    folder = workspace.path.parent / "outside"
    folder.mkdir()
    secret = folder / "secret.yaml"
    secret.write_text(SECRET)
    (workspace.path / "scripts").mkdir()
    (workspace.path / "scripts" / "link.yaml").symlink_to(secret)
    (workspace.path / "linked").symlink_to(folder)
    (workspace.path / "scripts" / "fine.yaml").write_text("steps: [{text: fine}]\n")
    return secret


def saved(path: Path) -> bytes:
    return path.read_bytes()


def paths_out(secret: Path) -> list[str]:
    return [
        str(secret),  # absolute
        "../outside/secret.yaml",  # .. out of the workspace
        "scripts/../../outside/secret.yaml",  # .. inside the path
        "scripts/link.yaml",  # a link in the workspace to a file outside
        "linked/secret.yaml",  # a linked folder
    ]


OUT = range(5)


@pytest.fixture
def calc(workspace: Workspace, outside: Path) -> Path:
    workspace.write_config(CONFIG)
    workspace.scripted_agent("calc", [{"text": "ok"}], repeat=True)
    return workspace.path / "agents" / "calc" / "SOUL.yaml"


@pytest.mark.parametrize("which", OUT)
async def test_alice_cannot_point_an_agents_scripted_model_outside_the_workspace(
    calc: Path, outside: Path, make_kernel: Callable[..., Kernel], which: int
) -> None:
    path = paths_out(outside)[which]
    before = saved(calc)
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        answer = await alice.patch("/agents/calc", json={"changes": {"llm": {"model": path}}})
        created = await alice.put(
            "/agents/made", json={"llm": {"provider": "scripted", "model": path}}
        )
    assert answer.status_code == 422, answer.text
    fields = answer.json()["fields"]
    assert list(fields) == ["llm.model"], fields
    assert "outside the workspace" in fields["llm.model"]
    assert "hunter2" not in answer.text
    assert "the-secret-contents" not in answer.text
    assert saved(calc) == before, "nothing was saved"
    assert created.status_code == 422, created.text
    assert list(created.json()["fields"]) == ["llm.model"]
    assert not (calc.parents[1] / "made").exists()


async def test_a_script_inside_the_workspace_is_accepted_and_bob_changes_nothing(
    calc: Path, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        async with server.client("bob") as bob:
            refused = await bob.patch(
                "/agents/calc", json={"changes": {"llm": {"model": "scripts/fine.yaml"}}}
            )
        assert refused.status_code == 403, refused.text
        async with server.client("alice") as alice:
            answer = await alice.patch(
                "/agents/calc", json={"changes": {"llm": {"model": "scripts/fine.yaml"}}}
            )
            chat = await alice.post("/chat", json={"agent_id": "calc", "text": "hi"})
    assert answer.status_code == 200, answer.text
    assert chat.status_code == 200, chat.text
    assert chat.json()["reply"] == "fine"


@pytest.mark.parametrize("which", OUT)
async def test_alice_cannot_set_the_default_scripted_model_outside_the_workspace(
    calc: Path, outside: Path, make_kernel: Callable[..., Kernel], which: int
) -> None:
    config = calc.parents[2] / "config.yaml"
    before = saved(config)
    path = paths_out(outside)[which]
    changes = {"llm.default": {"provider": "scripted", "model": path}}
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        answer = await alice.patch("/config", json={"changes": changes})
    assert answer.status_code == 422, answer.text
    assert list(answer.json()["fields"]) == ["llm.default.model"]
    assert "hunter2" not in answer.text
    assert saved(config) == before


def cli(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--workspace", str(workspace.path), "config", "validate"], environ={})
    return code, capsys.readouterr().err


@pytest.mark.parametrize("which", OUT)
def test_config_validate_names_the_key_and_the_file_of_every_script_outside(
    workspace: Workspace, outside: Path, capsys: pytest.CaptureFixture[str], which: int
) -> None:
    path = paths_out(outside)[which]
    workspace.write_config(
        "llm:\n"
        f"  default: {{provider: scripted, model: '{path}'}}\n"
        "  providers:\n"
        f"    demo: {{type: scripted, options: {{script: '{path}'}}}}\n"
        f"    bare: {{type: scripted, model: '{path}'}}\n"
    )
    code, err = cli(workspace, capsys)
    assert code == 2, err
    for key in ("llm.default.model", "llm.providers.demo.options.script"):
        assert f"{key}: " in err, err
    assert "llm.providers.bare.model: " in err, err
    assert path in err
    assert "outside the workspace" in err
    assert "hunter2" not in err
    assert "the-secret-contents" not in err
    workspace.write_config("")
    workspace.write_agent("bot", f"llm: {{provider: scripted, model: '{path}'}}\n")
    code, err = cli(workspace, capsys)
    assert code == 2, err
    assert "SOUL.yaml" in err, err
    assert "llm.model: " in err, err
    assert path in err, err
    assert "hunter2" not in err


def test_a_script_inside_the_workspace_validates(
    workspace: Workspace, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace.write_config(
        "llm:\n  providers:\n    demo: {type: scripted, options: {script: ./scripts/fine.yaml}}\n"
    )
    workspace.write_agent("bot", "llm: {provider: scripted, model: scripts/../scripts/fine.yaml}\n")
    workspace.write_agent("other", "llm: {provider: demo, model: whatever}\n")
    assert cli(workspace, capsys) == (0, "")


async def test_the_provider_itself_never_reads_a_script_outside(
    workspace: Workspace, outside: Path, make_kernel: Callable[..., Kernel], monkeypatch: Any
) -> None:
    """Defence in depth: a model name that reaches the provider another way (an agent loaded
    before the default provider changed, a run's override) is refused before any read."""
    import soulacy.plugins.scripted as scripted

    def no_read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"read {args}")

    monkeypatch.setattr(scripted, "load_document", no_read)
    kernel = make_kernel()
    provider = kernel.providers.provider("scripted")
    for path in paths_out(outside):
        request = ModelRequest([Message("user", "hi")], model=path)
        with pytest.raises(UsageError, match="outside the workspace"):
            await provider.complete(request)
    with pytest.raises((UsageError, ConfigError), match="outside the workspace"):
        kernel.update_config({"llm.providers.x": {"type": "scripted", "model": str(outside)}})
