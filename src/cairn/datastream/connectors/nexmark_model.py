"""The Nexmark benchmark's event model: its configuration and the rules that place an event.

Invariant: pure arithmetic on the event number. Event ``n`` of a stream (``n = 0, 1, ...``,
counted over the whole stream, whatever the parallelism) has a kind, an id and an event time
that depend on ``n`` and the configuration only; these functions work on Python ints and
element-wise on numpy integer arrays alike. The rules are those of the Nexmark generator of
``nexmark/nexmark`` (nexmark-flink, itself from Apache Beam's): proportions person:auction:bid
(1:3:46 by default) repeat every ``total_proportion`` events, a person's and an auction's id
count the persons and auctions generated before them (from ``FIRST_PERSON_ID`` and
``FIRST_AUCTION_ID``), and event times advance by ``1 / first_event_rate`` seconds an event
from ``base_time_ms``. As in nexmark-flink at parallelism 1, event ``n`` has the generator's
event number ``n + 1`` and the event id ``n + 2``; with ``out_of_order_group_size`` ``g > 1``
the events of each group of ``g`` numbers come in a scrambled order (ids and times alike).

>>> c = NexmarkConfig()
>>> [kind_of(c, n) for n in (0, 47, 48, 49, 50, 51, 52)]
[1, 2, 0, 1, 1, 1, 2]
>>> adjusted_number(c, 48), last_person_id(c, event_id(c, 48))
(49, 1)
>>> timestamp_ms(c, 9) - c.base_time_ms  # 10 events of 100 µs
1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "AUCTION",
    "BID",
    "DEFAULT_BASE_TIME_MS",
    "FIRST_AUCTION_ID",
    "FIRST_CATEGORY_ID",
    "FIRST_PERSON_ID",
    "PERSON",
    "NexmarkConfig",
    "adjusted_number",
    "auction_horizon_ms",
    "event_id",
    "kind_of",
    "last_auction_id",
    "last_person_id",
    "timestamp_ms",
]

#: ``event_type`` of the three kinds of event (nexmark-flink's ``Event.Type``).
PERSON, AUCTION, BID = 0, 1, 2

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10

#: 2024-01-01T00:00:00Z: a fixed first event time, so that a configuration names one stream
#: (nexmark-flink takes the wallclock time when the job is planned).
DEFAULT_BASE_TIME_MS = 1_704_067_200_000


@dataclass(frozen=True)
class NexmarkConfig:
    """What a Nexmark stream is: nexmark-flink's ``NexmarkConfiguration`` defaults.

    ``events_num`` ``None`` is an unbounded stream. ``max_emit_speed`` emits as fast as the
    job takes the events; otherwise at ``first_event_rate`` events per second, the event
    times' rate. ``seed`` picks the random draws (names, prices, hot or cold ids...): the
    same seed and configuration give the same events.
    """

    first_event_rate: int = 10_000
    events_num: int | None = None
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    avg_person_byte_size: int = 200
    avg_auction_byte_size: int = 500
    avg_bid_byte_size: int = 100
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    out_of_order_group_size: int = 1
    max_emit_speed: bool = True
    base_time_ms: int = DEFAULT_BASE_TIME_MS
    seed: int = 0

    def __post_init__(self) -> None:
        positive = {
            "first_event_rate": self.first_event_rate,
            "person_proportion": self.person_proportion,
            "auction_proportion": self.auction_proportion,
            "hot_auction_ratio": self.hot_auction_ratio,
            "hot_sellers_ratio": self.hot_sellers_ratio,
            "hot_bidders_ratio": self.hot_bidders_ratio,
            "num_in_flight_auctions": self.num_in_flight_auctions,
            "num_active_people": self.num_active_people,
            "out_of_order_group_size": self.out_of_order_group_size,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"Nexmark: {name} must be >= 1, got {value}")
        if self.bid_proportion < 0:
            raise ValueError(f"Nexmark: bid_proportion must be >= 0, got {self.bid_proportion}")
        if self.events_num is not None and self.events_num < 0:
            raise ValueError(f"Nexmark: events_num must be >= 0, got {self.events_num}")
        for name in ("avg_person_byte_size", "avg_auction_byte_size", "avg_bid_byte_size"):
            if not 0 <= getattr(self, name) <= 1 << 18:
                raise ValueError(f"Nexmark: {name} must be in [0, 256 KiB]")

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    @property
    def inter_event_delay_us(self) -> float:
        """Microseconds of event time between two events."""
        return 1_000_000.0 / self.first_event_rate


def adjusted_number(c: NexmarkConfig, n: Any) -> Any:
    """The generator's event number of event ``n``, scrambled within groups of
    ``out_of_order_group_size`` (953 is prime: a permutation of each group)."""
    number = n + 1
    g = c.out_of_order_group_size
    if g == 1:
        return number
    return (number // g) * g + (number * 953) % g


def event_id(c: NexmarkConfig, n: Any) -> Any:
    """The id that decides event ``n``'s kind and ids (nexmark-flink's ``newEventId``)."""
    return adjusted_number(c, n) + 1


def kind_of(c: NexmarkConfig, n: int) -> int:
    """``PERSON``, ``AUCTION`` or ``BID``: event ``n``'s ``event_type``."""
    rem = event_id(c, n) % c.total_proportion
    if rem < c.person_proportion:
        return PERSON
    return AUCTION if rem < c.person_proportion + c.auction_proportion else BID


def timestamp_ms(c: NexmarkConfig, n: Any) -> Any:
    """Event ``n``'s event time, epoch milliseconds."""
    return c.base_time_ms + _millis_after_base(c, adjusted_number(c, n))


def _millis_after_base(c: NexmarkConfig, number: Any) -> Any:
    scaled = number * c.inter_event_delay_us
    if hasattr(scaled, "astype"):
        return scaled.astype("int64") // 1000
    return int(scaled) // 1000


def auction_horizon_ms(c: NexmarkConfig, n: Any) -> Any:
    """Milliseconds from auction ``n``'s time to the time of the auction generated
    ``num_in_flight_auctions`` auctions later: an auction lasts ``1 + U[0, 2 * horizon)``."""
    number = adjusted_number(c, n)
    ahead = c.num_in_flight_auctions * c.total_proportion // c.auction_proportion
    return _millis_after_base(c, number + ahead) - _millis_after_base(c, number)


def last_person_id(c: NexmarkConfig, eid: Any) -> Any:
    """The base-0 id of the last person generated at event id ``eid`` (this one's, if a
    person)."""
    epoch, offset = eid // c.total_proportion, eid % c.total_proportion
    last = c.person_proportion - 1
    if hasattr(offset, "clip"):
        return epoch * c.person_proportion + offset.clip(max=last)
    return epoch * c.person_proportion + min(offset, last)


def last_auction_id(c: NexmarkConfig, eid: Any) -> Any:
    """The base-0 id of the last auction generated at event id ``eid`` (this one's, if an
    auction); the last one of the previous epoch before this epoch's first auction."""
    p, a = c.person_proportion, c.auction_proportion
    epoch, offset = eid // c.total_proportion, eid % c.total_proportion
    if hasattr(offset, "clip"):
        before = offset < p
        epoch = epoch - before
        base0 = (offset - p).clip(min=0, max=a - 1)
        base0[before] = a - 1
        return epoch * a + base0
    if offset < p:
        return (epoch - 1) * a + a - 1
    return epoch * a + min(offset - p, a - 1)
