"""A file tool is made once per import of its file: every run of a served agent asks for its
tools, and a file that did not change gives the same tool; an edited file gives a new one."""

from __future__ import annotations

import os
from pathlib import Path

from soulacy.plugins.file_tools import load_file_tool


def write(path: Path, body: str, mtime_ns: int) -> None:
    path.write_text(body)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_an_unchanged_file_gives_the_same_tool_and_an_edited_one_a_new_tool(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.py"
    write(path, 'def step(i: int) -> str:\n    """One step."""\n    return "a"\n', 10**18)
    first = load_file_tool("t.py:step", tmp_path)
    assert load_file_tool("t.py:step", tmp_path) is first
    assert (first.name, first.listed_as, first.function(i=1)) == ("step", "t.py:step", "a")
    other = load_file_tool("./t.py:step", tmp_path)  # listed under another reference
    assert other is not first
    assert other.listed_as == "./t.py:step"
    body = 'def step(i: int, j: int = 0) -> str:\n    """Two."""\n    return "b"\n'
    write(path, body, 2 * 10**18)
    edited = load_file_tool("t.py:step", tmp_path)
    assert edited is not first
    assert (edited.description, edited.function(i=1), sorted(edited.parameters["properties"])) == (
        "Two.",
        "b",
        ["i", "j"],
    )
