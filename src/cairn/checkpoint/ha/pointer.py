"""The HA pointer: the latest completed checkpoint of a job and how its run ended — pure.

Invariant: only the current leader writes the pointer, by a conditional write naming the
version it last wrote or read, with its own fencing token inside; a leader that finds a
pointer written under a higher token is fenced (``decide_publish``), and a new leader's
first write (``claim``) moves the pointer to its token, so every later write of an older
leader conflicts. A pointer never moves back to an older checkpoint.

>>> p = Pointer(token=2, job_id="j", checkpoint_id=7, checkpoint_dir="/c/j/chk-7")
>>> Pointer.decode(p.encode()) == p
True
>>> decide_publish(p, my_token=1)
Fenced(reason='the pointer was written under fencing token 2, newer than ours (1)')
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

__all__ = ["Fenced", "Pointer", "claim", "decide_publish", "pointing_to"]

RUNNING = "RUNNING"


@dataclass(frozen=True, slots=True)
class Pointer:
    """What a new leader resumes from. ``status``: RUNNING, or the job status the run ended
    with (FINISHED, CANCELED, FAILED); ``graph_digest``: the job graph's fingerprint."""

    token: int
    job_id: str
    checkpoint_id: int | None = None
    checkpoint_dir: str | None = None
    status: str = RUNNING
    graph_digest: str = ""
    writes: int = 0  # makes every write's bytes unique

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> Pointer:
        raw = json.loads(data)
        cid = raw.get("checkpoint_id")
        return cls(
            token=int(raw["token"]),
            job_id=str(raw["job_id"]),
            checkpoint_id=None if cid is None else int(cid),
            checkpoint_dir=raw.get("checkpoint_dir"),
            status=str(raw.get("status", RUNNING)),
            graph_digest=str(raw.get("graph_digest", "")),
            writes=int(raw.get("writes", 0)),
        )

    @property
    def ended(self) -> bool:
        """The run it describes ended (no leader is running it)."""
        return self.status != RUNNING


@dataclass(frozen=True, slots=True)
class Fenced:
    """A newer leader wrote the pointer: this driver must stop."""

    reason: str


def decide_publish(current: Pointer | None, my_token: int) -> Fenced | None:
    """None if a leader holding ``my_token`` may still write over ``current``.

    >>> decide_publish(None, 1) is None, decide_publish(Pointer(1, "j"), 1) is None
    (True, True)
    """
    if current is not None and current.token > my_token:
        return Fenced(
            f"the pointer was written under fencing token {current.token}, newer than ours "
            f"({my_token})"
        )
    return None


def claim(current: Pointer | None, token: int, job_id: str, graph_digest: str) -> Pointer:
    """The pointer a new leader writes when it takes over: the same checkpoint under its
    token (or an empty one). A run that had ended starts a new one.

    >>> claim(Pointer(1, "old", 7, "/c/chk-7", writes=9), 2, "new", "g")
    Pointer(token=2, job_id='new', checkpoint_id=7, checkpoint_dir='/c/chk-7', \
status='RUNNING', graph_digest='g', writes=10)
    """
    if current is None:
        return Pointer(token, job_id, graph_digest=graph_digest)
    return replace(
        current,
        token=token,
        job_id=job_id,
        status=RUNNING,
        graph_digest=graph_digest,
        writes=current.writes + 1,
    )


def pointing_to(
    current: Pointer, checkpoint_id: int | None, checkpoint_dir: str | None, status: str
) -> Pointer:
    """``current`` moved to a newer checkpoint (never an older one) or a final status.

    >>> p = pointing_to(Pointer(1, "j", 5, "/c/chk-5"), 4, "/c/chk-4", "FINISHED")
    >>> p.checkpoint_id, p.status
    (5, 'FINISHED')
    """
    if checkpoint_id is None or (
        current.checkpoint_id is not None and checkpoint_id < current.checkpoint_id
    ):
        checkpoint_id, checkpoint_dir = current.checkpoint_id, current.checkpoint_dir
    return replace(
        current,
        checkpoint_id=checkpoint_id,
        checkpoint_dir=checkpoint_dir,
        status=status,
        writes=current.writes + 1,
    )
