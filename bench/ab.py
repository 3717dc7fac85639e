"""A/B of one Cairn workload between two checkouts, alternating runs in one session.

Invariant: A and B run the same ``bench.workloads`` (or ``--module bench.windows``: the window
workload) command line, each from its own checkout
(its own ``bench`` package and installed ``cairn``), strictly alternating (A, B, B, A, A, B,
...), so that drifts in the shared machine's load fall on both alike; only the ratio of the
medians is reported as a result, never an absolute figure of one side alone.

Before/after a change (the brief: "a new feature must not slow the keyed-sum path")::

    git worktree add --detach ../cairn-before <rev>
    python -m bench.ab --a ../cairn-before --b . --repeat 4 -- \\
        --workload keyed-sum --records 2000000 --keys 10000 --checkpoint-interval-ms 1000

The window workload (events/s from completed windows, each run checked against the expected
results)::

    python -m bench.ab --a ../cairn-before --b . --repeat 4 --module bench.windows -- \\
        --records 10000000 --keys 10000 --events-per-second 1000000 --verify

The cost of a setting in one checkout (``--b-args``: workload options of B only), e.g. TLS::

    cairn tls init /tmp/tls
    python -m bench.ab --a . --b . --repeat 3 \\
        --b-args "--conf security.ssl.internal.enabled=true \\
                  --conf security.ssl.internal.keystore=/tmp/tls/internal.pem \\
                  --conf security.ssl.internal.truststore=/tmp/tls/internal-ca.pem" \\
        -- --workload keyed-sum --records 2000000 --keys 10000

or the latency markers' (``--b-args "--conf metrics.latency.interval=1000"``).

Prints one line per run and a summary (median records/s of each side, B/A).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "alternating_order",
    "check_imports_its_own_cairn",
    "checkout_command",
    "main",
    "run_once",
]


def alternating_order(repeat: int) -> list[str]:
    """ABBA order, ``repeat`` runs of each side.

    >>> alternating_order(3)
    ['a', 'b', 'b', 'a', 'a', 'b']
    """
    order: list[str] = []
    for i in range(repeat):
        order += ["a", "b"] if i % 2 == 0 else ["b", "a"]
    return order


def checkout_command(checkout: Path) -> tuple[str, dict[str, str]]:
    """The Python and environment that run ``checkout``'s own ``cairn``: this Python with
    ``checkout/src`` first on ``PYTHONPATH`` (which Spark's local workers inherit), for every
    checkout alike, also one with its own ``.venv``. Both sides of an A/B then import Cairn
    the same way: a same-code A/B of the main checkout (run from its venv's editable install)
    against a worktree of its HEAD (through ``PYTHONPATH``) measured B/A 0.925 on
    2026-11-28, and two worktrees of different commits 1.06-1.07 the same evening; without
    this, a worktree without a venv would also import the editable install of another
    checkout, and an A/B would compare a checkout with itself."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(checkout / "src"), env.get("PYTHONPATH", "")) if p
    )
    return sys.executable, env


def check_imports_its_own_cairn(checkout: Path) -> None:
    """Refuse to measure ``checkout`` if its command would import another checkout's cairn."""
    python, env = checkout_command(checkout)
    done = subprocess.run(
        [python, "-c", "import cairn; print(cairn.__file__)"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    location = Path(done.stdout.strip()).resolve()
    if checkout.resolve() not in location.parents:
        raise SystemExit(f"{checkout} would run the cairn of {location}, not its own")


#: The measurements an A/B can run: each prints one JSON object with ``steady_records_per_s``.
MODULES = ("bench.workloads", "bench.windows")


def run_once(
    checkout: Path, args: list[str], timeout_s: float, module: str = "bench.workloads"
) -> dict[str, Any]:
    """One ``python -m <module>`` run in ``checkout``; its JSON result."""
    python, env = checkout_command(checkout)
    done = subprocess.run(
        [python, "-m", module, *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{checkout}: exit {done.returncode}\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, type=Path, help="checkout A (e.g. before)")
    parser.add_argument("--b", required=True, type=Path, help="checkout B (e.g. after)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument(
        "--module", choices=MODULES, default=MODULES[0], help="what each run measures"
    )
    parser.add_argument(
        "--b-args", default="", help="more workload options for B only (shell words)"
    )
    parser.add_argument(
        "workload_args", nargs=argparse.REMAINDER, help="after --: the bench.workloads options"
    )
    ns = parser.parse_args(argv)
    args = [a for a in ns.workload_args if a != "--"]
    for checkout in (ns.a, ns.b):
        check_imports_its_own_cairn(checkout.resolve())
    rates: dict[str, list[float]] = {"a": [], "b": []}
    for side in alternating_order(ns.repeat):
        checkout = ns.a if side == "a" else ns.b
        extra = shlex.split(ns.b_args) if side == "b" else []
        result = run_once(checkout.resolve(), [*args, *extra], ns.timeout, ns.module)
        rate = float(result["steady_records_per_s"] or 0.0)
        rates[side].append(rate)
        verified = f", verified {result['verified']}" if "verified" in result else ""
        print(
            f"{side.upper()} {checkout}: {rate:,.0f} records/s "
            f"(checkpoint p50 {result.get('checkpoint_p50_ms')} ms{verified})",
            flush=True,
        )
    med_a, med_b = statistics.median(rates["a"]), statistics.median(rates["b"])
    print(
        f"median A {med_a:,.0f}  B {med_b:,.0f}  B/A {med_b / med_a:.3f}  "
        f"(A runs {[round(r) for r in rates['a']]}, B runs {[round(r) for r in rates['b']]})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
