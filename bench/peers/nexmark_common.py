"""What every system of the Nexmark benchmark shares (stdlib only: the peer venvs import it).

Invariant: the events are one set of CSV files (:data:`COLUMNS`, one line per event, written
by ``bench/nexmark_data.py`` from Cairn's generator) that every system reads as the table
``events`` with the computed column ``dateTime`` (the event's time, nexmark-flink's ``CASE``)
and ``WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND``; the views ``person``,
``auction`` and ``bid`` select their kind's ``p_``/``a_``/``b_`` columns under nexmark-flink's
names, so a query file's text runs unchanged over them. A result is judged by
:func:`figures` of its final rows (the changelog folded: ``+I``/``+U`` add a row, ``-U``/``-D``
take one away): their count and an order-free checksum of the rows in :func:`canonical` form.

    >>> figures([("+I", (1, "a")), ("+I", (2, "b")), ("-D", (1, "a"))])
    {'rows': 1, 'checksum': 683080387956424855}
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "COLUMNS",
    "FLINK_TIMESTAMP_FORMAT",
    "QUERIES",
    "SPARK_SQL",
    "canonical",
    "figures",
    "flink_ddl",
    "query_statements",
    "select_of",
    "split_statements",
    "view_selects",
]

#: The benchmark's queries (the issue's list).
QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q11")
#: The table configuration nexmark-flink runs every query with (its conf/config.yaml):
#: Flink SQL and Cairn get the same (Spark has no counterpart).
TABLE_CONFIG = {
    "table.exec.mini-batch.enabled": "true",
    "table.exec.mini-batch.allow-latency": "2s",
    "table.exec.mini-batch.size": "50000",
}
QUERY_DIR = Path(__file__).resolve().parent.parent / "nexmark" / "queries"

_PERSON = [
    ("id", "BIGINT"), ("name", "STRING"), ("emailAddress", "STRING"),
    ("creditCard", "STRING"), ("city", "STRING"), ("state", "STRING"),
    ("dateTime", "TIMESTAMP(3)"), ("extra", "STRING"),
]  # fmt: skip
_AUCTION = [
    ("id", "BIGINT"), ("itemName", "STRING"), ("description", "STRING"),
    ("initialBid", "BIGINT"), ("reserve", "BIGINT"), ("dateTime", "TIMESTAMP(3)"),
    ("expires", "TIMESTAMP(3)"), ("seller", "BIGINT"), ("category", "BIGINT"),
    ("extra", "STRING"),
]  # fmt: skip
_BID = [
    ("auction", "BIGINT"), ("bidder", "BIGINT"), ("price", "BIGINT"), ("channel", "STRING"),
    ("url", "STRING"), ("dateTime", "TIMESTAMP(3)"), ("extra", "STRING"),
]  # fmt: skip
#: ``(view, prefix, fields)`` of the three kinds, in ``event_type`` order.
KINDS = (("person", "p_", _PERSON), ("auction", "a_", _AUCTION), ("bid", "b_", _BID))
#: The CSV files' columns in order, with their SQL types.
COLUMNS: list[tuple[str, str]] = [("event_type", "INT")] + [
    (prefix + name, sql_type) for _, prefix, fields in KINDS for name, sql_type in fields
]
#: The timestamps' text in the files (Flink's ``TIMESTAMP(3)`` CSV form; Spark's pattern).
FLINK_TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"
SPARK_TIMESTAMP_PATTERN = "yyyy-MM-dd HH:mm:ss.SSS"
#: The event time: nexmark-flink's computed ``dateTime`` over the flat columns.
DATETIME_SQL = (
    "CASE WHEN event_type = 0 THEN p_dateTime WHEN event_type = 1 THEN a_dateTime "
    "ELSE b_dateTime END"
)


def _q(name: str) -> str:
    return f"`{name}`"


def flink_ddl(path: str, connector_options: str = "") -> list[str]:
    """The ``events`` table over the CSV files under ``path`` and the three views, as Flink
    SQL statements (Cairn's SQL runs the same text)."""
    columns = ",\n    ".join(f"{_q(n)} {t}" for n, t in COLUMNS)
    table = f"""CREATE TABLE events (
    {columns},
    `dateTime` AS {DATETIME_SQL},
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = '{path}',
    'format' = 'csv',
    'csv.null-literal' = ''{connector_options}
)"""
    return [table, *view_ddl()]


def view_selects() -> list[tuple[str, str]]:
    """``(view, its query)`` of ``person``, ``auction`` and ``bid`` over ``events``
    (nexmark-flink's views, over the flat columns)."""
    out = []
    for kind, (view, prefix, fields) in enumerate(KINDS):
        items = [
            "`dateTime`" if name == "dateTime" else f"{_q(prefix + name)} AS {_q(name)}"
            for name, _ in fields
        ]
        out.append((view, f"SELECT {', '.join(items)} FROM events WHERE event_type = {kind}"))
    return out


def view_ddl() -> list[str]:
    """``CREATE VIEW person/auction/bid`` over ``events``."""
    return [f"CREATE VIEW {view} AS {query}" for view, query in view_selects()]


def split_statements(text: str) -> list[str]:
    """The ``;``-separated statements of ``text`` without ``--`` comments.

    >>> split_statements("-- x\\nSELECT 'a;b'; SELECT 2 -- c\\n;")
    ["SELECT 'a;b'", 'SELECT 2']
    """
    lines = []
    for line in text.splitlines():
        quoted = False
        for i, ch in enumerate(line):
            if ch == "'":
                quoted = not quoted
            elif not quoted and line.startswith("--", i):
                line = line[:i]
                break
        lines.append(line)
    out, current, quoted = [], [], False
    for ch in "\n".join(lines):
        if ch == "'":
            quoted = not quoted
        if ch == ";" and not quoted:
            out.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    out.append("".join(current).strip())
    return [s for s in out if s]


def query_statements(query: str) -> tuple[str, str]:
    """``(CREATE TABLE of the blackhole sink, INSERT INTO it)`` of ``queries/<query>.sql``."""
    statements = split_statements((QUERY_DIR / f"{query}.sql").read_text())
    create = next(s for s in statements if s.upper().startswith("CREATE TABLE"))
    insert = next(s for s in statements if s.upper().startswith("INSERT INTO"))
    return create, insert


def select_of(insert: str) -> str:
    """The query of an ``INSERT INTO t <query>`` statement.

    >>> select_of("INSERT INTO nexmark_q2\\nSELECT auction FROM bid")
    'SELECT auction FROM bid'
    """
    match = re.match(r"INSERT\s+INTO\s+[`\w.]+\s+", insert, re.IGNORECASE)
    if match is None:
        raise ValueError(f"not an INSERT INTO: {insert[:60]!r}")
    return insert[match.end() :]


#: Spark SQL stating each query (over the same views; windows as ``window``/
#: ``session_window``, aligned to the epoch as Flink's). Spark Structured Streaming refuses
#: some (append mode): the Spark peer then reports Spark's reason as ``unsupported``.
SPARK_SQL = {
    "q0": "SELECT auction, bidder, price, dateTime, extra FROM bid",
    "q1": "SELECT auction, bidder, 0.908 * price AS price, dateTime, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": """SELECT P.name, P.city, P.state, A.id
             FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
             WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')""",
    "q4": """SELECT category, CAST(AVG(final) AS BIGINT) AS final FROM (
               SELECT MAX(B.price) AS final, A.category FROM auction A JOIN bid B
               ON A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
               GROUP BY A.id, A.category) Q
             GROUP BY category""",
    "q5": """WITH ab AS (
               SELECT auction, count(*) AS num, window.start AS s, window.end AS e FROM bid
               GROUP BY auction, window(dateTime, '10 seconds', '2 seconds')),
             mb AS (SELECT max(num) AS maxn, s, e FROM ab GROUP BY s, e)
             SELECT ab.auction, ab.num FROM ab JOIN mb
             ON ab.s = mb.s AND ab.e = mb.e AND ab.num >= mb.maxn""",
    "q7": """SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra FROM bid B
             JOIN (SELECT max(price) AS maxprice, window.end AS dateTime FROM bid
                   GROUP BY window(dateTime, '10 seconds')) B1
             ON B.price = B1.maxprice
             WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL 10 SECONDS AND B1.dateTime""",
    "q8": """SELECT P.id, P.name, P.s FROM
               (SELECT id, name, window.start AS s, window.end AS e FROM person
                GROUP BY id, name, window(dateTime, '10 seconds')) P
             JOIN (SELECT seller, window.start AS s, window.end AS e FROM auction
                   GROUP BY seller, window(dateTime, '10 seconds')) A
             ON P.id = A.seller AND P.s = A.s AND P.e = A.e""",
    "q11": """SELECT bidder, count(*) AS bid_count, session_window.start AS starttime,
                     session_window.end AS endtime
              FROM bid GROUP BY bidder, session_window(dateTime, '10 seconds')""",
}


def canonical(value: Any) -> Any:
    """A result value in one form for every system: timestamps as ``yyyy-MM-dd
    HH:mm:ss.SSS`` text, decimals as plain text without trailing zeros, floats rounded.

    >>> canonical(datetime.datetime(2024, 1, 1, 0, 0, 1, 250000))
    '2024-01-01 00:00:01.250'
    >>> canonical(decimal.Decimal("908.000")), canonical(decimal.Decimal("0.9080"))
    ('908', '0.908')
    """
    if isinstance(value, datetime.datetime):
        return value.strftime(FLINK_TIMESTAMP_FORMAT)[:23]
    if isinstance(value, decimal.Decimal):
        text = format(value.normalize(), "f")
        return "0" if text in ("-0", "") else text
    if isinstance(value, float):
        return repr(round(value, 6))
    return value


def _row_hash(row: tuple[Any, ...]) -> int:
    text = repr(tuple(canonical(v) for v in row)).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def figures(changes: Iterable[tuple[str, tuple[Any, ...]]]) -> dict[str, int]:
    """The final rows of a changelog (``(kind, row)``, kind ``+I``/``+U``/``-U``/``-D``) as
    ``rows`` (their count) and ``checksum`` (the sum of their hashes mod 2**64)."""
    final: Counter[tuple[Any, ...]] = Counter()
    for kind, row in changes:
        key = tuple(canonical(v) for v in row)
        final[key] += 1 if kind in ("+I", "+U") else -1
    rows = +final
    checksum = 0
    for row, count in rows.items():
        checksum = (checksum + count * _row_hash(row)) % (1 << 64)
    return {"rows": sum(rows.values()), "checksum": checksum}
