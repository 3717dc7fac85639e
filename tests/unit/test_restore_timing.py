"""Restore timings: a timed reader returns and raises what the reader does and counts its
bytes and busy time once across threads; the job master's summary picks the last worker."""

from __future__ import annotations

import threading
import time

import pytest

from cairn.checkpoint.read_timing import ReadTiming
from cairn.deploy.initialization import JobInitialization, WorkerInitialization
from cairn.testing.simple_state_files import MemoryStateFiles


class _OverlappingFiles(MemoryStateFiles):
    """Each read waits for the other three, so all four are in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.together = threading.Barrier(4)
        self.durations: list[float] = []

    def read_state_range(self, path: str, offset: int, length: int) -> bytes:
        began = time.perf_counter()
        self.together.wait(timeout=10)
        time.sleep(0.02)
        data = super().read_state_range(path, offset, length)
        self.durations.append(time.perf_counter() - began)
        return data


def test_timed_reads_return_the_same_bytes_and_count_overlapping_reads_once() -> None:
    files = _OverlappingFiles()
    path = files.write_state_file("a", bytes(range(200)))
    timing = ReadTiming()
    reader = timing.wrap(files)
    got: list[bytes] = []
    threads = [
        threading.Thread(target=lambda o=o: got.append(reader.read_state_range(path, o, 50)))
        for o in (0, 50, 100, 150)
    ]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    assert sorted(got) == [bytes(range(o, o + 50)) for o in (0, 50, 100, 150)]
    assert (timing.bytes, timing.reads) == (200, 4)
    # In flight together: counted once, less than the sum of the four reads' durations.
    assert 0.02 <= timing.busy_s <= elapsed
    assert timing.busy_s < sum(files.durations)


def test_a_failed_read_raises_unchanged_and_counts_no_bytes() -> None:
    timing = ReadTiming()
    reader = timing.wrap(MemoryStateFiles())
    with pytest.raises(KeyError):
        reader.read_state_range("missing", 0, 10)
    assert (timing.bytes, timing.reads) == (0, 1) and timing.busy_s >= 0


def test_the_summary_names_the_worker_that_ran_last() -> None:
    early = WorkerInitialization(1_000, setup_ms=900, metadata_ms=5, initialize_state_ms=100)
    late = WorkerInitialization(1_500, 10, 300, 400, 350, 7_000_000, local_bytes=6_000_000)
    init = JobInitialization.of(3, 800, 900, 950, 2_300, [early, late])
    assert init.local_bytes == 6_000_000 and "6.0 MB of it locally" in init.describe()
    assert (init.workers_started_ms, init.metadata_ms, init.initialize_state_ms) == (550, 300, 400)
    assert (init.state_read_ms, init.worker_state_bytes, init.state_bytes) == (
        350,
        7_000_000,
        7_000_000,
    )
    # No worker reported (e.g. older workers): the job master's own phases only.
    alone = JobInitialization.of(3, 800, 900, 950, 2_300, [])
    assert (alone.total_ms, alone.choose_ms, alone.workers_started_ms) == (1_500, 100, 0)
