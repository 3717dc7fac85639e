"""Helpers for the source connectors' tests: a reader's context, and reading readers dry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.datastream.connectors.base import SourceReader, SourceReaderContext

__all__ = ["ctx", "drain"]


def ctx(index: int, parallelism: int) -> SourceReaderContext:
    """The context of reader ``index`` of ``parallelism`` in attempt 0 of job ``"job"``."""
    return SourceReaderContext(index, parallelism, 0, "job")


def drain(readers: Sequence[SourceReader], max_records: int) -> list[Any]:
    """Poll the readers in turn, at most ``max_records`` a poll, until each has ended
    (``poll_batch`` returned None); all records, in the order polled."""
    out: list[Any] = []
    live = list(readers)
    while live:
        for reader in list(live):
            batch = reader.poll_batch(max_records)
            if batch is None:
                live.remove(reader)
            else:
                out.extend(batch)
    return out
