"""The Nexmark benchmark's event generator and source (nexmark-flink's ``nexmark`` source).

Invariant: event ``n`` is a pure function of ``n``, the configuration and its seed: its kind,
ids and time follow ``nexmark_model``, and every random draw of event ``n`` hashes
``(seed, event id, draw)`` (SplitMix64), never a generator's running state. So a batch of any
event numbers, in any order and split, holds the same events as one generator emitting
``0, 1, 2, ...``; the source's parallel splits (``DataGeneratorSource``'s strided splits) and
a restored job emit the same multiset. Generation is vectorized over a batch (numpy), with
the strings picked from per-seed pools built once per worker.

An event is the row of nexmark-flink's table, ``(event_type, person, auction, bid)``, the
one matching ``event_type`` set (a tuple of its fields, as the ``ROW`` types of
``NEXMARK_ROW_FIELDS`` order them), the other two ``None``:

>>> g = NexmarkGenerator(NexmarkConfig(seed=7))
>>> person = g.generate_batch(range(48, 49))[0]
>>> person[0], person[1][0], person[2], person[3]
(0, 1001, None, None)
>>> bid = g.generate_batch(range(2, 3))[0][3]
>>> bid[0] >= 1000, bid[5]
(True, datetime.datetime(2024, 1, 1, 0, 0))
>>> g.generate_batch(range(0, 100, 7)) == [g.generate_batch(range(i, i + 1))[0]
...                                         for i in range(0, 100, 7)]
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.nexmark_model import (
    AUCTION,
    BID,
    FIRST_AUCTION_ID,
    FIRST_CATEGORY_ID,
    FIRST_PERSON_ID,
    PERSON,
    NexmarkConfig,
    auction_horizon_ms,
    event_id,
    last_auction_id,
    last_person_id,
    timestamp_ms,
)

__all__ = ["NEXMARK_ROW_FIELDS", "NexmarkConfig", "NexmarkGenerator", "nexmark_source"]

#: The fields of the ``person``, ``auction`` and ``bid`` rows, in order (their SQL types:
#: ``id``/``initialBid``/... BIGINT, ``dateTime``/``expires`` TIMESTAMP(3), others STRING).
NEXMARK_ROW_FIELDS = {
    "person": (
        ["id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"],
        ["BIGINT", "STRING", "STRING", "STRING", "STRING", "STRING", "TIMESTAMP(3)", "STRING"],
    ),
    "auction": (
        [
            "id",
            "itemName",
            "description",
            "initialBid",
            "reserve",
            "dateTime",
            "expires",
            "seller",
            "category",
            "extra",
        ],
        [
            "BIGINT",
            "STRING",
            "STRING",
            "BIGINT",
            "BIGINT",
            "TIMESTAMP(3)",
            "TIMESTAMP(3)",
            "BIGINT",
            "BIGINT",
            "STRING",
        ],
    ),
    "bid": (
        ["auction", "bidder", "price", "channel", "url", "dateTime", "extra"],
        ["BIGINT", "BIGINT", "BIGINT", "STRING", "STRING", "TIMESTAMP(3)", "STRING"],
    ),
}

_US_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
_US_CITIES = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
]
_FIRST_NAMES = [
    "Peter",
    "Paul",
    "Luke",
    "John",
    "Saul",
    "Vicky",
    "Kate",
    "Julie",
    "Sarah",
    "Deiter",
    "Walter",
]
_LAST_NAMES = [
    "Shultz",
    "Abrams",
    "Spencer",
    "White",
    "Bartels",
    "Walton",
    "Smith",
    "Jones",
    "Noris",
]
_HOT_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]
_CHANNELS_NUMBER = 10_000
_NUM_CATEGORIES = 5
_HOT_RATIO = 100  # hot ids: the first of each 100 auctions or persons (bidders: the second)
_ID_LEAD = 10  # cold ids may run this far ahead of the last generated one
_POOL = 1 << 14  # strings of each kind drawn per seed
_EXTRA_LENGTH = 1 << 20  # the text extras are cut from

_GOLDEN = 0x9E3779B97F4A7C15
_DRAW = 0xD1B54A32D192ED03


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy comes with pandas (pip install cairn[nexmark])
        raise ImportError(
            "The Nexmark generator needs numpy: pip install 'cairn[nexmark]'"
        ) from None
    return numpy


class _Draws:
    """The random draws of a batch of events, one uint64 per (event id, draw number)."""

    def __init__(self, np: Any, seed: int, ids: Any) -> None:
        self.np = np
        u64 = np.uint64
        self._base = ids.astype(u64) * u64(_GOLDEN) ^ u64(_splitmix(seed))

    def __len__(self) -> int:
        return len(self._base)

    def bits(self, k: int) -> Any:
        np = self.np
        x = self._base + np.uint64((k + 1) * _DRAW & (2**64 - 1))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))

    def uniform(self, k: int) -> Any:
        """U[0, 1) doubles (53 bits)."""
        return (self.bits(k) >> self.np.uint64(11)).astype("float64") * (2.0**-53)

    def below(self, k: int, n: Any) -> Any:
        """Integers in ``[0, n)`` (``n`` a scalar or an array of the batch's length)."""
        return (self.uniform(k) * n).astype("int64")


def _splitmix(x: int) -> int:
    m = 2**64 - 1
    x = (x + _GOLDEN) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


class _Pools:
    """Per-seed strings: names, e-mails, descriptions, channels' URLs and the text extras are
    cut from (nexmark-flink's ``StringsGenerator`` shapes: 3 to ``max - 1`` letters, one in
    13 a space (trimmed) or a ``_``)."""

    def __init__(self, np: Any, seed: int) -> None:
        rng = np.random.Generator(np.random.PCG64(seed))
        self.extra_text = rng.integers(97, 123, _EXTRA_LENGTH, dtype="uint8").tobytes().decode()
        emails = [
            f"{a}@{b}.com"
            for a, b in zip(_strings(np, rng, _POOL, 7), _strings(np, rng, _POOL, 5), strict=True)
        ]
        self.emails, self.email_lengths = _with_lengths(np, emails)
        self.names, self.name_lengths = _with_lengths(
            np, [f"{f} {last}" for f in _FIRST_NAMES for last in _LAST_NAMES]
        )
        self.items, self.item_lengths = _with_lengths(np, _strings(np, rng, _POOL, 20))
        self.descriptions, self.description_lengths = _with_lengths(
            np, _strings(np, rng, _POOL, 100)
        )
        parts = _strings(np, rng, 3 * (_CHANNELS_NUMBER + len(_HOT_CHANNELS)), 5, "_")
        urls = [
            f"https://www.nexmark.com/{a}/{b}/{c}/item.htm?query=1"
            for a, b, c in zip(parts[0::3], parts[1::3], parts[2::3], strict=True)
        ]
        with_id = rng.integers(0, 10, _CHANNELS_NUMBER) > 0
        for i in range(_CHANNELS_NUMBER):
            if with_id[i]:
                urls[i] += f"&channel_id={_java_abs_reverse(i)}"
        channels = [f"channel-{i}" for i in range(_CHANNELS_NUMBER)] + _HOT_CHANNELS
        self.channels = np.array(channels, dtype=object)
        self.urls = np.array(urls, dtype=object)
        self.cities = np.array(_US_CITIES, dtype=object)
        self.city_lengths = np.array([len(c) for c in _US_CITIES])
        self.states = np.array(_US_STATES, dtype=object)
        self.four_digits = [f"{i:04d}" for i in range(10_000)]


def _with_lengths(np: Any, strings: list[str]) -> tuple[Any, Any]:
    return np.array(strings, dtype=object), np.array([len(s) for s in strings], dtype="int64")


def _strings(np: Any, rng: Any, count: int, max_length: int, special: str = " ") -> list[str]:
    lengths = 3 + rng.integers(0, max_length - 3, count)
    letters = rng.integers(97, 123, (count, max_length), dtype="uint8")
    letters[rng.integers(0, 13, (count, max_length)) == 0] = ord(special)
    return [
        row[:n].tobytes().decode().strip() for row, n in zip(letters, lengths.tolist(), strict=True)
    ]


def _java_abs_reverse(i: int) -> int:
    """Java's ``Math.abs(Integer.reverse(i))`` (``Integer.MIN_VALUE`` stays negative)."""
    r = int(f"{i & 0xFFFFFFFF:032b}"[::-1], 2)
    signed = r - (1 << 32) if r >= 1 << 31 else r
    return signed if signed == -(1 << 31) else abs(signed)


class NexmarkGenerator:
    """Events ``n`` of a Nexmark stream, a batch at a time: ``generate_batch(range)``.

    ``record_kind`` (e.g. ``0``, an INSERT) wraps each row as a table record ``(kind, row)``.
    Picklable: the pools are built on first use where the generator runs.
    """

    def __init__(self, config: NexmarkConfig, record_kind: int | None = None) -> None:
        self.config = config
        self.record_kind = record_kind
        self._pools: _Pools | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_pools": None}

    def __call__(self, n: int) -> Any:
        return self.generate_batch(range(n, n + 1))[0]

    def generate_batch(self, numbers: Sequence[int]) -> list[Any]:
        """The events of ``numbers`` (a ``range`` or any sequence of event numbers), in order."""
        np = _numpy()
        if self._pools is None:
            self._pools = _Pools(np, self.config.seed)
        c = self.config
        n = np.asarray(numbers, dtype="int64")
        ids = event_id(c, n)
        rem = ids % c.total_proportion
        kinds = np.where(
            rem < c.person_proportion,
            PERSON,
            np.where(rem < c.person_proportion + c.auction_proportion, AUCTION, BID),
        )
        rows: list[list[Any]] = [[], [], []]
        for kind, make in ((PERSON, self._persons), (AUCTION, self._auctions), (BID, self._bids)):
            chosen = n[kinds == kind]
            if len(chosen):
                rows[kind] = make(np, chosen, event_id(c, chosen))
        iterators = [iter(r) for r in rows]
        taken = [it.__next__ for it in iterators]
        events = [taken[k]() for k in kinds.tolist()]
        if self.record_kind is not None:
            kind_of_record = self.record_kind
            return [(kind_of_record, e) for e in events]
        return events

    # -- the three kinds -------------------------------------------------------------------

    def _persons(self, np: Any, n: Any, ids: Any) -> list[Any]:
        c, pools, d = self.config, self._pools, _Draws(np, self.config.seed, ids)
        assert pools is not None
        person = last_person_id(c, ids) + FIRST_PERSON_ID
        name = d.below(0, len(pools.names))
        email = d.below(1, len(pools.emails))
        cards = [d.below(2 + i, 10_000).tolist() for i in range(4)]
        city = d.below(6, len(_US_CITIES))
        state = d.below(7, len(_US_STATES))
        size = (
            8
            + pools.name_lengths[name]
            + pools.email_lengths[email]
            + 19
            + pools.city_lengths[city]
            + np.array([len(s) for s in _US_STATES])[state]
        )
        four = pools.four_digits
        card_text = [
            f"{four[a]} {four[b]} {four[e]} {four[f]}" for a, b, e, f in zip(*cards, strict=True)
        ]
        columns = [
            person.tolist(),
            pools.names[name].tolist(),
            pools.emails[email].tolist(),
            card_text,
            pools.cities[city].tolist(),
            pools.states[state].tolist(),
            _datetimes(np, timestamp_ms(c, n)),
            self._extras(np, d, 8, size, c.avg_person_byte_size),
        ]
        return [(PERSON, tuple(row), None, None) for row in zip(*columns, strict=True)]

    def _auctions(self, np: Any, n: Any, ids: Any) -> list[Any]:
        c, pools, d = self.config, self._pools, _Draws(np, self.config.seed, ids)
        assert pools is not None
        auction = last_auction_id(c, ids) + FIRST_AUCTION_ID
        hot = d.below(0, c.hot_sellers_ratio) > 0
        hot_seller = (last_person_id(c, ids) // _HOT_RATIO) * _HOT_RATIO
        seller = np.where(hot, hot_seller, self._cold_person(np, d, 1, ids)) + FIRST_PERSON_ID
        category = FIRST_CATEGORY_ID + d.below(2, _NUM_CATEGORIES)
        initial_bid = _price(np, d, 3)
        millis = timestamp_ms(c, n)
        horizon = np.maximum(auction_horizon_ms(c, n) * 2, 1)
        expires = millis + 1 + d.below(4, horizon)
        item = d.below(5, len(pools.items))
        description = d.below(6, len(pools.descriptions))
        reserve = initial_bid + _price(np, d, 7)
        size = 8 + pools.item_lengths[item] + pools.description_lengths[description] + 40
        columns = [
            auction.tolist(),
            pools.items[item].tolist(),
            pools.descriptions[description].tolist(),
            initial_bid.tolist(),
            reserve.tolist(),
            _datetimes(np, millis),
            _datetimes(np, expires),
            seller.tolist(),
            category.tolist(),
            self._extras(np, d, 8, size, c.avg_auction_byte_size),
        ]
        return [(AUCTION, None, tuple(row), None) for row in zip(*columns, strict=True)]

    def _bids(self, np: Any, n: Any, ids: Any) -> list[Any]:
        c, pools, d = self.config, self._pools, _Draws(np, self.config.seed, ids)
        assert pools is not None
        hot_auction = d.below(0, c.hot_auction_ratio) > 0
        last = last_auction_id(c, ids)
        first_in_flight = np.maximum(last - c.num_in_flight_auctions, 0)
        cold_auction = first_in_flight + d.below(1, last - first_in_flight + 1 + _ID_LEAD)
        auction = np.where(hot_auction, (last // _HOT_RATIO) * _HOT_RATIO, cold_auction)
        hot_bidder = d.below(2, c.hot_bidders_ratio) > 0
        hot_bidder_id = (last_person_id(c, ids) // _HOT_RATIO) * _HOT_RATIO + 1
        bidder = np.where(hot_bidder, hot_bidder_id, self._cold_person(np, d, 3, ids))
        price = _price(np, d, 4)
        hot_channel = d.below(5, 2) > 0
        channel = np.where(
            hot_channel,
            _CHANNELS_NUMBER + d.below(6, len(_HOT_CHANNELS)),
            d.below(7, _CHANNELS_NUMBER),
        )
        columns = [
            (auction + FIRST_AUCTION_ID).tolist(),
            (bidder + FIRST_PERSON_ID).tolist(),
            price.tolist(),
            pools.channels[channel].tolist(),
            pools.urls[channel].tolist(),
            _datetimes(np, timestamp_ms(c, n)),
            self._extras(np, d, 8, 32, c.avg_bid_byte_size),
        ]
        return [(BID, None, None, tuple(row)) for row in zip(*columns, strict=True)]

    # -- shared draws ----------------------------------------------------------------------

    def _cold_person(self, np: Any, d: _Draws, k: int, ids: Any) -> Any:
        """A person among the ``num_active_people`` last ones, or up to 10 ahead."""
        people = last_person_id(self.config, ids) + 1
        active = np.minimum(people, self.config.num_active_people)
        return people - active + d.below(k, active + _ID_LEAD)

    def _extras(self, np: Any, d: _Draws, k: int, size: Any, average: int) -> list[str]:
        """Text making a row ``average`` bytes long on average: ±20 %, empty when the row's
        fields alone are larger."""
        wanted = np.broadcast_to(np.asarray(average - size), (len(d),))
        delta = np.floor(wanted * 0.2 + 0.5).astype("int64")
        length = np.where(wanted > 0, wanted - delta + d.below(k, 2 * delta), 0)
        assert self._pools is not None
        text = self._pools.extra_text
        offset = d.below(k + 1, len(text) - length)
        return [text[o : o + m] for o, m in zip(offset.tolist(), length.tolist(), strict=True)]


def _price(np: Any, d: _Draws, k: int) -> Any:
    """A price in cents, log-uniform over [1, 10**8] (nexmark-flink's ``PriceGenerator``)."""
    return np.round(10.0 ** (d.uniform(k) * 6.0) * 100.0).astype("int64")


def _datetimes(np: Any, millis: Any) -> list[Any]:
    return millis.astype("datetime64[ms]").astype(object).tolist()  # type: ignore[no-any-return]


def nexmark_source(config: NexmarkConfig, record_kind: int | None = None) -> DataGeneratorSource:
    """The source of ``config``'s events: ``events_num`` of them (or forever), as fast as
    the job takes them or, without ``max_emit_speed``, ``first_event_rate`` a second.

    >>> source = nexmark_source(NexmarkConfig(events_num=10))
    >>> source.is_bounded(), [s.stride for s in source.create_splits(2)]
    (True, [2, 2])
    """
    limit = (
        RateLimiterStrategy.no_limit()
        if config.max_emit_speed
        else RateLimiterStrategy.per_second(config.first_event_rate)
    )
    return DataGeneratorSource(NexmarkGenerator(config, record_kind), config.events_num, limit)
