"""The W3C trace context the HTTP transport hands a run (``RunRequest.trace``): a well formed
``traceparent`` and ``tracestate`` only; anything else is dropped, never an error."""

from __future__ import annotations

import pytest

from soulacy.plugins.http._app import trace_context

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_well_formed_context_is_passed_on() -> None:
    headers = {"traceparent": PARENT, "tracestate": "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"}
    assert trace_context(headers) == {
        "traceparent": PARENT,
        "tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
    }


@pytest.mark.parametrize(
    "parent",
    [
        "",
        "00-zz-yy-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero parent id
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
        PARENT + "-extra",
    ],
)
def test_a_malformed_traceparent_is_dropped_with_its_state(parent: str) -> None:
    assert trace_context({"traceparent": parent, "tracestate": "rojo=1"}) == {}


@pytest.mark.parametrize(
    "state",
    [
        "bad key=1",
        "a=\x85b",  # a C1 control character, which latin-1 headers let through
        "a=1,b",
        ",".join(f"k{n}=v" for n in range(33)),  # more than 32 members
        "a=" + "v" * 600,  # longer than 512 characters
    ],
)
def test_a_malformed_tracestate_is_dropped_and_the_parent_kept(state: str) -> None:
    assert trace_context({"traceparent": PARENT, "tracestate": state}) == {"traceparent": PARENT}
