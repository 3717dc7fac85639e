"""``OutputTag`` at PyFlink's path (``pyflink.datastream.output_tag``).

Invariant: a re-export only; the definitions live in ``cairn.api.output_tag``, below the
runtime and the state backends, which import them from there.
"""

from cairn.api.output_tag import (
    OutputTag,
)

__all__ = [
    "OutputTag",
]
