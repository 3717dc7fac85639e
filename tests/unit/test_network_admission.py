"""A full listener's choice of the connection to turn away, and its rate-limited warnings:
pure decisions over facts and a passed-in clock, no sockets."""

from __future__ import annotations

import pytest

from cairn.runtime.network.admission import (
    PendingHandshake,
    RejectionKind,
    RejectionLog,
    choose_victim,
)

LOOPBACK, WORKER, FLOODER = "127.0.0.1", "10.0.0.2", "10.0.0.9"


def idle(host: str) -> PendingHandshake:
    return PendingHandshake(host, 0)


def test_on_loopback_the_oldest_connection_that_sent_nothing_goes() -> None:
    pending = [PendingHandshake(LOOPBACK, 30), idle(LOOPBACK), idle(LOOPBACK)]
    assert choose_victim(pending) == 1  # the oldest is partway through its proof


def test_when_all_sent_something_the_oldest_goes() -> None:
    pending = [PendingHandshake(LOOPBACK, 8), PendingHandshake(LOOPBACK, 70)]
    assert choose_victim(pending) == 0


def test_a_flooding_address_only_ever_displaces_its_own_connections() -> None:
    pending = [idle(WORKER), idle(FLOODER), idle(WORKER), idle(FLOODER), idle(FLOODER)]
    assert choose_victim(pending) == 1
    # However old the workers' handshakes are, the flooder pays while it holds the most.
    for _ in range(10):
        del pending[choose_victim(pending)]
        pending.append(idle(FLOODER))
        assert pending[:2] == [idle(WORKER), idle(WORKER)]


def test_on_a_tie_the_address_seen_first_gives_one_up() -> None:
    assert choose_victim([idle(WORKER), idle(FLOODER)]) == 0


def test_nothing_pending_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="no pending handshake"):
        choose_victim([])


def test_a_flood_of_rejections_is_a_few_lines_per_interval() -> None:
    log = RejectionLog(interval_s=10.0)
    lines: list[str] = []
    for i in range(26_470):  # what one flood wrote in 180 s, one warning each
        now = i * 180 / 26_470
        kind = RejectionKind.TIMED_OUT if i % 3 else RejectionKind.TURNED_AWAY
        lines += log.record(kind, f"rejected connection {i}", now)
        summary = log.summary(now)
        if summary is not None:
            lines.append(summary)
    # 18 windows of 10 s: the first of each kind, then a summary with the counts.
    assert len(lines) <= 18 * 3
    assert sum(log.total.values()) == 26_470
    assert lines[:2] == ["rejected connection 0", "rejected connection 1"]
    assert lines[2].startswith("1469 more rejected in the last 10 s (timed out: 979, turned ")
    lines.append(log.summary(180.0, force=True) or "")
    # Every rejection is in a line: logged in full, or counted in a summary.
    summaries = [line for line in lines if "more rejected" in line]
    counted = sum(int(line.split()[0]) for line in summaries)
    assert counted + len(lines) - len(summaries) == 26_470


def test_a_rejection_after_a_quiet_spell_brings_the_overdue_summary() -> None:
    log = RejectionLog(interval_s=10.0)
    log.record(RejectionKind.TIMED_OUT, "first", 0.0)
    log.record(RejectionKind.TIMED_OUT, "second", 1.0)
    assert log.record(RejectionKind.TIMED_OUT, "third", 25.0) == [
        "1 more rejected in the last 25 s (timed out: 1); the last: second",
        "third",
    ]


def test_a_window_ended_early_is_summarized_on_request() -> None:
    log = RejectionLog(interval_s=10.0)
    assert log.record(RejectionKind.UNAUTHENTICATED, "wrong secret", 0.0) == ["wrong secret"]
    assert log.summary(2.0, force=True) is None  # nothing was held back
    log.record(RejectionKind.UNAUTHENTICATED, "wrong secret", 3.0)
    log.record(RejectionKind.UNAUTHENTICATED, "wrong secret again", 4.0)
    assert log.summary(5.5, force=True) == (
        "1 more rejected in the last 2.5 s (unauthenticated: 1); the last: wrong secret again"
    )


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        RejectionLog(interval_s=0)
