"""One driver's side of the leader lease: stand by, take over, renew, fence, hand over.

Invariant: the only writes are conditional (``ConditionalStore``) and follow the pure
decisions of ``lease`` and ``pointer``; the lease is renewed on its own thread, and a driver
that failed to renew before its lease's validity ended, or found a newer leader's write, is
*lost* for good: ``check`` raises from then on, and ``on_lost`` callbacks run once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from cairn.checkpoint.ha.fence import LeadershipLost
from cairn.checkpoint.ha.lease import (
    Create,
    Held,
    Lease,
    Seen,
    Wait,
    decide_acquire,
    held_after_write,
    may_act,
    released,
    renew_due,
    renewed,
)
from cairn.checkpoint.ha.pointer import RUNNING, Pointer, claim, decide_publish, pointing_to
from cairn.checkpoint.ha.store import ConditionalStore, WriteConflict
from cairn.clock import Clock, MonotonicClock, SystemClock
from cairn.ids import CheckpointId

__all__ = ["LEASE", "POINTER", "Leadership", "Takeover"]

log = logging.getLogger(__name__)

LEASE = "leader-lease"
POINTER = "checkpoint-pointer"


@dataclass(frozen=True, slots=True)
class Takeover:
    """What a driver found when it became leader: the pointer of the run before (None if
    none), whether it had waited as a standby, and its fencing token."""

    previous: Pointer | None
    waited: bool
    token: int


class Leadership:
    """The lease of one job (records in ``store``) as seen by the driver ``holder``.

    ``role`` is ``contender`` (not decided yet), ``standby``, ``leader``, ``lost`` or
    ``released``; other threads may read it.
    """

    def __init__(
        self,
        store: ConditionalStore,
        holder: str,
        duration_ms: int,
        renew_interval_ms: int,
        clock: Clock | None = None,
        wall: Clock | None = None,
    ) -> None:
        if not 0 < renew_interval_ms < duration_ms:
            raise ValueError(
                f"the renew interval ({renew_interval_ms} ms) must be shorter than the lease "
                f"({duration_ms} ms)"
            )
        self.store = store
        self.holder = holder
        self.duration_ms = duration_ms
        self.renew_interval_ms = renew_interval_ms
        self.poll_ms = max(50, min(1_000, duration_ms // 10, renew_interval_ms // 2))
        self._clock = clock or MonotonicClock()
        self._wall = wall or SystemClock()
        self.role = "contender"
        self._held: Held | None = None  # replaced, never mutated: read from any thread
        self._lost: str | None = None
        self._pointer: tuple[Pointer, str] | None = None  # with its version
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.on_lost: list[Callable[[str], None]] = []
        # Run once, on the standing-by thread, when this driver starts to stand by.
        self.on_standby: list[Callable[[], None]] = []
        self._lose_lock = threading.Lock()
        self._saw_leader = False  # another driver held the lease when this one first looked

    def look(self) -> None:
        """Note whether another driver holds the lease now (before this driver spends time
        starting up): if so, this driver is a standby, and a run its leader ends on purpose
        is not run again by it."""
        record = self.store.read(LEASE)
        self._saw_leader = record is not None and not Lease.decode(record.data).released

    @property
    def leader(self) -> str | None:
        """Whom this driver stands by for (None unless it has stood by)."""
        return self._standing_behind

    @property
    def token(self) -> int | None:
        held = self._held
        return None if held is None else held.lease.token

    # ------------------------------------------------------------------ standing by

    def acquire(
        self, cancelled: threading.Event, job_id: str, graph_digest: str
    ) -> Takeover | None:
        """Block until this driver leads (standing by while another one does), then claim
        the pointer; None if ``cancelled`` was set first."""
        seen: Seen | None = None
        waited = self._saw_leader
        while not cancelled.is_set():
            record = self.store.read(LEASE)
            current = None if record is None else (record.version, Lease.decode(record.data))
            now = self._clock.now_ms()
            decision = decide_acquire(
                current, seen, self.holder, self.duration_ms, now, self._wall.now_ms()
            )
            if isinstance(decision, Wait):
                if seen is None or decision.holder.holder != self._standing_behind:
                    self._standing_behind = decision.holder.holder
                    log.warning(
                        "standing by: %s leads this job (fencing token %d, lease %d ms, in %s); "
                        "taking over if its lease lapses",
                        decision.holder.holder,
                        decision.holder.token,
                        decision.holder.duration_ms,
                        self.store.description,
                    )
                if self.role != "standby":
                    self.role = "standby"
                    for callback in list(self.on_standby):
                        try:
                            callback()
                        except Exception:  # warming up is an optimisation, never fatal
                            log.exception("a callback on standing by failed")
                seen, waited = decision.seen, True
                cancelled.wait(min(self.poll_ms, max(1, decision.until_ms - now)) / 1000)
                continue
            sent = self._clock.now_ms()
            data = decision.lease.encode()
            try:
                if isinstance(decision, Create):
                    version = self.store.create(LEASE, data).version
                else:
                    version = self.store.replace(LEASE, data, decision.expected).version
            except WriteConflict:
                seen = None  # another contender won: watch its lease from now on
                continue
            self._held = held_after_write(decision.lease, version, sent)
            self.role = "leader"
            took = "" if isinstance(decision, Create) else f" from {decision.previous.holder}"
            log.log(
                logging.WARNING if waited else logging.INFO,
                "leading this job with fencing token %d%s (lease %d ms, renewed every %d ms)",
                decision.lease.token,
                took,
                self.duration_ms,
                self.renew_interval_ms,
            )
            return self._claim(job_id, graph_digest, waited)
        return None

    _standing_behind: str | None = None

    def _claim(self, job_id: str, graph_digest: str, waited: bool) -> Takeover:
        token = self.token
        assert token is not None
        for _ in range(20):
            record = self.store.read(POINTER)
            previous = None if record is None else Pointer.decode(record.data)
            fenced = decide_publish(previous, token)
            if fenced is not None:
                self._lose(fenced.reason)
                raise LeadershipLost(fenced.reason)
            mine = claim(previous, token, job_id, graph_digest)
            try:
                if record is None:
                    version = self.store.create(POINTER, mine.encode()).version
                else:
                    version = self.store.replace(POINTER, mine.encode(), record.version).version
            except WriteConflict:
                continue
            self._pointer = (mine, version)
            return Takeover(previous, waited, token)
        raise LeadershipLost("could not claim the HA pointer: it keeps changing")

    # ------------------------------------------------------------------ leading

    def start_renewing(self) -> None:
        """Renew the lease on a daemon thread until ``release`` or the lease is lost."""
        self._renewer = threading.Thread(
            target=self._renew_loop, name="cairn-lease-renewal", daemon=True
        )
        self._renewer.start()

    def _renew_loop(self) -> None:
        step = max(10, min(self.renew_interval_ms // 4, 250)) / 1000
        while not self._stop.wait(step):
            held, now = self._held, self._clock.now_ms()
            if held is None or self._lost is not None:
                return
            if not may_act(held, now):
                ago = now - held.sent_ms
                self._lose(f"the lease was not renewed in time (last renewed {ago} ms ago)")
                return
            if not renew_due(held, now, self.renew_interval_ms):
                continue
            lease = renewed(held, self._wall.now_ms())
            sent = self._clock.now_ms()
            try:
                version = self.store.replace(LEASE, lease.encode(), held.version).version
            except WriteConflict:
                self._lose("another driver took the lease over")
                return
            except Exception as exc:  # the storage may answer again before the lease lapses
                log.warning("could not renew the leader lease (retrying): %s", exc)
                continue
            # Even when stopping: ``finish`` releases the lease by replacing this version.
            self._held = held_after_write(lease, version, sent)

    def holds(self) -> bool:
        return self._lost is None and may_act(self._held, self._clock.now_ms())

    def check(self, action: str) -> None:
        if self._lost is not None:
            raise LeadershipLost(f"not allowed to {action}: {self._lost}")
        held, now = self._held, self._clock.now_ms()
        if not may_act(held, now):
            ago = "never held" if held is None else f"last renewed {now - held.sent_ms} ms ago"
            self._lose(f"the lease lapsed ({ago})")
            raise LeadershipLost(f"not allowed to {action}: {self._lost}")

    def checkpoint_completed(self, checkpoint_id: CheckpointId, directory: str) -> None:
        self._write_pointer(checkpoint_id, directory, RUNNING)

    def _write_pointer(self, checkpoint_id: int | None, directory: str | None, status: str) -> None:
        self.check(f"record checkpoint {checkpoint_id} as the latest")
        assert self._pointer is not None and self.token is not None
        current, version = self._pointer
        new = pointing_to(current, checkpoint_id, directory, status)
        try:
            written = self.store.replace(POINTER, new.encode(), version).version
        except WriteConflict:
            record = self.store.read(POINTER)
            newer = None if record is None else Pointer.decode(record.data)
            fenced = decide_publish(newer, self.token)
            reason = fenced.reason if fenced else "the HA pointer was changed by another driver"
            self._lose(reason)
            raise LeadershipLost(reason) from None
        self._pointer = (new, written)

    def _lose(self, reason: str) -> None:
        with self._lose_lock:
            if self._lost is not None:
                return
            self._lost = reason
            self.role = "lost"
        log.error(
            "lost the leadership of this job: %s; this driver completes no checkpoint and "
            "commits nothing from now on",
            reason,
        )
        self._stop.set()
        for callback in list(self.on_lost):
            try:
                callback(reason)
            except Exception:
                log.exception("a callback on leadership loss failed")

    # ------------------------------------------------------------------ handing over

    def finish(self, status: str | None) -> None:
        """The run ended: record ``status`` (a job status name; None: record nothing, as
        when suspended) in the pointer, then release the lease so a successor need not wait.
        Does nothing once lost."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(5.0)
        if self._lost is not None or self._held is None:
            return
        try:
            if status is not None:
                self._write_pointer(None, None, status)
            held = self._held
            self.store.replace(LEASE, released(held, self._wall.now_ms()).encode(), held.version)
            self.role = "released"
            log.info("released the leadership of this job (%s)", status or "suspended")
        except LeadershipLost:
            return
        except Exception as exc:  # a successor then waits for the lease to lapse
            log.warning("could not release the leader lease: %s", exc)
