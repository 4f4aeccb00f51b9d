"""The text that stands in for what compaction leaves out.

One marker message replaces each run of left-out messages, in its place. It says how many
messages of which roles and how many characters it stands for, then shows labelled excerpts of
the latest of them; its ``meta["compaction"]`` carries the same counts for programs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soulacy.kernel.messages import Message

from ._excerpt import Excerpt

PREFIX = "[soulacy: context compacted]"


def describe(message: Message) -> str:
    """Who said it: ``user``, ``assistant``, ``assistant calling read``, ``tool result of read``."""
    if message.role == "tool":
        error = " (an error)" if message.is_error else ""
        return f"tool result of {message.name or 'a tool'}{error}"
    if message.tool_calls:
        return "assistant calling " + ", ".join(call.name for call in message.tool_calls)
    return message.role


def excerpt_block(message: Message, excerpt: Excerpt) -> str:
    if excerpt.whole:
        size = f"all {excerpt.original:,} characters"
    else:
        size = f"{excerpt.kept:,} of {excerpt.original:,} characters"
    return f"--- excerpt · {describe(message)} · {size} ---\n{excerpt.text}"


def header(roles: Mapping[str, int], chars: int, excerpted: int, kept: int) -> str:
    return _header(roles, chars, excerpted, kept, chars - kept)


def _header(roles: Mapping[str, int], chars: int, excerpted: int, kept: int, omitted: int) -> str:
    count = sum(roles.values())
    noun, verb = ("message", "is") if count == 1 else ("messages", "are")
    by_role = ", ".join(f"{n:,} {role}" for role, n in roles.items())
    text = (
        f"{PREFIX} {count:,} earlier {noun} ({by_role}; {chars:,} characters) {verb} not shown"
        " in full, to fit the input allowance; the stored history keeps them whole."
    )
    if excerpted:
        return (
            f"{text} Excerpts of the latest {excerpted:,} follow, keeping {kept:,} characters;"
            f" {omitted:,} characters are omitted."
        )
    return f"{text} All {chars:,} characters are omitted."


def longest_header(roles: Sequence[str], messages: int, chars: int, excerpts: int) -> str:
    """A header at least as long as any for a run of at most ``messages`` messages of ``roles``
    with ``chars`` characters: room is reserved for it before its numbers are known."""
    return _header(dict.fromkeys(roles, messages), chars, max(excerpts, 1), chars, chars)


def marker(
    roles: Mapping[str, int],
    chars: int,
    span: tuple[int, int],
    excerpts: Sequence[tuple[Message, Excerpt]],
) -> Message:
    """The message standing for ``span`` (indices of the original list, end excluded)."""
    kept = sum(excerpt.kept for _, excerpt in excerpts)
    parts = [header(roles, chars, len(excerpts), kept)]
    parts += [excerpt_block(message, excerpt) for message, excerpt in excerpts]
    facts: dict[str, Any] = {
        "messages": sum(roles.values()),
        "roles": dict(roles),
        "chars": chars,
        "excerpted": len(excerpts),
        "kept_chars": kept,
        "omitted_chars": chars - kept,
        "span": list(span),
    }
    return Message("user", "\n\n".join(parts), meta={"compaction": facts})
