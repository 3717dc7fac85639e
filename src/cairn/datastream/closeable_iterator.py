"""``CloseableIterator``: the records ``execute_and_collect`` returns, as they arrive.

Invariant: iterating never outlives the job's interest in it: ``close()`` (or leaving a
``with`` block) stops the iteration and cancels the job if it still runs; it is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["CloseableIterator"]


class CloseableIterator(Iterator[Any]):
    """Records of ``execute_and_collect``; ``close()`` cancels the job if it still runs."""

    def __init__(self, iterator: Iterator[Any], job_client: Any) -> None:
        self._iterator = iterator
        self._client = job_client
        self._closed = False

    @property
    def job_client(self) -> Any:
        """The client of the job whose records these are."""
        return self._client

    def __iter__(self) -> CloseableIterator:
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        return next(self._iterator)

    def next(self) -> Any:
        return self.__next__()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close = getattr(self._iterator, "close", None)
        if callable(close):
            close()
        if not self._client.get_job_status().is_globally_terminal_state():
            self._client.cancel()

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
