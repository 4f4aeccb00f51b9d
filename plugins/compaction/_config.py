"""The ``compaction:`` section of config.yaml and its validation."""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from soulacy.kernel import ConfigIssue, Location, Settings

# A cut message keeps at least this many characters (or all of a shorter text): never empty.
MIN_KEPT_CHARS = 100


@attrs.frozen
class CompactionConfig:
    """Tuning of the builtin extractive compactor; the defaults suit most models."""

    chars_per_token: float = 4.0  # the default token estimate: characters / chars_per_token
    message_overhead_tokens: int = 4  # per message (and per tool schema): role, separators
    keep_recent_exchanges: int = 2  # newest exchanges always kept, their results cut if needed
    excerpt_chars: int = 1000  # at most this much of each older message excerpted
    max_excerpts: int = 8  # older messages excerpted per compaction


def validate(config: Settings) -> list[ConfigIssue]:
    """Range checks of the section, each pointing at the line that sets the value."""
    section: CompactionConfig = config.section("compaction")
    checks: Sequence[tuple[str, object, bool, str]] = (
        (
            "chars_per_token",
            section.chars_per_token,
            math.isfinite(section.chars_per_token) and section.chars_per_token > 0,
            "expected a number greater than 0",
        ),
        (
            "message_overhead_tokens",
            section.message_overhead_tokens,
            section.message_overhead_tokens >= 0,
            "expected 0 or more",
        ),
        (
            "keep_recent_exchanges",
            section.keep_recent_exchanges,
            section.keep_recent_exchanges >= 1,
            "expected 1 or more",
        ),
        (
            "excerpt_chars",
            section.excerpt_chars,
            section.excerpt_chars >= MIN_KEPT_CHARS,
            f"expected {MIN_KEPT_CHARS} or more",
        ),
        ("max_excerpts", section.max_excerpts, section.max_excerpts >= 0, "expected 0 or more"),
    )
    issues = []
    for key, value, ok, expected in checks:
        if not ok:
            path = f"compaction.{key}"
            loc = config.source_of(path) or Location(str(config.file))
            issues.append(ConfigIssue(loc, path, expected, value, True))
    return issues
