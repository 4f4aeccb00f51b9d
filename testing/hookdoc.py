"""The hook reference (docs/hooks.md), generated from the hook specifications: the kernel's,
those the builtin plugins define for others, and the types hooks receive.

    python -m soulacy.testing.hookdoc > docs/hooks.md

A test regenerates it and compares, so a hook added, removed or changed without the docs
following fails the suite.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from types import ModuleType

from soulacy.kernel import hookspecs

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
        "Generated from `kernel/hookspecs.py` by `python -m soulacy.testing.hookdoc`; a test",
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
        out += _hook(name, signature, flags, doc)
    if module is hookspecs:
        out += _plugin_hooks() + _types()
    return "\n".join(out).rstrip() + "\n"


def _hook(name: str, signature: str, flags: dict[str, bool], doc: str) -> list[str]:
    kind = "first result wins" if flags["firstresult"] else "every result collected"
    if flags["historic"]:
        kind += "; historic (late plugins are called too)"
    return [
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


def _plugin_hooks() -> list[str]:
    """The hooks builtin plugins define for other plugins (their ``hookspecs`` modules)."""
    from soulacy.kernel import BUILTIN_PLUGINS
    from soulacy.kernel._manager import ESSENTIAL_PLUGINS

    out: list[str] = []
    for plugin, package in BUILTIN_PLUGINS:
        name = f"{package}.hookspecs"
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # a plugin that is a module, not a package
            continue
        if found is None:
            continue
        specs = importlib.import_module(name)
        if plugin in ESSENTIAL_PLUGINS:  # always loaded: its hooks are always defined
            how = f"`{plugin}` is essential, so they are always defined."
        else:
            how = (
                "implement them with `@hookimpl(optionalhook=True)`, so that your plugin still"
                f" loads when `{plugin}` is disabled."
            )
        out += [
            f"## Hooks the `{plugin}` plugin defines",
            "",
            f"In `{name}`, added with `soulacy_addhooks`: {how}",
            "",
        ]
        for _, hook, signature, flags, doc in hooks(specs):
            out += _hook(hook, signature, flags, doc)
    return out


# The types hooks, strategies and participants are handed, documented from their source.
TYPES = (
    ("soulacy.kernel.engine", "Run"),
    ("soulacy.kernel.contracts", "RunParticipant"),
    ("soulacy.kernel", "RunResult"),
    ("soulacy.kernel.messages", "Message"),
    ("soulacy.kernel.messages", "ToolCall"),
    ("soulacy.kernel.messages", "ModelRequest"),
    ("soulacy.kernel.messages", "ModelReply"),
    ("soulacy.kernel.messages", "Usage"),
)


def _types() -> list[str]:
    out = [
        "## Types hooks receive",
        "",
        "What a hook, a run strategy or a participant is handed, with every attribute and",
        "method it may use (methods marked `async` must be awaited).",
        "",
    ]
    for module_name, name in TYPES:
        cls = getattr(importlib.import_module(module_name), name)
        out += [f"### `{module_name}.{name}`", "", inspect.getdoc(cls) or "", ""]
        for field, annotation in _fields(cls):
            out.append(f"- `{field}: {annotation}`")
        for method, signature, doc in _methods(cls):
            summary = doc.split("\n\n")[0].replace("\n", " ") if doc else ""
            out.append(f"- `{method}{signature}`" + (f": {summary}" if summary else ""))
        out.append("")
    return out


def _fields(cls: type) -> list[tuple[str, str]]:
    attrs_fields = getattr(cls, "__attrs_attrs__", None)
    if attrs_fields is not None:
        return [(f.name, _annotation(f.type)) for f in attrs_fields]
    return [(field, str(a)) for field, a in inspect.get_annotations(cls).items()]


def _annotation(value: object) -> str:
    return value if isinstance(value, str) else getattr(value, "__name__", str(value))


def _methods(cls: type) -> list[tuple[str, str, str]]:
    found = []
    for method, fn in cls.__dict__.items():
        if method.startswith("_") or not callable(fn):
            continue
        prefix = "async " if inspect.iscoroutinefunction(fn) else ""
        found.append((prefix + method, _plain(inspect.signature(fn)), inspect.getdoc(fn) or ""))
    return found


def _plain(sig: inspect.Signature) -> str:
    """A signature with its (postponed, string) annotations written without quotes."""
    params = []
    for p in sig.parameters.values():
        text = p.name if p.kind is not p.VAR_POSITIONAL else f"*{p.name}"
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        params.append(text)
    if any(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values()):
        first = next(i for i, p in enumerate(sig.parameters.values()) if p.kind is p.KEYWORD_ONLY)
        params.insert(first, "*")
    returns = (
        "" if sig.return_annotation is sig.empty else f" -> {_annotation(sig.return_annotation)}"
    )
    return f"({', '.join(params)}){returns}"


if __name__ == "__main__":
    sys.stdout.write(render())
