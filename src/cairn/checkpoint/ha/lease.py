"""The leader lease: who runs a job, with which fencing token, and until when — pure.

Invariant: a contender takes a lease over only after it saw the same version of the lease
record unchanged for the holder's whole lease duration on its own clock (or saw it released),
and only by a conditional write naming that version, with the token one higher; a holder
acts only before ``valid_until_ms``, measured on its own clock from the moment it *sent* its
last successful write, minus a safety margin. Since a contender's observation of a write
starts after the write was sent, the holder stops acting before any contender may take
over, whatever the two machines' wall clocks say (only their clock rates must agree within
the margin). Fencing tokens only grow, so a token names one leadership term.

>>> me = "driver-b"
>>> held = Lease("driver-a", token=3, duration_ms=10_000, renewed_at_ms=0, writes=7)
>>> decide_acquire(("v7", held), None, me, 15_000, now_ms=1_000)
Wait(until_ms=11000, holder=Lease(holder='driver-a', token=3, duration_ms=10000, \
renewed_at_ms=0, writes=7, released=False), seen=Seen(version='v7', since_ms=1000))
>>> decide_acquire(("v7", held), Seen("v7", 1_000), me, 15_000, now_ms=11_000).lease.token
4
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

__all__ = [
    "Acquire",
    "Create",
    "Held",
    "Lease",
    "Seen",
    "TakeOver",
    "Wait",
    "decide_acquire",
    "held_after_write",
    "may_act",
    "released",
    "renew_due",
    "renewed",
]

SAFETY_FRACTION = 0.1  # of the lease: a holder stops acting this much before it could lapse


@dataclass(frozen=True, slots=True)
class Lease:
    """The lease record. ``renewed_at_ms`` (the holder's wall clock) is for people reading
    it; decisions use only versions and each process's own clock. ``writes`` makes every
    write's bytes unique (stores may derive versions from the bytes)."""

    holder: str
    token: int
    duration_ms: int
    renewed_at_ms: int
    writes: int = 0
    released: bool = False

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Lease:
        """Parse a lease record.

        >>> Lease.decode(Lease("a", 1, 5_000, 0).encode()).token
        1
        """
        raw = json.loads(data)
        return cls(
            holder=str(raw["holder"]),
            token=int(raw["token"]),
            duration_ms=int(raw["duration_ms"]),
            renewed_at_ms=int(raw["renewed_at_ms"]),
            writes=int(raw.get("writes", 0)),
            released=bool(raw.get("released", False)),
        )


@dataclass(frozen=True, slots=True)
class Seen:
    """A contender first saw lease version ``version`` at ``since_ms`` (its own clock)."""

    version: str
    since_ms: int


@dataclass(frozen=True, slots=True)
class Create:
    """No lease exists: create it (token 1)."""

    lease: Lease


@dataclass(frozen=True, slots=True)
class TakeOver:
    """Replace the lease at ``expected`` (released, or unchanged for its whole duration)."""

    lease: Lease
    expected: str
    previous: Lease


@dataclass(frozen=True, slots=True)
class Wait:
    """Another driver holds the lease: stand by until ``until_ms`` at the earliest."""

    until_ms: int
    holder: Lease
    seen: Seen


Acquire = Create | TakeOver | Wait


def decide_acquire(
    record: tuple[str, Lease] | None,
    seen: Seen | None,
    me: str,
    duration_ms: int,
    now_ms: int,
    wall_ms: int = 0,
) -> Acquire:
    """What a contender ``me`` does, given the lease record read (version, lease) and what it
    saw of it before.

    >>> decide_acquire(None, None, "me", 5_000, now_ms=0)
    Create(lease=Lease(holder='me', token=1, duration_ms=5000, renewed_at_ms=0, writes=0, \
released=False))
    >>> gone = Lease("old", 4, 5_000, 0, released=True)
    >>> decide_acquire(("v", gone), None, "me", 5_000, now_ms=0).lease.token
    5
    """
    if record is None:
        return Create(Lease(me, 1, duration_ms, wall_ms))
    version, lease = record
    successor = Lease(me, lease.token + 1, duration_ms, wall_ms)
    if lease.released:
        return TakeOver(successor, version, lease)
    if seen is None or seen.version != version:  # changed: the holder is alive; start over
        return Wait(now_ms + lease.duration_ms, lease, Seen(version, now_ms))
    if now_ms - seen.since_ms >= lease.duration_ms:
        return TakeOver(successor, version, lease)
    return Wait(seen.since_ms + lease.duration_ms, lease, seen)


@dataclass(frozen=True, slots=True)
class Held:
    """A lease this driver holds: its record's version and until when it may act."""

    lease: Lease
    version: str
    sent_ms: int  # when the write that made this version was sent (own clock)
    valid_until_ms: int


def held_after_write(lease: Lease, version: str, sent_ms: int) -> Held:
    """The lease held after a successful write sent at ``sent_ms``.

    >>> held_after_write(Lease("me", 1, 10_000, 0), "v1", sent_ms=500).valid_until_ms
    9500
    """
    margin = int(lease.duration_ms * SAFETY_FRACTION)
    return Held(lease, version, sent_ms, sent_ms + lease.duration_ms - margin)


def may_act(held: Held | None, now_ms: int) -> bool:
    """Whether the holder may still complete a checkpoint or commit (strictly before the
    end of validity).

    >>> held = held_after_write(Lease("me", 1, 10_000, 0), "v1", sent_ms=0)
    >>> may_act(held, 8_999), may_act(held, 9_000), may_act(None, 0)
    (True, False, False)
    """
    return held is not None and now_ms < held.valid_until_ms


def renew_due(held: Held, now_ms: int, interval_ms: int) -> bool:
    """Whether the holder should renew now (``interval_ms`` after its last write).

    >>> held = held_after_write(Lease("me", 1, 10_000, 0), "v1", sent_ms=0)
    >>> renew_due(held, 2_999, 3_000), renew_due(held, 3_000, 3_000)
    (False, True)
    """
    return now_ms - held.sent_ms >= interval_ms


def renewed(held: Held, wall_ms: int) -> Lease:
    """The record a renewal writes: same holder and token, a new write.

    >>> held = held_after_write(Lease("me", 2, 10_000, 0, writes=5), "v", sent_ms=0)
    >>> renewed(held, 42)
    Lease(holder='me', token=2, duration_ms=10000, renewed_at_ms=42, writes=6, released=False)
    """
    return replace(held.lease, renewed_at_ms=wall_ms, writes=held.lease.writes + 1)


def released(held: Held, wall_ms: int) -> Lease:
    """The record that gives the lease up: a successor need not wait for it to lapse."""
    return replace(renewed(held, wall_ms), released=True)
