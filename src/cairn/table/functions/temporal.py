"""Flink's built-in temporal functions (``EXTRACT``, ``DATE_FORMAT``, ``TIMESTAMPADD``...).

Invariant: a ``TIMESTAMP`` is a naive ``datetime``, a ``DATE`` a ``date``, a ``TIME`` a
``time``; a ``TIMESTAMP_LTZ`` is a naive ``datetime`` in UTC, and Cairn's session time zone
(``table.local-time-zone``) is UTC, so the ``CURRENT_*`` functions, ``FROM_UNIXTIME`` and
``UNIX_TIMESTAMP`` read and write UTC. Units are upper-case names (``'HOUR'``) passed as
string literals; date patterns are Java's (``datetime_format``). A string that does not
parse gives NULL (``TO_TIMESTAMP``, ``TO_DATE``) or ``Long.MIN_VALUE`` (``UNIX_TIMESTAMP``),
as Flink's.

>>> t = datetime.datetime(1994, 9, 27, 13, 14, 15)
>>> extract("DOW", t), extract("WEEK", t), floor_to(t, "HOUR"), timestampdiff("MONTH", t, t)
(3, 39, datetime.datetime(1994, 9, 27, 13, 0), 0)
"""

from __future__ import annotations

import calendar
import datetime
import time
import zoneinfo
from typing import Any

from cairn.table.functions.datetime_format import format_datetime, parse_datetime
from cairn.table.functions.definition import BuiltinFunction, always_nullable, returns, same_as
from cairn.table.time_attributes import PROCTIME_TYPE
from cairn.table.types import DataType, DataTypes

__all__ = ["FUNCTIONS", "extract", "floor_to", "timestampadd", "timestampdiff"]

_EPOCH = datetime.datetime(1970, 1, 1)
_DEFAULT = "yyyy-MM-dd HH:mm:ss"
LONG_MIN = -9223372036854775808


def _as_datetime(v: Any) -> datetime.datetime:
    if isinstance(v, datetime.datetime):
        return v
    if isinstance(v, datetime.date):
        return datetime.datetime(v.year, v.month, v.day)
    if isinstance(v, datetime.time):
        return datetime.datetime.combine(_EPOCH.date(), v)
    raise ValueError(f"Not a time value: {v!r}")


def _like(original: Any, value: datetime.datetime) -> Any:
    """``value`` as the kind of ``original`` (a date stays a date, a time a time)."""
    if isinstance(original, datetime.datetime):
        return value
    if isinstance(original, datetime.date):
        return value.date() if value.time() == datetime.time() else value
    if isinstance(original, datetime.time):
        return value.time()
    return value


def extract(unit: str, value: Any) -> int:
    t = _as_datetime(value)
    u = unit.upper()
    if u == "YEAR":
        return t.year
    if u == "QUARTER":
        return (t.month - 1) // 3 + 1
    if u == "MONTH":
        return t.month
    if u == "WEEK":
        return t.isocalendar()[1]
    if u == "DAY":
        return t.day
    if u == "DOY":
        return t.timetuple().tm_yday
    if u == "DOW":
        return t.isoweekday() % 7 + 1
    if u == "ISODOW":
        return t.isoweekday()
    if u == "ISOYEAR":
        return t.isocalendar()[0]
    if u == "HOUR":
        return t.hour
    if u == "MINUTE":
        return t.minute
    if u == "SECOND":
        return t.second
    if u == "MILLISECOND":
        return t.second * 1000 + t.microsecond // 1000
    if u == "MICROSECOND":
        return t.second * 1_000_000 + t.microsecond
    if u == "NANOSECOND":
        return (t.second * 1_000_000 + t.microsecond) * 1000
    if u == "EPOCH":
        return calendar.timegm(t.timetuple())
    if u == "DECADE":
        return t.year // 10
    if u == "CENTURY":
        return (t.year + 99) // 100
    if u == "MILLENNIUM":
        return (t.year + 999) // 1000
    raise ValueError(f"Unsupported time unit {unit!r} in EXTRACT")


