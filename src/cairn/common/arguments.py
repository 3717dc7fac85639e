"""Type checks of the API's typed arguments.

Invariant: a typed setter (``set_parallelism(int)``, ...) accepts only its declared type and
names it when it refuses, even where the same configuration key also accepts text (a
``Configuration`` entry or a ``-D`` flag is text by nature; a method argument is not).
"""

from __future__ import annotations

from typing import Any

__all__ = ["require_int"]


def require_int(name: str, value: Any) -> int:
    """``value`` if it is an ``int`` (``bool`` is not), else ``TypeError`` naming the type.

    >>> require_int("parallelism", 2)
    2
    >>> require_int("parallelism", "2")
    Traceback (most recent call last):
    ...
    TypeError: parallelism must be an int, got '2' (str)
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    return value
