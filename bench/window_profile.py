"""Where Cairn's time goes in the ``window`` workload: cProfile over every worker thread.

Invariant: the job is exactly ``bench.windows``' (same events, windows, aggregate, sink), run
with the in-process executor so that one process holds every task; each thread that starts
while the job runs gets its own ``cProfile.Profile`` (``threading.setprofile``), and the
report merges them (time of all threads, so the figures are CPU seconds across tasks, not
wall time). For reading the per-record path, not for rates (profiling slows Python code
several-fold).

    python -m bench.window_profile --records 1000000 --keys 10000 --events-per-second 100000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import threading
from typing import Any

__all__ = ["profile_window_job"]


def profile_window_job(
    records: int,
    keys: int,
    events_per_second: int,
    interval_ms: int = 1000,
    top: int = 30,
    dump_path: str | None = None,
) -> tuple[dict[str, Any], str]:
    """Run the window job in-process under cProfile; (its result, the top ``top`` functions
    by own time and by cumulative time, merged over all threads; also saved to ``dump_path``
    for ``pstats``)."""
    from bench.windows import run_cairn

    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_profile(frame: Any, event: str, arg: Any) -> None:
        profile = cProfile.Profile()
        with lock:
            profiles.append(profile)
        sys.setprofile(None)
        profile.enable()

    threading.setprofile(start_profile)
    main_profile = cProfile.Profile()
    main_profile.enable()
    try:
        result = run_cairn(records, keys, events_per_second, interval_ms, 2, "inprocess")
    finally:
        main_profile.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
        for profile in profiles:
            profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(main_profile, stream=out)
    for profile in profiles:
        try:
            stats.add(profile)
        except TypeError:
            continue  # a thread that never ran profiled code
    if dump_path:
        stats.dump_stats(dump_path)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return result, out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.window_profile", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--events-per-second", type=int, default=100_000)
    parser.add_argument("--checkpoint-interval-ms", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--dump", default=None, help="save the merged stats (pstats) here")
    args = parser.parse_args(argv)
    result, report = profile_window_job(
        args.records,
        args.keys,
        args.events_per_second,
        args.checkpoint_interval_ms,
        args.top,
        args.dump,
    )
    print(report)
    print({k: result.get(k) for k in ("steady_records_per_s", "window_results", "elapsed_s")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
