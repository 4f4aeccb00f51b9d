"""``soulacy demo``: the main job on embedded defaults — no network, no API key.

It writes a workspace into a temporary folder: an agent on the scripted model (named as such)
with two real Python tools, runs one request through real tool calls under the resolved
execution policy, and prints the reply, its metadata and the limits that applied.
"""

from __future__ import annotations

from pathlib import Path

CONFIG = """\
# A workspace made by `soulacy demo`. No limits are written here: the generous defaults apply.
llm:
  default:
    provider: scripted
"""

AGENT = """\
id: demo
name: Demo
description: Adds up numbers with a tool and checks its arithmetic, on a scripted model.
system_prompt: You add numbers with the add tool and check results with the check tool.
llm:
  provider: scripted
  model: agents/demo/script.yaml
tools:
  - tools.py:add
  - tools.py:check
"""

TOOLS = '''\
"""Tools of the demo agent: plain Python functions; the signature is the JSON schema."""


def add(numbers: list[float]) -> float:
    """Add up a list of numbers."""
    return sum(numbers)


def check(expression: str, expected: float) -> dict[str, object]:
    """Check that an arithmetic expression of + and numbers equals the expected value."""
    value = sum(float(part) for part in expression.split("+"))
    return {"expression": expression, "value": value, "ok": value == expected}
'''

SCRIPT = """\
# The scripted model: one step per model call. It does not read the conversation.
steps:
  - text: "Let me work that out."           # a progress-only reply: the engine nudges
  - tool: add
    arguments: {numbers: [19, 23]}
  - tool: add
    arguments: {numbers: [42, 58]}
  - tool: check
    arguments: {expression: "19 + 23 + 58", expected: 100}
  - text: "19 + 23 + 58 = 100, checked with the check tool."
"""

REQUEST = "What is 19 + 23 + 58?"


def write_demo_workspace(folder: Path) -> Path:
    """Write the demo workspace into ``folder`` and return it."""
    agent = folder / "agents" / "demo"
    agent.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(CONFIG, encoding="utf-8")
    (agent / "SOUL.yaml").write_text(AGENT, encoding="utf-8")
    (agent / "tools.py").write_text(TOOLS, encoding="utf-8")
    (agent / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    return folder
