"""The provider toolkit: a library the HTTP providers share, not a plugin."""

from __future__ import annotations

import email.utils
import time

import pytest

import soulacy.plugins.providerkit as providerkit
from soulacy.kernel import UsageError
from soulacy.kernel.providers import ProviderConfig, ProviderError
from soulacy.plugins.providerkit import (
    MAX_BACKOFF,
    api_key,
    backoff_delay,
    retry_after_seconds,
    tool_arguments,
)


def test_it_is_a_library_not_a_plugin() -> None:
    assert not [name for name in vars(providerkit) if name.startswith("soulacy_")]


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    assert retry_after_seconds("2.5") == 2.5
    assert retry_after_seconds("-3") == 0.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    later = retry_after_seconds(email.utils.formatdate(time.time() + 30, usegmt=True))
    assert later is not None
    assert 25 < later <= 30


def test_backoff_honours_retry_after_else_doubles_capped() -> None:
    asked = ProviderError("x", retryable=True, retry_after=3.0)
    assert backoff_delay(asked, 4) == 3.0
    assert backoff_delay(ProviderError("x", retry_after=600), 0) == MAX_BACKOFF
    plain = ProviderError("x", retryable=True)
    assert [backoff_delay(plain, n) for n in range(4)] == [0.5, 1.0, 2.0, 4.0]
    assert backoff_delay(plain, 30) == MAX_BACKOFF


def test_the_api_key_comes_from_the_entry_or_its_variable() -> None:
    assert api_key("p", ProviderConfig(type="t", api_key="k", api_key_env="V"), {}) == "k"
    assert api_key("p", ProviderConfig(type="t", api_key_env="V"), {"V": "v"}) == "v"
    assert api_key("p", ProviderConfig(type="t"), {}) is None
    with pytest.raises(UsageError, match=r"llm\.providers\.p\.api_key_env: .* V is not set"):
        api_key("p", ProviderConfig(type="t", api_key_env="V"), {})


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (None, {}),
        ("", {}),
        ('{"a": 1}', {"a": 1}),
        ({"a": 1}, {"a": 1}),
        ("[1]", {"_unparsable_arguments": "[1]"}),
        ("{nope", {"_unparsable_arguments": "{nope"}),
        ([1], {"_unparsable_arguments": "[1]"}),
    ],
)
def test_tool_arguments_are_an_object_or_passed_back_unparsed(raw: object, parsed: object) -> None:
    assert tool_arguments(raw) == parsed


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"x": 1e999}', {"_not_a_finite_number": "x: 1e999"}),
        ('{"x": -1e999}', {"_not_a_finite_number": "x: -1e999"}),
        ('{"a": {"b": [1, NaN]}}', {"_not_a_finite_number": "a.b[1]: NaN"}),
        ('{"x": Infinity, "y": -Infinity}', {"_not_a_finite_number": "x: Infinity, y: -Infinity"}),
        ({"x": float("inf")}, {"_not_a_finite_number": "x: inf"}),
        ({"x": [float("nan")]}, {"_not_a_finite_number": "x[0]: nan"}),
        ('{"x": 1e308, "n": 100000000000000000000000}', {"x": 1e308, "n": 10**23}),
    ],
)
def test_a_tool_argument_that_is_not_a_finite_number_is_named_not_kept(
    raw: object, parsed: object
) -> None:
    # JSON has no infinity or NaN: such an argument could not be sent back in the history.
    assert tool_arguments(raw) == parsed
