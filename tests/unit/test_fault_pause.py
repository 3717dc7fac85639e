"""The pause fault (``kill=pause,for=S``) and the ``after=`` condition of Cairn's fault points.

A pause stops the worker's real process (seen stopped from outside, in ``/proc``) and wakes
it after S seconds; with workers as threads it stalls the thread; either way the worker goes
on and the marker says it resumed. A fault with ``after=<file>`` fires only once the file
exists.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn.ids import AttemptNumber
from cairn.runtime.faults import FaultInjector, SimulatedCrash, parse_faults

ATTEMPT = AttemptNumber(0)


def test_a_pause_in_process_stalls_the_thread_then_goes_on(tmp_path: Path) -> None:
    marker = tmp_path / "fault-0"
    specs = parse_faults(f"point=alignment,kill=pause,for=0.3,marker={marker}")
    faults = FaultInjector(specs, ATTEMPT, hard_kill=False)
    started = time.monotonic()
    faults.check("alignment", "totals", 0)
    assert time.monotonic() - started >= 0.3
    text = marker.read_text()
    assert text.startswith("alignment of totals#0 (checkpoint None), paused for 0.3 s; ")
    assert "resumed after 0.3" in text
    assert not faults.active  # fired once
    faults.check("alignment", "totals", 0)  # and never again


def test_a_fault_with_after_waits_for_that_file(tmp_path: Path) -> None:
    first = tmp_path / "fault-0"
    specs = parse_faults(f"point=processing,records=1,after={first},marker={tmp_path / 'f1'}")
    faults = FaultInjector(specs, ATTEMPT, hard_kill=False)
    for records in range(1, 50):
        faults.check("processing", "orders", 0, records=records)  # not yet: no marker
    first.write_text("paused")
    with pytest.raises(SimulatedCrash):
        faults.check("processing", "orders", 0, records=50)


_CHILD = """
import sys
from cairn.ids import AttemptNumber
from cairn.runtime.faults import FaultInjector, parse_faults
specs = parse_faults(f"point=after-barrier,kill=pause,for=1,marker={sys.argv[1]}")
FaultInjector(specs, AttemptNumber(0), hard_kill=True).check("after-barrier", "sink", 1, 4)
print("went on", flush=True)
"""


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return "gone"
    return stat.rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_pause_stops_the_worker_process_and_a_helper_wakes_it(tmp_path: Path) -> None:
    marker = tmp_path / "fault-0"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(marker)], stdout=subprocess.PIPE, text=True
    )
    seen = set()
    deadline = time.monotonic() + 30
    while child.poll() is None and time.monotonic() < deadline:
        seen.add(_state(child.pid))
        time.sleep(0.01)
    out, _ = child.communicate(timeout=30)
    assert "T" in seen, seen  # stopped (SIGSTOP), seen from outside
    assert child.returncode == 0 and out == "went on\n"
    text = marker.read_text()
    assert text.startswith("after-barrier of sink#1 (checkpoint 4), paused for 1 s; resumed")
    assert float(text.split("resumed after ")[1].split()[0]) >= 1.0


def test_a_pause_needs_a_time_and_a_worker_point() -> None:
    with pytest.raises(ValueError, match="for=<seconds>"):
        parse_faults("point=alignment,kill=pause")
    with pytest.raises(ValueError, match="cannot pause"):
        parse_faults("point=register,kill=pause,for=1")
    with pytest.raises(ValueError, match="worker, driver or pause"):
        parse_faults("point=alignment,kill=freeze")
