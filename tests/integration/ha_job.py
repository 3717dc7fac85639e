"""The job of the high-availability tests, as a user's script run with ``cairn run`` by two
drivers at once: ``ha_job.py OUT RECORDS KEYS RATE [FLAG]``.

``jobs.sequence_job``: per-key sequences at ``RATE`` records/s -> keyed sequence check ->
the exactly-once file sink under ``OUT``, checkpointed every 500 ms; at full speed once the
file ``FLAG`` exists (``jobs.UntilFlag``). Checkpoint storage and
the ``high-availability.*`` keys come from ``-D`` options. The repository's root must be on
``PYTHONPATH`` (the Spark workers import ``tests.integration`` from there).
"""

from __future__ import annotations

import argparse

from tests.integration.jobs import UntilFlag, sequence_job


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("records", type=int)
    parser.add_argument("keys", type=int)
    parser.add_argument("rate", type=int)
    parser.add_argument("flag", nargs="?")
    args = parser.parse_args()
    rate = args.rate if args.flag is None else UntilFlag(float(args.rate), args.flag)
    env = sequence_job(
        {}, args.out, records=args.records, keys=args.keys, rate=rate, interval_ms=500
    )
    env.execute("ha-job")


if __name__ == "__main__":
    main()
