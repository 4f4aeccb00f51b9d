"""The hook reference (docs/hooks.md), generated from the hook specifications.

    python -m soulacy.kernel.hookdoc > docs/hooks.md

A test regenerates it and compares, so a hook added, removed or changed without the docs
following fails the suite.
"""

from __future__ import annotations

import inspect
import sys
from types import ModuleType

from . import hookspecs

BANNER = "# " + "-" * 92


def _groups(source: str) -> dict[str, str]:
    """hook name -> the banner title above it in the module's source."""
    groups, title = {}, "Other"
    lines = source.splitlines()
    for n, line in enumerate(lines):
        if line.startswith(BANNER) and n + 2 < len(lines) and lines[n + 2].startswith(BANNER):
            title = lines[n + 1].removeprefix("# ").strip()
        elif line.startswith("def soulacy_"):
            groups[line[4:].split("(")[0]] = title
    return groups


def hooks(
    module: ModuleType = hookspecs, source: str | None = None
) -> list[tuple[str, str, str, dict[str, bool], str]]:
    """(group, name, signature, options, docstring) of every ``soulacy_*`` hook spec."""
    groups = _groups(inspect.getsource(module) if source is None else source)
    found = []
    for name, fn in inspect.getmembers(module, inspect.isfunction):
        if not name.startswith("soulacy_"):
            continue
        opts = getattr(fn, "soulacy_spec", None) or {}
        signature = _signature(name, inspect.signature(fn))
        flags = {k: bool(opts.get(k)) for k in ("firstresult", "historic")}
        found.append((groups.get(name, "Other"), name, signature, flags, inspect.getdoc(fn) or ""))
    order = list(dict.fromkeys(groups.values()))
    found.sort(key=lambda h: (order.index(h[0]) if h[0] in order else len(order), h[1]))
    return found


def _signature(name: str, sig: inspect.Signature) -> str:
    # Annotations are strings (postponed evaluation): print them without quotes.
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{name}({params}) -> {sig.return_annotation}"


def render(module: ModuleType = hookspecs, source: str | None = None) -> str:
    out = [
        "# Hook reference",
        "",
        "Generated from `kernel/hookspecs.py` by `python -m soulacy.kernel.hookdoc`; a test",
        "fails when a hook changes without this page following. Implement a hook with",
        "`@hookimpl` from `soulacy.kernel` (or a plain function named `soulacy_*`), taking only",
        "the arguments you need. *First result* hooks stop at the first non-None answer; the",
        "others collect one result per plugin.",
        "",
    ]
    current = None
    for group, name, signature, flags, doc in hooks(module, source):
        if group != current:
            out += [f"## {group}", ""]
            current = group
        kind = "first result wins" if flags["firstresult"] else "every result collected"
        if flags["historic"]:
            kind += "; historic (late plugins are called too)"
        out += [
            f"### `{name}`",
            "",
            "```python",
            f"def {signature}",
            "```",
            "",
            f"*{kind}*",
            "",
            doc,
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
