"""CPU time per record of the keyed-sum workload with internal TLS off and on.

Invariant: both sides run the same ``bench.workloads`` keyed-sum in this process on the
in-process executor (two worker threads, real loopback TCP between them, TLS on one side),
strictly alternating (ABBA), and only ratios of medians are reported: CPU time per record
(``getrusage`` of the process around each run) is steadier than a wall-clock rate on a shared
machine.

Usage::

    python -m bench.tls_cost --records 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile

from bench.ab import alternating_order
from bench.jobs import CairnOptions
from bench.workloads import run_workload
from cairn.runtime.network.certificates import make_job_certificates


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tls_cost", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side")
    args = parser.parse_args(argv)
    certs = make_job_certificates(tempfile.mkdtemp(prefix="cairn-tls-cost-") + "/tls")
    tls = tuple((k, v) for k, v in certs.options().items() if ".internal." in k)
    cpu: dict[str, list[float]] = {"a": [], "b": []}
    rates: dict[str, list[float]] = {"a": [], "b": []}
    # Imports and first-use costs would fall on the first (plain) run: a run that counts not.
    run_workload(
        "keyed-sum",
        max(args.records // 10, 10_000),
        args.keys,
        1000,
        None,
        CairnOptions(executor="inprocess"),
    )
    for side in alternating_order(args.repeat):
        opts = CairnOptions(executor="inprocess", extra_config=tls if side == "b" else ())
        before = _cpu_s()
        result = run_workload("keyed-sum", args.records, args.keys, 1000, None, opts)
        per_record = (_cpu_s() - before) / args.records * 1e6
        cpu[side].append(per_record)
        rates[side].append(float(result["steady_records_per_s"] or 0))
        name = "plain" if side == "a" else "TLS  "
        rate = rates[side][-1]
        print(f"{name} {per_record:.2f} µs CPU/record, {rate:,.0f} records/s", flush=True)
    a, b = statistics.median(cpu["a"]), statistics.median(cpu["b"])
    print(
        f"median µs CPU/record plain {a:.2f}  TLS {b:.2f}  TLS/plain {b / a:.3f}; "
        f"records/s plain {statistics.median(rates['a']):,.0f}  "
        f"TLS {statistics.median(rates['b']):,.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
