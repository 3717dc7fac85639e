"""The job of the drain test, as a user's script run with ``cairn run``:
``drain_job.py OUT RECORDS KEYS RATE``.

``event_time_jobs.window_job``: out-of-order events (bounded disorder) at ``RATE`` records/s
-> key_by -> per key and 1 s of event time, count and index sum emitted by an event-time
timer -> the exactly-once file sink under ``OUT/windows`` (late records: ``OUT/late``). Its
classes live in ``tests.integration.event_time_jobs``: the repository's root must be on
``PYTHONPATH`` (the Spark workers import them from there).
"""

from __future__ import annotations

import argparse

from tests.integration.event_time_jobs import window_job


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("records", type=int)
    parser.add_argument("keys", type=int)
    parser.add_argument("rate", type=int)
    args = parser.parse_args()
    env = window_job({}, args.out, records=args.records, keys=args.keys, rate=args.rate)
    env.execute("drain-job")


if __name__ == "__main__":
    main()
