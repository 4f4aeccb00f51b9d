"""``check_progress_detector``: the conformance kit of a progress detector (what
``soulacy_progress_detector`` returns)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from soulacy.kernel.contracts import ProgressDetector

from ._store import expect, expect_that, run_named, select_checks

# -- progress detectors --------------------------------------------------------------------------

VERDICTS = ("progress", "repeated", "stalled")


def _feed(
    detector: ProgressDetector,
    results: Sequence[Any],
    *,
    arguments: str = "vary",
    tool: str = "t",
    is_error: bool = False,
) -> list[str]:
    """Feed results to a detector, the arguments varying or the same every time."""
    kinds: list[str] = []
    for n, result in enumerate(results):
        args = {"n": n} if arguments == "vary" else {"n": 0}
        verdict = detector.observe(tool, args, result, is_error)
        expect_that(
            getattr(verdict, "kind", None) in VERDICTS,
            f"the verdict of result {n + 1}",
            f"a Verdict whose kind is one of {VERDICTS}",
            verdict,
        )
        kinds.append(verdict.kind)
    return kinds


# make(limit): a fresh progress detector (limit None: it never stalls)
DetectorFactory = Callable[[int | None], ProgressDetector]


def _limit_identical(make: DetectorFactory) -> None:
    for limit in (2, 5, 9):
        for arguments in ("vary", "same"):
            how = f"limit {limit}, arguments {'varying' if arguments == 'vary' else 'the same'}"
            kinds = _feed(make(limit), ["same"] * limit, arguments=arguments)
            expect(kinds[-1], "stalled", f"{how}: the verdict of result {limit} of {limit}")
            fewer = _feed(make(limit), ["same"] * (limit - 1), arguments=arguments)
            expect_that(
                "stalled" not in fewer,
                f"{how}: {limit - 1} identical results (one fewer than the limit)",
                "no 'stalled' verdict",
                fewer,
            )


def _fresh_resets(make: DetectorFactory) -> None:
    for arguments in ("vary", "same"):
        kinds = _feed(make(5), ["same"] * 4 + ["fresh"] + ["same"] * 3, arguments=arguments)
        expect_that(
            "stalled" not in kinds,
            "4 identical results, a fresh one, 3 identical ones (limit 5)",
            "no 'stalled' verdict: a fresh result resets the count",
            kinds,
        )
    kinds = _feed(make(5), [f"r{n}" for n in range(50)], arguments="same")
    expect_that(
        "stalled" not in kinds,
        "50 different results of the same call (limit 5)",
        "no 'stalled' verdict: every result is fresh",
        kinds,
    )


def _arguments_alone(make: DetectorFactory) -> None:
    detector = make(3)
    kinds = [detector.observe("t", {"q": n}, "same answer", False).kind for n in range(3)]
    expect(kinds[-1], "stalled", "changing the arguments alone is not progress (limit 3)")


def _alternation(make: DetectorFactory) -> None:
    detector = make(6)
    kinds = [
        detector.observe(tool, {"n": n}, tool, False).kind for n, tool in enumerate(["A", "B"] * 5)
    ]
    expect_that(
        "stalled" in kinds,
        "two tools alternating, each returning its old evidence (limit 6)",
        "a 'stalled' verdict",
        kinds,
    )


def _errors(make: DetectorFactory) -> None:
    kinds = _feed(make(4), ["error: disk full"] * 4, is_error=True)
    expect(kinds[-1], "stalled", "the same error 4 times (limit 4)")


def _independent(make: DetectorFactory) -> None:
    first, second = make(5), make(5)
    kinds: list[str] = []
    for n in range(4):
        kinds.append(first.observe("t", {"n": n}, "same", False).kind)
        kinds.append(second.observe("t", {"n": n}, "same", False).kind)
    expect_that(
        "stalled" not in kinds,
        "two detectors of limit 5 fed 4 identical results each",
        "no 'stalled' verdict: each detector counts its own run",
        kinds,
    )
    expect(first.observe("t", {"n": 4}, "same", False).kind, "stalled", "the 5th of one")


def _disabled(make: DetectorFactory) -> None:
    for arguments in ("vary", "same"):
        kinds = _feed(make(None), ["same"] * 200, arguments=arguments)
        expect_that(
            "stalled" not in kinds,
            f"200 identical results, arguments {arguments}, limit None",
            "no 'stalled' verdict: None never stalls",
            kinds,
        )
    kinds = _feed(make(None), ["error"] * 50, is_error=True)
    expect_that("stalled" not in kinds, "50 identical errors, limit None", "no 'stalled'", kinds)
    detector = make(None)
    kinds = [detector.observe(t, {}, t, False).kind for t in ["A", "B"] * 50]
    expect_that(
        "stalled" not in kinds, "100 alternating results, limit None", "no 'stalled'", kinds
    )


PROGRESS_CHECKS: tuple[tuple[str, Callable[[DetectorFactory], None]], ...] = (
    ("limit", _limit_identical),
    ("fresh", _fresh_resets),
    ("arguments", _arguments_alone),
    ("alternation", _alternation),
    ("errors", _errors),
    ("independent", _independent),
    ("disabled", _disabled),
)
PROGRESS_CHECK_NAMES: tuple[str, ...] = tuple(name for name, _ in PROGRESS_CHECKS)


def check_progress_detector(
    make: DetectorFactory, *, only: str | Iterable[str] | None = None
) -> None:
    """``make(limit)`` returns a fresh detector; ``None`` disables stalling.

    ``limit`` identical results stall, one fewer does not, whether the calls repeat exactly
    or only their arguments change; a fresh result resets the count; alternating tools that
    return old evidence stall; so do identical errors; detectors share nothing; ``None``
    never stalls, whatever is fed. ``only`` runs the checks it names, of
    :data:`PROGRESS_CHECK_NAMES`, and no other (an unknown name is a ValueError)."""
    selected = select_checks("progress detector", PROGRESS_CHECK_NAMES, only)
    for name, check in PROGRESS_CHECKS:
        if name in selected:
            run_named(f"progress detector check {name}", functools.partial(check, make))