def floor_to(value: Any, unit: str) -> Any:
    t = _as_datetime(value)
    u = unit.upper()
    if u == "YEAR":
        out = datetime.datetime(t.year, 1, 1)
    elif u == "QUARTER":
        out = datetime.datetime(t.year, (t.month - 1) // 3 * 3 + 1, 1)
    elif u == "MONTH":
        out = datetime.datetime(t.year, t.month, 1)
    elif u == "WEEK":  # weeks start on Sunday, as Calcite's
        day = datetime.datetime(t.year, t.month, t.day)
        out = day - datetime.timedelta(days=t.isoweekday() % 7)
    elif u == "DAY":
        out = datetime.datetime(t.year, t.month, t.day)
    elif u == "HOUR":
        out = t.replace(minute=0, second=0, microsecond=0)
    elif u == "MINUTE":
        out = t.replace(second=0, microsecond=0)
    elif u == "SECOND":
        out = t.replace(microsecond=0)
    elif u == "MILLISECOND":
        out = t.replace(microsecond=t.microsecond // 1000 * 1000)
    else:
        raise ValueError(f"Unsupported time unit {unit!r} in FLOOR/CEIL")
    return _like(value, out)


def ceil_to(value: Any, unit: str) -> Any:
    t = _as_datetime(value)
    low = _as_datetime(floor_to(t, unit))
    if low == t:
        return value
    return _like(value, _as_datetime(timestampadd(unit, 1, low)))


def _add_months(t: datetime.datetime, months: int) -> datetime.datetime:
    total = t.year * 12 + t.month - 1 + months
    year, month = divmod(total, 12)
    day = min(t.day, calendar.monthrange(year, month + 1)[1])
    return t.replace(year=year, month=month + 1, day=day)


_FIXED = {
    "MICROSECOND": datetime.timedelta(microseconds=1),
    "MILLISECOND": datetime.timedelta(milliseconds=1),
    "SECOND": datetime.timedelta(seconds=1),
    "MINUTE": datetime.timedelta(minutes=1),
    "HOUR": datetime.timedelta(hours=1),
    "DAY": datetime.timedelta(days=1),
    "WEEK": datetime.timedelta(weeks=1),
}
_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}


def timestampadd(unit: str, amount: int, value: Any) -> Any:
    t = _as_datetime(value)
    u = unit.upper().removeprefix("SQL_TSI_")
    if u in _MONTHS:
        return _like(value, _add_months(t, amount * _MONTHS[u]))
    if u in _FIXED:
        return _like(value, t + amount * _FIXED[u])
    raise ValueError(f"Unsupported time unit {unit!r} in TIMESTAMPADD")


def timestampdiff(unit: str, start: Any, end: Any) -> int:
    a, b = _as_datetime(start), _as_datetime(end)
    u = unit.upper().removeprefix("SQL_TSI_")
    if u in _MONTHS:
        months = (b.year - a.year) * 12 + (b.month - a.month)
        rest_a, rest_b = (a.day, a.time()), (b.day, b.time())
        if months > 0 and rest_b < rest_a:
            months -= 1
        elif months < 0 and rest_b > rest_a:
            months += 1
        return int(months / _MONTHS[u])
    if u in _FIXED:
        delta = b - a
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        step = _FIXED[u] // datetime.timedelta(microseconds=1)
        return int(micros / step) if abs(micros) < 2**52 else micros // step
    raise ValueError(f"Unsupported time unit {unit!r} in TIMESTAMPDIFF")


def date_format(value: Any, pattern: str) -> str | None:
    if isinstance(value, str):
        try:
            value = _parse_any(value)
        except ValueError:
            return None
    return format_datetime(value, pattern)


def _parse_any(text: str) -> datetime.datetime:
    try:
        return datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        return parse_datetime(text, _DEFAULT)


_SHORT_ZONES = {
    "PST": "America/Los_Angeles",
    "EST": "America/New_York",
    "CST": "America/Chicago",
    "MST": "America/Denver",
    "JST": "Asia/Tokyo",
    "CTT": "Asia/Shanghai",
}


def _zone(name: str) -> datetime.tzinfo:
    upper = name.upper()
    if upper in ("UTC", "GMT", "Z"):
        return datetime.timezone.utc
    for prefix in ("GMT", "UTC"):
        if upper.startswith(prefix) and upper[len(prefix) : len(prefix) + 1] in ("+", "-"):
            offset = upper[len(prefix) :]
            hours, _, minutes = offset[1:].partition(":")
            delta = datetime.timedelta(hours=int(hours), minutes=int(minutes or 0))
            return datetime.timezone(delta if offset[0] == "+" else -delta)
    return zoneinfo.ZoneInfo(_SHORT_ZONES.get(upper, name))


def convert_tz(text: str, source: str, target: str) -> str | None:
    try:
        t = _parse_any(text)
    except ValueError:
        return None
    moved = t.replace(tzinfo=_zone(source)).astimezone(_zone(target))
    return format_datetime(moved.replace(tzinfo=None), _DEFAULT)


def from_unixtime(seconds: Any, pattern: str = _DEFAULT) -> str:
    return format_datetime(_EPOCH + datetime.timedelta(seconds=int(seconds)), pattern)


def unix_timestamp(text: str | None = None, pattern: str = _DEFAULT) -> int | None:
    if text is None:
        return int(time.time())
    try:
        t = parse_datetime(text, pattern)
    except ValueError:
        return LONG_MIN
    return calendar.timegm(t.timetuple())


def to_date(text: str, pattern: str = "yyyy-MM-dd") -> datetime.date | None:
    try:
        return parse_datetime(text, pattern).date()
    except ValueError:
        return None


def to_timestamp(text: str, pattern: str = _DEFAULT) -> datetime.datetime | None:
    try:
        return parse_datetime(text, pattern)
    except ValueError:
        return None


def to_timestamp_ltz(value: Any, precision: int = 3) -> datetime.datetime:
    millis = value * 1000 if precision == 0 else value
    return _EPOCH + datetime.timedelta(milliseconds=float(millis))


def _now() -> datetime.datetime:
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _fn(name: str, signature: str, description: str, **kwargs: Any) -> BuiltinFunction:
    sql = kwargs.pop("sql", (name.upper(),))
    result = kwargs.pop("result", returns(DataTypes.BIGINT))
    return BuiltinFunction(name, sql, signature, description, "temporal", result, **kwargs)


def _part(name: str, unit: str, example: str, value: int) -> BuiltinFunction:
    return _fn(
        name,
        f"{name.upper()}(date | timestamp)",
        f"EXTRACT({unit} FROM value).",
        implementation=lambda v: extract(unit, v),
        inputs="t",
        examples=((example, value),),
    )


def _now_function(name: str, sql: str, what: str, make: Any, kind: DataType) -> BuiltinFunction:
    return _fn(
        name,
        sql,
        what,
        sql=(),
        implementation=make,
        inputs="",
        deterministic=False,
        result=lambda _: kind,
        examples=((f"{sql} IS NOT NULL", True),),
    )


FUNCTIONS = [
    _fn(
        "extract",
        "EXTRACT(unit FROM temporal)",
        "A part of a date, time or timestamp (YEAR, QUARTER, MONTH, WEEK, DAY, DOY, DOW,"
        " HOUR, MINUTE, SECOND, MILLISECOND...), a BIGINT.",
        sql=(),
        implementation=extract,
        inputs="st",
        literal_arguments=(0,),
        examples=(
            ("EXTRACT(DAY FROM DATE '2006-06-05')", 5),
            ("EXTRACT(HOUR FROM TIMESTAMP '2006-06-05 13:14:15')", 13),
            ("EXTRACT(MILLISECOND FROM TIMESTAMP '2006-06-05 13:14:15.123')", 15123),
        ),
    ),
    _part("year", "YEAR", "YEAR(DATE '1994-09-27')", 1994),
    _part("quarter", "QUARTER", "QUARTER(DATE '1994-09-27')", 3),
    _part("month", "MONTH", "MONTH(DATE '1994-09-27')", 9),
    _part("week", "WEEK", "WEEK(DATE '1994-09-27')", 39),
    _part("dayofyear", "DOY", "DAYOFYEAR(DATE '1994-09-27')", 270),
    _part("dayofmonth", "DAY", "DAYOFMONTH(DATE '1994-09-27')", 27),
    _part("dayofweek", "DOW", "DAYOFWEEK(DATE '1994-09-27')", 3),
    _part("hour", "HOUR", "HOUR(TIMESTAMP '1994-09-27 13:14:15')", 13),
    _part("minute", "MINUTE", "MINUTE(TIMESTAMP '1994-09-27 13:14:15')", 14),
    _part("second", "SECOND", "SECOND(TIMESTAMP '1994-09-27 13:14:15')", 15),
    _fn(
        "floor_to",
        "FLOOR(timepoint TO unit)",
        "The time point rounded down to the unit.",
        sql=(),
        implementation=floor_to,
        inputs="ts",
        literal_arguments=(1,),
        result=same_as(0),
        examples=(
            ("FLOOR(TIME '12:44:31' TO MINUTE)", datetime.time(12, 44)),
            ("FLOOR(TIMESTAMP '2020-05-17 12:44:31' TO MONTH)", datetime.datetime(2020, 5, 1)),
        ),
    ),
    _fn(
        "ceil_to",
        "CEIL(timepoint TO unit)",
        "The time point rounded up to the unit.",
        sql=(),
        implementation=ceil_to,
        inputs="ts",
        literal_arguments=(1,),
        result=same_as(0),
        examples=(
            ("CEIL(TIME '12:44:31' TO MINUTE)", datetime.time(12, 45)),
            ("CEIL(TIMESTAMP '2020-05-17 12:00:00' TO HOUR)", datetime.datetime(2020, 5, 17, 12)),
        ),
    ),
    _fn(
        "date_format",
        "DATE_FORMAT(timestamp | string, format)",
        "The time point written in a Java date format ('yyyy-MM-dd HH:mm:ss').",
        implementation=date_format,
        inputs="*s",
        result=always_nullable(DataTypes.STRING),
        examples=(
            ("DATE_FORMAT(TIMESTAMP '2020-05-17 08:09:10', 'yyyy-MM-dd')", "2020-05-17"),
            (
                "DATE_FORMAT(TIMESTAMP '2020-05-17 08:09:10', 'yyyy-MM-dd HH:mm')",
                "2020-05-17 08:09",
            ),
            ("DATE_FORMAT('2020-05-17 08:09:10', 'HH:mm:ss')", "08:09:10"),
        ),
    ),
    _fn(
        "timestampadd",
        "TIMESTAMPADD(unit, interval, timepoint)",
        "The time point plus interval units (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER,"
        " YEAR).",
        implementation=timestampadd,
        inputs="sit",
        literal_arguments=(0,),
        result=same_as(2),
        examples=(
            ("TIMESTAMPADD(WEEK, 1, DATE '2003-01-02')", datetime.date(2003, 1, 9)),
            (
                "TIMESTAMPADD(MONTH, 1, TIMESTAMP '2003-01-31 10:00:00')",
                datetime.datetime(2003, 2, 28, 10),
            ),
        ),
    ),
    _fn(
        "timestampdiff",
        "TIMESTAMPDIFF(unit, timepoint1, timepoint2)",
        "The signed number of whole units from timepoint1 to timepoint2, an INT.",
        implementation=timestampdiff,
        inputs="stt",
        literal_arguments=(0,),
        result=returns(lambda n: DataTypes.INT(n)),
        examples=(
            (
                "TIMESTAMPDIFF(DAY, TIMESTAMP '2003-01-02 10:00:00',"
                " TIMESTAMP '2003-01-03 10:00:00')",
                1,
            ),
            ("TIMESTAMPDIFF(MONTH, DATE '2003-01-31', DATE '2003-03-30')", 1),
            (
                "TIMESTAMPDIFF(HOUR, TIMESTAMP '2003-01-02 10:00:00',"
                " TIMESTAMP '2003-01-02 07:30:00')",
                -2,
            ),
        ),
    ),
    _fn(
        "convert_tz",
        "CONVERT_TZ(string, fromZone, toZone)",
        "A 'yyyy-MM-dd HH:mm:ss' time moved from one time zone to another.",
        implementation=convert_tz,
        inputs="sss",
        result=always_nullable(DataTypes.STRING),
        examples=(
            (
                "CONVERT_TZ('1970-01-01 00:00:00', 'UTC', 'America/Los_Angeles')",
                "1969-12-31 16:00:00",
            ),
        ),
    ),
    _fn(
        "from_unixtime",
        "FROM_UNIXTIME(seconds[, format])",
        "Epoch seconds written in the session time zone ('yyyy-MM-dd HH:mm:ss').",
        implementation=from_unixtime,
        inputs="ns",
        arity=(1, 2),
        result=returns(DataTypes.STRING),
        examples=(
            ("FROM_UNIXTIME(44)", "1970-01-01 00:00:44"),
            ("FROM_UNIXTIME(86400, 'yyyy/MM/dd')", "1970/01/02"),
        ),
    ),
    _fn(
        "unix_timestamp",
        "UNIX_TIMESTAMP([string[, format]])",
        "The current epoch seconds, or those of a time string (Long.MIN_VALUE if it does not"
        " parse).",
        implementation=unix_timestamp,
        inputs="ss",
        arity=(0, 2),
        deterministic=False,
        result=returns(DataTypes.BIGINT),
        examples=(
            ("UNIX_TIMESTAMP('1970-01-01 08:00:01.001', 'yyyy-MM-dd HH:mm:ss.SSS')", 28801),
            ("UNIX_TIMESTAMP('1970-01-01 08:00:01.001 +0800', 'yyyy-MM-dd HH:mm:ss.SSS X')", 1),
            ("UNIX_TIMESTAMP('x', 'yyyy')", LONG_MIN),
            ("UNIX_TIMESTAMP() > 0", True),
        ),
    ),
    _fn(
        "to_date",
        "TO_DATE(string[, format])",
        "The DATE a string spells (yyyy-MM-dd).",
        implementation=to_date,
        inputs="ss",
        arity=(1, 2),
        result=always_nullable(lambda n: DataTypes.DATE(n)),
        examples=(
            ("TO_DATE('2020-05-17')", datetime.date(2020, 5, 17)),
            ("TO_DATE('17/05/2020', 'dd/MM/yyyy')", datetime.date(2020, 5, 17)),
        ),
    ),
    _fn(
        "to_timestamp",
        "TO_TIMESTAMP(string[, format])",
        "The TIMESTAMP(3) a string spells ('yyyy-MM-dd HH:mm:ss'); NULL if it does not parse.",
        implementation=to_timestamp,
        inputs="ss",
        arity=(1, 2),
        result=always_nullable(lambda n: DataTypes.TIMESTAMP(3, n)),
        examples=(
            ("TO_TIMESTAMP('2020-05-17 08:09:10')", datetime.datetime(2020, 5, 17, 8, 9, 10)),
            ("TO_TIMESTAMP('2020-05-17', 'yyyy-MM-dd')", datetime.datetime(2020, 5, 17)),
            ("TO_TIMESTAMP('nope')", None),
        ),
    ),
    _fn(
        "to_timestamp_ltz",
        "TO_TIMESTAMP_LTZ(numeric[, precision])",
        "Epoch milliseconds (precision 3, the default) or seconds (0) as a TIMESTAMP_LTZ(3).",
        implementation=to_timestamp_ltz,
        inputs="ni",
        arity=(1, 2),
        literal_arguments=(1,),
        result=returns(lambda n: DataTypes.TIMESTAMP_LTZ(3, n)),
        examples=(
            ("TO_TIMESTAMP_LTZ(1500, 3)", datetime.datetime(1970, 1, 1, 0, 0, 1, 500000)),
            ("TO_TIMESTAMP_LTZ(60, 0)", datetime.datetime(1970, 1, 1, 0, 1)),
        ),
    ),
    _now_function(
        "current_date",
        "CURRENT_DATE",
        "Today in the session time zone (UTC).",
        lambda: _now().date(),
        DataTypes.DATE(False),
    ),
    _now_function(
        "current_time",
        "CURRENT_TIME",
        "The time of day (UTC), as LOCALTIME.",
        lambda: _now().time().replace(microsecond=0),
        DataTypes.TIME(0, False),
    ),
    _now_function(
        "localtime",
        "LOCALTIME",
        "The time of day in the session time zone (UTC).",
        lambda: _now().time().replace(microsecond=0),
        DataTypes.TIME(0, False),
    ),
    _now_function(
        "current_timestamp",
        "CURRENT_TIMESTAMP",
        "The current time, a TIMESTAMP_LTZ(3) (NOW() is the same).",
        _now,
        DataTypes.TIMESTAMP_LTZ(3, False),
    ),
    _now_function(
        "localtimestamp",
        "LOCALTIMESTAMP",
        "The current time in the session time zone (UTC), a TIMESTAMP(3).",
        _now,
        DataTypes.TIMESTAMP(3, False),
    ),
    _fn(
        "now",
        "NOW()",
        "The current time, a TIMESTAMP_LTZ(3).",
        implementation=_now,
        inputs="",
        deterministic=False,
        result=lambda _: DataTypes.TIMESTAMP_LTZ(3, False),
        examples=(("YEAR(NOW()) >= 2024", True),),
    ),
    _fn(
        "current_row_timestamp",
        "CURRENT_ROW_TIMESTAMP()",
        "The current time for each row, a TIMESTAMP_LTZ(3).",
        implementation=_now,
        inputs="",
        deterministic=False,
        result=lambda _: DataTypes.TIMESTAMP_LTZ(3, False),
        examples=(("CURRENT_ROW_TIMESTAMP() IS NOT NULL", True),),
    ),
    _fn(
        "proctime",
        "PROCTIME()",
        "A processing-time attribute: the wall clock when the row is read.",
        implementation=None,
        inputs="",
        deterministic=False,
        result=lambda _: PROCTIME_TYPE,
        examples=(("PROCTIME() IS NOT NULL", True),),
    ),
]
