"""The floor under the cost-at-a-rate targets: the cost-curve job's essential work written as
the leanest two-process CPython program (no engine), to tell what any Python engine must pay.

Invariant: the job is the one ``bench.cost_curve`` measures — records ``(key, 1, created_ns)``
due at ``rate`` records/s in all (half per process, stamped with their schedule), 10,000
keys, each record hashed to one of two processes, counted per key in a dict, and written as
``key,count,created_ns,arrival_ns`` to a file renamed once a second (the exactly-once file
sink's commit; its fsync left out, as an engine does it off the task thread) — with nothing
an engine adds: one thread per process, a pickled frame per turn between the two over TCP
loopback, no checkpoint barriers, no metrics.
Each process wakes every ``tick`` seconds on a timer (the linger: input that arrives
meanwhile waits for the next turn; with ``--wake-on-input`` it ends the sleep), both on the
same grid of the monotonic clock so that one wake-up serves its own source and the other's
records. CPU is read with ``getrusage`` over the window
after the warm-up, latency as ``arrival - created`` of the records written in it.

    python -m bench.cost_floor --rates 10000,1000 --tick-ms 2 --fractions 0.5,0.8

Prints one line per run and a JSON line with the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pickle
import resource
import selectors
import socket
import struct
import tempfile
import time
import zlib

__all__ = ["main", "percentile"]

KEYS = 10_000
_LEN = struct.Struct("!I")


def percentile(sorted_values: list[int], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of sorted values.

    >>> percentile([1, 2, 3, 4], 50)
    2
    >>> percentile([1, 2, 3, 4], 100)
    4
    """
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * q // 100))
    return sorted_values[int(rank) - 1]


def _worker(
    index: int,
    conn: socket.socket,
    rate: float,
    tick_s: float,
    start_at: float,
    warmup_s: float,
    window_s: float,
    out_dir: str,
    result: mp.Queue,
    wake_on_input: bool,
) -> None:
    conn.setblocking(False)
    selector = selectors.DefaultSelector()
    if wake_on_input:  # else a timer-only sleep: input waits for the next turn
        selector.register(conn, selectors.EVENT_READ)
    names = [f"key-{k:05d}" for k in range(KEYS)]
    owner = [zlib.crc32(name.encode()) & 1 for name in names]
    unthrottled = rate <= 0  # as fast as it goes: 1,024 records a turn
    ns_per_record = 1 if unthrottled else int(2e9 / rate)  # this process's share: half
    counts: dict[str, int] = {}
    latencies: list[int] = []
    path = os.path.join(out_dir, f"part-{index}")
    sink = open(path + ".inprogress", "w")  # noqa: SIM115 (rolled once a second)
    inbox = bytearray()
    outbox = bytearray()
    emitted = 0
    next_commit = start_at + 1.0
    window_start = start_at + warmup_s
    window_end = window_start + window_s
    cpu_start = None
    t0_ns = time.time_ns() + int((start_at - time.monotonic()) * 1e9)
    next_tick = start_at + tick_s

    written = [0]

    def write(records: list[tuple[str, int, int]], in_window: bool) -> None:
        if in_window:
            written[0] += len(records)
        for key, one, created in records:
            count = counts.get(key, 0) + one
            counts[key] = count
            arrival = time.time_ns()
            sink.write(f"{key},{count},{created},{arrival}\n")
            if in_window:
                latencies.append(arrival - created)

    while True:
        delay = next_tick - time.monotonic()
        if delay > 0:
            selector.select(delay)
        now = time.monotonic()
        if cpu_start is None and now >= window_start:
            cpu_start = resource.getrusage(resource.RUSAGE_SELF)
        if now >= window_end:
            break
        in_window = now >= window_start
        # the source, on the grid: records due by now
        if now < next_tick:
            due = emitted  # woken by input
        elif unthrottled:
            due, next_tick = emitted + 1024, now
        else:
            due = (time.time_ns() - t0_ns) // ns_per_record
            while next_tick <= now:
                next_tick += tick_s
        local: list[tuple[str, int, int]] = []
        remote: list[tuple[str, int, int]] = []
        for i in range(emitted, due):
            k = (i * 2 + index) % KEYS
            record = (names[k], 1, t0_ns + i * ns_per_record)
            (local if owner[k] == index else remote).append(record)
        emitted = max(emitted, due)
        if remote:
            payload = pickle.dumps(remote, protocol=5)
            outbox += _LEN.pack(len(payload)) + payload
        write(local, in_window)
        # send what the socket takes, read what came (both never block: the two processes
        # send to each other, and a full socket on both sides must not stall them)
        while outbox:
            try:
                sent = conn.send(outbox)
            except BlockingIOError:
                break
            del outbox[:sent]
        try:
            while chunk := conn.recv(1 << 16):
                inbox += chunk
        except BlockingIOError:
            pass
        while len(inbox) >= 4:
            (size,) = _LEN.unpack_from(inbox)
            if len(inbox) < 4 + size:
                break
            write(pickle.loads(inbox[4 : 4 + size]), in_window)
            del inbox[: 4 + size]
        if now >= next_commit:  # the commit: flush, rename, roll (an engine fsyncs off the
            sink.close()  # task thread; an inline fsync would stall this loop for I/O)
            os.replace(path + ".inprogress", f"{path}-{int(now)}")
            sink = open(path + ".inprogress", "w")  # noqa: SIM115
            next_commit += 1.0
    end = resource.getrusage(resource.RUSAGE_SELF)
    assert cpu_start is not None
    cpu = end.ru_utime - cpu_start.ru_utime + end.ru_stime - cpu_start.ru_stime
    if unthrottled:
        latencies = []
    result.put((index, cpu / window_s, latencies, written[0]))


