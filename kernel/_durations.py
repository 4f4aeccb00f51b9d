"""Go-style durations (``2m``, ``48h1m``, ``1.5h``, ``"0"``), as the original system wrote them."""

from __future__ import annotations

import re
from functools import total_ordering

import attrs

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
EXPECTED = 'a duration such as "30s", "2m", "48h1m" or "0"'


@total_ordering
@attrs.frozen(order=False)
class Duration:
    """A length of time. What zero means (often "no limit") is up to the setting using it."""

    seconds: float

    @classmethod
    def parse(cls, text: str | int | float) -> Duration:
        """Parse a Go duration string; the integer ``0`` is accepted because YAML writes it bare."""
        if isinstance(text, bool):
            raise ValueError(f"expected {EXPECTED}")
        if isinstance(text, int | float):
            if text == 0:
                return cls(0.0)
            raise ValueError(f"expected {EXPECTED}; a bare number needs a unit")
        s = text.strip()
        if s in ("0", "-0", "+0"):
            return cls(0.0)
        sign = 1.0
        if s and s[0] in "+-":
            sign = -1.0 if s[0] == "-" else 1.0
            s = s[1:]
        pos, total = 0, 0.0
        for match in _PART.finditer(s):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if not s or pos != len(s):
            raise ValueError(f"expected {EXPECTED}")
        if sign < 0:
            raise ValueError(f"expected {EXPECTED}; a duration cannot be negative")
        return cls(total)

    @property
    def is_zero(self) -> bool:
        return self.seconds == 0

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Duration):
            return NotImplemented
        return self.seconds < other.seconds

    def __str__(self) -> str:
        return format_duration(self.seconds)


def format_duration(seconds: float) -> str:
    """Render seconds in the shortest Go form that parses back: 172860 -> ``48h1m``, 0 -> ``0``."""
    if seconds == 0:
        return "0"
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(hours, "h"), (minutes, "m"), (secs, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n)
