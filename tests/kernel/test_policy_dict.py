"""``ExecutionPolicy.to_dict``: formatted once per policy (every run publishes it as
``run.limits``), a fresh copy each call, and a changed copy formats its own limits."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from soulacy.kernel.policy import CORE_LIMITS, ExecutionPolicy, Limit


def policy() -> ExecutionPolicy:
    limits: dict[str, Any] = {name: Limit(None, "default") for name in CORE_LIMITS}
    limits["run_timeout"] = Limit(172800.0, "default")
    return ExecutionPolicy(agent_id="a", **limits)


def test_the_limits_are_formatted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = Limit.to_dict

    def counted(self: Limit[Any], *, duration: bool = False) -> dict[str, Any]:
        calls.append(self.source)
        return original(self, duration=duration)

    monkeypatch.setattr(Limit, "to_dict", counted)
    shown = policy()
    first, second = shown.to_dict(), shown.to_dict()
    assert first == second
    assert len(calls) == len(CORE_LIMITS)
    assert first["run_timeout"]["text"] == "48h"


def test_each_call_is_a_fresh_copy() -> None:
    shown = policy()
    first = shown.to_dict()
    first["run_timeout"]["text"] = "changed"
    first["agent_id"] = "b"
    assert shown.to_dict()["run_timeout"]["text"] == "48h"
    assert shown.to_dict()["agent_id"] == "a"


def test_a_changed_copy_formats_its_own_limits() -> None:
    shown = policy()
    shown.to_dict()
    changed = shown.with_limits(run_timeout=Limit(60.0, "wrapper"))
    evolved = attrs.evolve(shown, run_timeout=Limit(90.0, "evolve"))
    assert changed.to_dict()["run_timeout"]["text"] == "1m"
    assert evolved.to_dict()["run_timeout"]["text"] == "1m30s"
    assert shown.to_dict()["run_timeout"]["text"] == "48h"


def test_the_formatted_form_is_not_part_of_equality() -> None:
    formatted, fresh = policy(), policy()
    formatted.to_dict()
    assert formatted == fresh
    assert hash(formatted) == hash(fresh)
    assert "as_dict" not in repr(formatted)