def run(
    rate: float, tick_ms: float, seconds: float, warmup: float, wake_on_input: bool = False
) -> dict[str, float]:
    """One run of the two processes; ``rate <= 0``: unthrottled, no sleep between turns."""
    listener = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(listener.getsockname())
    b, _ = listener.accept()
    listener.close()
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    result: mp.Queue = mp.Queue()
    start_at = time.monotonic() + 0.5
    tick_s = 0.0 if rate <= 0 else tick_ms / 1e3
    with tempfile.TemporaryDirectory() as out:
        procs = [
            mp.Process(
                target=_worker,
                args=(i, s, rate, tick_s, start_at, warmup, seconds, out, result, wake_on_input),
            )
            for i, s in enumerate((a, b))
        ]
        for p in procs:
            p.start()
        got = [result.get() for _ in procs]
        for p in procs:
            p.join()
    lat = sorted(v for _, _, vs, _ in got for v in vs)
    return {
        "rate": rate,
        "achieved": round(sum(n for *_, n in got) / seconds),
        "tick_ms": tick_ms if rate > 0 else 0.0,
        "wake_on_input": wake_on_input,
        "cores": round(sum(c for _, c, _, _ in got), 4),
        "records": len(lat),
        "p50_ms": round(percentile(lat, 50) / 1e6, 3),
        "p99_ms": round(percentile(lat, 99) / 1e6, 3),
        "p999_ms": round(percentile(lat, 99.9) / 1e6, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="10000,1000", help="records/s, comma-separated")
    parser.add_argument(
        "--fractions", default="", help="also: fractions of the maximum, measured first"
    )
    parser.add_argument("--tick-ms", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument(
        "--wake-on-input", action="store_true", help="input ends a sleep (no linger)"
    )
    args = parser.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",") if r]
    if args.fractions:
        top = run(0, 0, args.seconds, args.warmup)
        print(f"floor unthrottled: {top['achieved']:,} records/s, {top['cores']:.3f} cores")
        print(json.dumps(top))
        rates += [round(float(f) * top["achieved"]) for f in args.fractions.split(",")]
    for rate in rates:
        figures = run(rate, args.tick_ms, args.seconds, args.warmup, args.wake_on_input)
        print(
            f"floor at {rate:,.0f}/s (held {figures['achieved']:,}), tick {args.tick_ms} ms"
            f"{', woken by input' if args.wake_on_input else ''}: "
            f"{figures['cores']:.3f} cores in all, p50 {figures['p50_ms']} "
            f"p99 {figures['p99_ms']} p99.9 {figures['p999_ms']} ms"
        )
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
