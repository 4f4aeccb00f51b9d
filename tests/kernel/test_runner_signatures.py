"""The Runner protocol's ``continue_run`` names its keywords (``overrides``, ``stream``,
``reservation``) with their types (:class:`ContinueOptions`), as ``Kernel.continue_run`` does:
a caller's misspelt or mistyped keyword is a type error, not a ``**options: Any`` that takes
anything."""

from __future__ import annotations

import inspect
from typing import get_type_hints

import attrs

from soulacy.kernel import Kernel, RunHandle, RunRequest
from soulacy.kernel.engine import ContinueOptions, Runner
from soulacy.plugins.engine._engine import Engine


def test_continue_run_takes_typed_keywords_in_the_protocol_and_the_engine() -> None:
    for function in (Runner.continue_run, Engine.continue_run):
        options = list(inspect.signature(function).parameters.values())[-1]
        assert (options.kind, options.annotation) == (
            inspect.Parameter.VAR_KEYWORD,
            "Unpack[ContinueOptions]",
        ), f"{function.__qualname__} takes untyped keywords: {options}"


def test_the_keywords_are_the_kernels_and_typed_as_a_run_request_has_them() -> None:
    hints = get_type_hints(ContinueOptions)
    kernel = inspect.signature(Kernel.continue_run).parameters
    assert list(hints) == [n for n, p in kernel.items() if p.kind is p.KEYWORD_ONLY]
    assert hints["stream"] is bool
    assert hints["reservation"] == RunHandle | None
    assert set(hints) <= {field.name for field in attrs.fields(RunRequest)}
