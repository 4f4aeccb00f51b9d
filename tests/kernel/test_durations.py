from __future__ import annotations

import pytest

from soulacy.kernel import Duration, format_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2m", 120),
        ("5m", 300),
        ("10m", 600),
        ("48h", 172_800),
        ("48h1m", 172_860),  # the seed's HTTP default: 48 hours plus one minute
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("500ms", 0.5),
        ("0", 0),
        (0, 0),
    ],
)
def test_go_durations_parse(text: str | int, seconds: float) -> None:
    assert Duration.parse(text).seconds == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "5x", "m", "1h 2m", "-1m", "h1", 5, 1.5, True])
def test_malformed_durations_are_refused(text: str | int) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        Duration.parse(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0"), (120, "2m"), (172_860, "48h1m"), (90, "1m30s"), (0.5, "0.5s")]
)
def test_durations_format_in_the_shortest_form_that_parses_back(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert Duration.parse(text).seconds == pytest.approx(seconds)


def test_durations_order_by_length() -> None:
    assert Duration.parse("2m") < Duration.parse("5m") <= Duration.parse("300s")
