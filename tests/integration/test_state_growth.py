"""A regular SQL join keeps every row it saw: without a TTL its checkpointed state grows at
each checkpoint and ``cairn doctor`` says so, naming the join and ``table.exec.state.ttl``;
with ``table.exec.state.ttl`` the same input's state levels off and the doctor is silent
(``bench/state_growth.py`` is the measurement, run here small)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from bench.state_growth import MIB, run

from cairn.datastream.stream_execution_environment import reset_context_defaults

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_a_join_without_ttl_grows_and_the_doctor_says_so_with_ttl_it_levels_off(
    tmp_path: Path,
) -> None:
    try:
        unbounded = run(4000, 9, None, str(tmp_path / "a"))
        bounded = run(4000, 9, "2 s", str(tmp_path / "b"))
    finally:
        reset_context_defaults()
    grown = [b for _, b in unbounded["sizes"]]
    assert len(grown) >= 6 and all(b > a for a, b in itertools.pairwise(grown))
    assert grown[-1] > 2 * grown[0] and grown[-1] > MIB
    finding = next(f for f in unbounded["findings"] if f["rule"] == "state-grows")
    assert "Join(" in str(finding["title"]) and "table.exec.state.ttl: 1 h" in finding["keys"]
    kept = [b for _, b in bounded["sizes"]]
    assert max(kept[2:]) < 1.5 * kept[2], "with a TTL the state levels off"
    assert max(kept) < grown[-1] / 2
    assert not [f for f in bounded["findings"] if f["rule"] == "state-grows"]
