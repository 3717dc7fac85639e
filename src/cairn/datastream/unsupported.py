"""PyFlink DataStream names Cairn does not have yet, refused at import with what they are.

Invariant: only the names listed here are refused (with ``ImportError`` naming them and what is
missing); any other unknown name stays an ``AttributeError``, so tools probing modules are not
affected.

>>> try:
...     from cairn.datastream import AsyncDataStream
... except ImportError as e:
...     print(str(e).split(":")[0])
cairn.datastream.AsyncDataStream
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["UNSUPPORTED", "refuse"]

_ASYNC = "async I/O (PyFlink's AsyncDataStream with an AsyncFunction) is not supported by Cairn"

UNSUPPORTED = {
    "AsyncDataStream": _ASYNC,
    "AsyncFunction": _ASYNC,
    "AsyncRetryStrategy": _ASYNC,
    "ResultFuture": _ASYNC,
    "async_retry_predicates": _ASYNC,
}


def refuse(module: str, name: str) -> NoReturn:
    """``ImportError`` for a listed name, else the ``AttributeError`` of an unknown one."""
    reason = UNSUPPORTED.get(name)
    if reason is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    raise ImportError(f"{module}.{name}: {reason}; see the README's 'DataStream API support'")
