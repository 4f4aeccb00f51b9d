"""Memory of the progress detector over a long run: bounded by its window, not the run.

    python bench/progress_memory.py [--calls 100000]

Feeds one detector fresh results (the worst case: every signature new) and reports the memory
it holds (tracemalloc) after 1,000 calls and after all of them, side by side.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

from soulacy.plugins.progress import SignatureDetector


def held_after(calls: int) -> tuple[int, float]:
    gc.collect()
    tracemalloc.start()
    detector = SignatureDetector(limit=20)
    started = time.perf_counter()
    for n in range(calls):
        detector.observe("read", {"path": f"f{n}"}, {"items": [n], "timestamp": n}, False)
    elapsed = time.perf_counter() - started
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert detector.statistics()["in_window"] == detector.window
    del detector
    return size, elapsed / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args()
    small, small_us = held_after(1_000)
    large, large_us = held_after(args.calls)
    print("| calls | bytes held by the detector | µs per observe |")
    print("|---|---|---|")
    print(f"| 1,000 | {small:,} | {small_us:.1f} |")
    print(f"| {args.calls:,} | {large:,} | {large_us:.1f} |")
    print(f"\nmemory ratio {args.calls:,} / 1,000 calls: {large / small:.2f}")


if __name__ == "__main__":
    main()
