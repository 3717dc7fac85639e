"""Frame kinds carried by ``FramedConnection`` and helpers for their payloads.

Invariant: a kind fits in one unsigned byte and its number never changes once released,
because both ends of a connection may run different builds during a rolling restart.
"""

from __future__ import annotations

import enum
import struct

_CREDIT = struct.Struct("!I")


class FrameKind(enum.IntEnum):
    """What a frame's payload is; the header's ``channel`` says which logical channel.

    Example::

        conn.send(FrameKind.CREDIT, 7, pack_credit(32))
    """

    DATA = 1  # pickled record batch (trusted: only ever read after authentication)
    EVENT = 2  # pickled channel event (barrier, cancel marker, end of partition)
    CREDIT = 3  # receiver grants the sender more buffers; payload: ``pack_credit(n)``
    CONTROL = 4  # pickled control message between a worker and the job master
    HELLO = 5  # first frame of a connection: the peer's identity, opaque raw bytes
    BUFFER_SIZE = 6  # receiver asks for buffers of n records (debloating); ``pack_credit(n)``


def pack_credit(credits: int) -> bytes:
    """Encode a credit announcement (unsigned 32-bit count).

    Example:
        >>> unpack_credit(pack_credit(3))
        3
    """
    if not 0 <= credits <= 0xFFFFFFFF:
        raise ValueError(f"credit count out of range [0, 2**32): {credits}")
    return _CREDIT.pack(credits)


def unpack_credit(payload: bytes | bytearray | memoryview) -> int:
    """Decode the payload of a ``FrameKind.CREDIT`` frame."""
    if len(payload) != _CREDIT.size:
        raise ValueError(f"credit payload must be {_CREDIT.size} bytes, got {len(payload)}")
    (credits,) = _CREDIT.unpack(payload)
    return int(credits)
