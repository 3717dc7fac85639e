"""PyFlink DataStream names Cairn does not have yet, refused at import with what they are.

Invariant: only the names listed here are refused (with ``ImportError`` naming them and what is
missing); any other unknown name stays an ``AttributeError``, so tools probing modules are not
affected.

>>> UNSUPPORTED["Example"] = "an example"
>>> try:
...     refuse("cairn.datastream", "Example")
... except ImportError as e:
...     print(e)
cairn.datastream.Example: an example; see the README's 'DataStream API support'
>>> del UNSUPPORTED["Example"]
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["UNSUPPORTED", "refuse"]

UNSUPPORTED: dict[str, str] = {}


def refuse(module: str, name: str) -> NoReturn:
    """``ImportError`` for a listed name, else the ``AttributeError`` of an unknown one."""
    reason = UNSUPPORTED.get(name)
    if reason is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    raise ImportError(f"{module}.{name}: {reason}; see the README's 'DataStream API support'")
