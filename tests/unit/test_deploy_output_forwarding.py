"""Forwarding a worker's stdout to the driver: whole lines, in order, the rest on flush, and
``sys.stdout`` restored afterwards."""

from __future__ import annotations

import sys

from cairn.deploy.output_forwarding import ForwardedStream, forwarding_stdout


def test_only_whole_lines_are_sent_until_a_flush() -> None:
    sent: list[str] = []
    stream = ForwardedStream(sent.append)
    stream.write("a")
    stream.write("b\nc\nd")
    assert sent == ["ab\nc\n"]
    stream.flush()
    stream.flush()
    assert sent == ["ab\nc\n", "d"]


def test_print_inside_goes_to_send_and_stdout_is_restored() -> None:
    sent: list[str] = []
    before = sys.stdout
    with forwarding_stdout(True, sent.append):
        print("x", 1)
        print("no newline", end="")
    assert sys.stdout is before
    assert sent == ["x 1\n", "no newline"]
    with forwarding_stdout(False, sent.append):
        assert sys.stdout is before
