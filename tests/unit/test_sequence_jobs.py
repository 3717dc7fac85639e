"""The output checks of the sequence jobs count records: a record written twice fails them."""

from __future__ import annotations

from cairn.testing.sequence_jobs import check_sequence_lines
from tests.integration import jobs


def test_a_replayed_suffix_of_a_key_is_reported_as_duplicates() -> None:
    # What a fallback past a committed checkpoint writes: a key's suffix once more, with the
    # right running sums, and no value out of sequence within either run.
    first = [f"k00000,{s},{s * (s + 1) // 2}" for s in range(1, 6)]
    replay = first[2:] + [f"k00000,{s},{s * (s + 1) // 2}" for s in range(6, 8)]
    report = check_sequence_lines(first + replay)
    assert report.violations == [] and report.bad_sums == []
    assert report.duplicates == {"k00000,3,6": 1, "k00000,4,10": 1, "k00000,5,15": 1}
    assert not report.ok
    assert check_sequence_lines(first).ok


def test_exactly_once_problems_counts_per_record() -> None:
    golden = jobs.expected_lines(6, 2)
    assert jobs.exactly_once_problems(golden, 6, 2) == []
    problems = jobs.exactly_once_problems([*golden, golden[0], "junk"], 6, 2)
    assert problems[0].startswith("1 duplicated records (1 extra lines)")
    assert problems[1].startswith("1 unexpected lines")
    assert jobs.exactly_once_problems(golden[1:], 6, 2) == [f"1 missing records, e.g. {golden[0]}"]
