"""Go-style durations (``2m``, ``48h1m``, ``1.5h``, ``"0"``), as the original system wrote them.

A duration is a whole number of nanoseconds (as Go's ``time.Duration``), so what a file says is
what is kept and printed: ``1h30m0.001s`` stays exactly that, and ``99999h59m59.999999999s`` does
not round to ``100000h``. Durations are at most :data:`MAX_DURATION` (100 years): anything longer
is a mistake (a unit typed twice, a value meant for another key), and a deadline that far away is
what ``"0"`` (no deadline) says more honestly.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from functools import total_ordering
from typing import Any

import attrs

NS_PER_SECOND = 1_000_000_000
_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": NS_PER_SECOND,
    "m": 60 * NS_PER_SECOND,
    "h": 3600 * NS_PER_SECOND,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
EXPECTED = 'a duration such as "30s", "2m", "48h1m" or "0"'
MAX_HOURS = 876_000  # 100 years of 365 days
MAX_DURATION_NS = MAX_HOURS * _UNIT_NS["h"]
TOO_LONG = f'a duration is at most {MAX_HOURS}h (100 years); use "0" for no deadline'


class Seconds(float):
    """A number of seconds that remembers the exact duration it was made from.

    It is a float everywhere (deadlines, JSON, arithmetic), and :func:`format_duration` prints
    it from its nanoseconds, so a resolved limit prints exactly what the file said.
    """

    nanoseconds: int

    def __new__(cls, nanoseconds: int) -> Seconds:
        self = super().__new__(cls, nanoseconds / NS_PER_SECOND)
        self.nanoseconds = nanoseconds
        return self

    def __getnewargs__(self) -> tuple[int]:  # type: ignore[override,unused-ignore]  # copies, pickles
        return (self.nanoseconds,)


@total_ordering
@attrs.frozen(init=False, repr=False, order=False)
class Duration:
    """A length of time, kept in integer nanoseconds. What zero means (often "no limit") is up to
    the setting using it.

    ``Duration(90)`` is 90 seconds; the argument may be an int, a float (read as the decimal it
    prints as, so ``Duration(0.1)`` is exactly 100ms), a Fraction or a Decimal.
    """

    nanoseconds: int

    def __init__(self, seconds: int | float | Fraction | Decimal = 0) -> None:
        self.__attrs_init__(_to_nanoseconds(seconds))

    @classmethod
    def from_nanoseconds(cls, nanoseconds: int) -> Duration:
        return cls(Fraction(nanoseconds, NS_PER_SECOND))

    @classmethod
    def parse(cls, text: str | int | float) -> Duration:
        """Parse a Go duration string; the integer ``0`` is accepted because YAML writes it bare."""
        if isinstance(text, bool):
            raise ValueError(f"expected {EXPECTED}")
        if isinstance(text, int | float):
            if text == 0:
                return cls(0)
            raise ValueError(f"expected {EXPECTED}; a bare number needs a unit")
        s = text.strip()
        if s in ("0", "-0", "+0"):
            return cls(0)
        negative = False
        if s and s[0] in "+-":
            negative = s[0] == "-"
            s = s[1:]
        pos, total = 0, Fraction(0)
        for match in _PART.finditer(s):
            if match.start() != pos:
                break
            total += Fraction(match.group(1)) * _UNIT_NS[match.group(2)]
            pos = match.end()
        if not s or pos != len(s):
            raise ValueError(f"expected {EXPECTED}")
        if negative:
            raise ValueError(f"expected {EXPECTED}; a duration cannot be negative")
        # Finer than a nanosecond is dropped, as Go's time.ParseDuration does.
        return cls.from_nanoseconds(int(total))

    @property
    def seconds(self) -> Seconds:
        """The length in seconds, as a float that still prints exactly."""
        return Seconds(self.nanoseconds)

    @property
    def is_zero(self) -> bool:
        return self.nanoseconds == 0

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Duration):
            return NotImplemented
        return self.nanoseconds < other.nanoseconds

    def __add__(self, other: object) -> Duration:
        if not isinstance(other, Duration):
            return NotImplemented
        return Duration.from_nanoseconds(self.nanoseconds + other.nanoseconds)

    def __str__(self) -> str:
        return format_duration(self)

    def __repr__(self) -> str:
        return f"Duration.parse({str(self)!r})"


def _to_nanoseconds(seconds: Any) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float | Fraction | Decimal):
        raise TypeError(f"a duration is a number of seconds, not {type(seconds).__name__}")
    if isinstance(seconds, Seconds):
        seconds = Fraction(seconds.nanoseconds, NS_PER_SECOND)
    elif isinstance(seconds, float):
        if seconds != seconds or seconds in (float("inf"), float("-inf")):
            raise ValueError(TOO_LONG)
        seconds = Decimal(repr(seconds))  # the decimal the float was written as
    exact = Fraction(seconds) * NS_PER_SECOND
    if exact < 0:
        raise ValueError(f"expected {EXPECTED}; a duration cannot be negative")
    nanoseconds = round(exact)
    if nanoseconds > MAX_DURATION_NS:
        raise ValueError(TOO_LONG)
    return nanoseconds


def format_duration(value: Duration | int | float | Fraction | Decimal) -> str:
    """Render a duration (or seconds) in the shortest Go form that parses back exactly:
    172860 -> ``48h1m``, 5400.001 -> ``1h30m0.001s``, 0 -> ``0``."""
    if isinstance(value, Duration | Seconds):
        ns = value.nanoseconds
    else:
        ns = _unbounded_nanoseconds(value)
    if ns == 0:
        return "0"
    if ns < 0:
        return "-" + format_duration(Fraction(-ns, NS_PER_SECOND))
    hours, rest = divmod(ns, _UNIT_NS["h"])
    minutes, rest = divmod(rest, _UNIT_NS["m"])
    secs, frac = divmod(rest, NS_PER_SECOND)
    text = "".join(f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m")) if n)
    if frac:
        text += f"{secs}.{frac:09d}".rstrip("0") + "s"
    elif secs:
        text += f"{secs}s"
    return text


def _unbounded_nanoseconds(seconds: int | float | Fraction | Decimal) -> int:
    # Formatting is also used on values no file set (sums, a run's elapsed time): no maximum.
    if isinstance(seconds, float):
        seconds = Decimal(repr(seconds))
    return round(Fraction(seconds) * NS_PER_SECOND)
