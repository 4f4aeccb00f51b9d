"""docs/tutorial.md runs, in order, as a reader would follow it (issue 38, observation 12).

Its steps are marked by an HTML comment on the line right before their fence::

    <!-- tutorial -->                  a ```sh block: its commands run, in the same shell as
                                       the steps before it (a `cd` carries on)
    <!-- tutorial file=PATH -->        a block whose text is the file PATH (relative to the
                                       shell's folder at that step), written as shown
    <!-- tutorial background -->       a ```sh block started in the background (a second
                                       terminal), waited for until it says `soulacy: serving`,
                                       and stopped with SIGTERM once the last step has run

The whole page becomes one bash script (``-e -o pipefail``), run in a fresh folder with the
``soulacy`` and ``python`` of this environment, no SOULACY_* variable of the caller's, and the
server on a free port (``SOULACY_SERVER__PORT``, with ``SOULACY_URL`` for the SDK).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
MARKER = re.compile(r"^<!--\s*tutorial(?:\s+(?P<option>background|file=\S+))?\s*-->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")
HEREDOC_END = "SOULACY_TUTORIAL_EOF"


@attrs.frozen
class Step:
    line: int  # of the block's first line, 1-based
    kind: str  # "sh", "file" or "background"
    text: str
    path: str | None = None


def steps_of(page: Path) -> list[Step]:
    lines = page.read_text(encoding="utf-8").splitlines()
    steps = []
    for n, line in enumerate(lines):
        marker = MARKER.match(line)
        if marker is None:
            continue
        fence = FENCE.match(lines[n + 1]) if n + 1 < len(lines) else None
        assert fence, f"{page}:{n + 1}: a tutorial marker must be right before a fence"
        end = next(i for i in range(n + 2, len(lines)) if lines[i].strip() == "```")
        text = "\n".join(lines[n + 2 : end]) + "\n"
        option = marker["option"] or ""
        if option.startswith("file="):
            steps.append(Step(n + 3, "file", text, option.removeprefix("file=")))
        else:
            assert fence[1] in ("sh", "bash"), f"{page}:{n + 2}: expected a ```sh block"
            steps.append(Step(n + 3, option or "sh", text))
    return steps


def script_of(steps: list[Step]) -> str:
    """The steps as one bash script; each says which line of the page it is."""
    out = [
        "trap 'if [ -n \"${BACKGROUND:-}\" ]; then kill $BACKGROUND 2>/dev/null; fi' EXIT",
    ]
    for step in steps:
        out.append(f"echo '### docs/tutorial.md:{step.line}' >&2")
        if step.kind == "file":
            assert step.path is not None
            assert HEREDOC_END not in step.text
            out.append(f'mkdir -p "$(dirname "{step.path}")"')
            out.append(f"cat > '{step.path}' <<'{HEREDOC_END}'\n{step.text}{HEREDOC_END}")
        elif step.kind == "background":
            out.append(f'( {step.text.strip()} ) > "$SERVER_LOG" 2>&1 &')
            out.append("BACKGROUND=$!")
            out.append(
                'until grep -q "soulacy: serving" "$SERVER_LOG"; do'
                ' kill -0 $BACKGROUND || { cat "$SERVER_LOG" >&2; exit 1; }; sleep 0.2; done'
            )
        else:
            out.append(step.text)
    out.append('if [ -n "${BACKGROUND:-}" ]; then kill $BACKGROUND; wait $BACKGROUND; fi')
    out.append('BACKGROUND=""')
    return "\n".join(out) + "\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    steps = steps_of(TUTORIAL)
    assert {step.kind for step in steps} == {"sh", "file", "background"}
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    env.pop("VIRTUAL_ENV", None)
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(tmp_path / "home"),
        SOULACY_SERVER__PORT=str(port),
        SOULACY_URL=f"http://127.0.0.1:{port}",
        SERVER_LOG=str(tmp_path / "serve.log"),
    )
    work = tmp_path / "work"
    work.mkdir()
    began = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script_of(steps)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    took = time.monotonic() - began
    server_log = (tmp_path / "serve.log").read_text() if (tmp_path / "serve.log").exists() else ""
    assert done.returncode == 0, (
        f"the tutorial stopped (exit {done.returncode}) after {took:.0f}s\n--- stdout ---\n"
        f"{done.stdout[-4000:]}--- stderr ---\n{done.stderr[-4000:]}--- serve ---\n{server_log}"
    )
    out = done.stdout
    assert '→ readings({"city": "Oslo"}) -> [3.5, 5.0, 4.5, 7.0]' in out, out
    assert out.count("Oslo this week: low 3.5 °C, high 7.0 °C, mean 5.0 °C.") >= 3, out
    assert "schedule:reporter:" in out, "expected the scheduled run in `soulacy runs`"
    assert "completed 2 tool calls" in out, "expected the SDK's answer"
    assert "soulacy: stopped in" in server_log, server_log
    report = work / "weather" / "reports" / "oslo.md"
    assert report.read_text(encoding="utf-8").strip() == (
        "Oslo this week: low 3.5 °C, high 7.0 °C, mean 5.0 °C."
    )


def test_a_broken_step_stops_the_tutorial_at_its_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- tutorial file=a.txt -->\n```text\nhello\n```\n\n"
        "<!-- tutorial -->\n```sh\ncat a.txt\nfalse\necho never\n```\n"
    )
    steps = steps_of(page)
    assert [(s.kind, s.line) for s in steps] == [("file", 3), ("sh", 8)]
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script_of(steps)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == "hello\n"
    assert done.stderr.splitlines()[-1] == "### docs/tutorial.md:8"
