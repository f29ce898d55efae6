"""Timestamps as typed objects decode them: ``metav1.Time`` and ``metav1.MicroTime``.

A typed field parses its string with Go's ``time.Parse`` and the layout
``2006-01-02T15:04:05Z07:00`` (Time) or ``2006-01-02T15:04:05.000000Z07:00`` (MicroTime), and
serialises it back in UTC: whole seconds for Time, six fractional digits for MicroTime. So
(measured on v1.36):

- Time takes any fraction of a second (dropped) and a ``Z`` or ``±hh:mm`` zone:
  ``2024-01-01T01:00:00.5+01:00`` comes back as ``2024-01-01T00:00:00Z``;
- MicroTime needs exactly six fractional digits: ``…00.5+01:00`` and ``…00Z`` are refused,
  ``…00.500000+01:00`` comes back as ``2024-01-01T00:00:00.500000Z``;
- anything else (``z``, no zone, ``+0100``, a space for ``T``) is refused, and the object with
  it cannot be decoded: 400 with Go's own ``parsing time … cannot parse … as …``, which
  :class:`TimeFormatError` carries.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

TIME_LAYOUT = "2006-01-02T15:04:05Z07:00"
MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
ITEM = "*"  # in a path: every item of a list


class TimeFormatError(ValueError):
    """A Time/MicroTime string Go's parser refuses; the message is its error."""


def _cannot(value: str, layout: str, rest: str, element: str) -> TimeFormatError:
    return TimeFormatError(f'parsing time "{value}" as "{layout}": cannot parse "{rest}" as "{element}"')


def _digits(text: str, count: int) -> bool:
    return len(text) >= count and text[:count].isascii() and text[:count].isdigit()


def parse(value: str, *, micro: bool) -> datetime.datetime:
    """``time.Parse`` with the Time (or MicroTime) layout: the instant, or TimeFormatError."""
    layout = MICRO_LAYOUT if micro else TIME_LAYOUT
    rest = value
    if not _digits(rest, 4):
        raise _cannot(value, layout, rest, "2006")
    year, rest = int(rest[:4]), rest[4:]
    numbers = []
    # Each element in turn, as Go parses: a range error is reported where it is met.
    for literal, element, low, high in (
        ("-", "01", 1, 12),
        ("-", "02", 0, 31),
        ("T", "15", 0, 23),
        (":", "04", 0, 59),
        (":", "05", 0, 59),
    ):
        if not rest.startswith(literal):
            raise _cannot(value, layout, rest, literal)
        rest = rest[len(literal) :]
        width = 1 if element == "15" and _digits(rest, 1) and not _digits(rest, 2) else 2  # "15": 1 or 2
        if not _digits(rest, width):
            raise _cannot(value, layout, rest, element)
        number, rest = int(rest[:width]), rest[width:]
        if not low <= number <= high:
            what = {"01": "month", "02": "day", "15": "hour", "04": "minute", "05": "second"}[element]
            raise TimeFormatError(f'parsing time "{value}": {what} out of range')
        numbers.append(number)
    month, day, hour, minute, second = numbers
    micros = 0
    if micro:
        if not (rest[:1] in (".", ",") and _digits(rest[1:], 6)):
            raise _cannot(value, layout, rest, ".000000")
        micros, rest = int(rest[1:7]), rest[7:]
    elif rest[:1] in (".", ",") and _digits(rest[1:], 1):
        end = 1
        while _digits(rest[end:], 1):
            end += 1
        micros, rest = int((rest[1:end] + "000000")[:6]), rest[end:]  # Time drops it anyway
    if rest.startswith("Z"):
        zone, rest = datetime.UTC, rest[1:]
    elif (
        len(rest) >= 6
        and rest[0] in "+-"
        and rest[3] == ":"
        and _digits(rest[1:], 2)
        and _digits(rest[4:], 2)
    ):
        offset = datetime.timedelta(hours=int(rest[1:3]), minutes=int(rest[4:6]))
        zone, rest = datetime.timezone(-offset if rest[0] == "-" else offset), rest[6:]
    else:
        raise _cannot(value, layout, rest, "Z07:00")
    if rest:
        raise TimeFormatError(f'parsing time "{value}": extra text: "{rest}"')
    try:
        return datetime.datetime(year, month, day, hour, minute, second, micros, tzinfo=zone)
    except ValueError:
        raise TimeFormatError(f'parsing time "{value}": day out of range') from None


def canonical(value: Any, *, micro: bool) -> Any:
    """The string a typed Time (or MicroTime) field holds after decoding ``value``: UTC, whole
    seconds (or six fractional digits). None stays None; raises TimeFormatError."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TimeFormatError(f"json: cannot unmarshal {_json_kind(value)} into Go value of type string")
    stamp = parse(value, micro=micro).astimezone(datetime.UTC)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "array" if isinstance(value, list) else "object"


def normalize(obj: Any, paths: Sequence[Sequence[str]], *, micro: bool) -> None:
    """Put every timestamp at ``paths`` (field names, :data:`ITEM` for every list item) of
    ``obj`` in its typed form, in place; raises TimeFormatError for one that does not parse."""
    for path in paths:
        _normalize_at(obj, tuple(path), micro)


def _normalize_at(node: Any, path: tuple[str, ...], micro: bool) -> None:
    key, rest = path[0], path[1:]
    if key == ITEM:
        for item in node if isinstance(node, list) else ():
            if rest:
                _normalize_at(item, rest, micro)
        return
    if not isinstance(node, dict) or key not in node:
        return
    if rest:
        _normalize_at(node[key], rest, micro)
    else:
        node[key] = canonical(node[key], micro=micro)


# --- ages, as the server's printers show them ------------------------------------------------------

ZERO = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)  # Go's zero time.Time, shown as <unknown>


def human_duration(nanoseconds: int) -> str:
    """``duration.HumanDuration``: about two significant figures ("90s", "5m3s", "3h10m", "2d")."""
    seconds = int(nanoseconds / 1e9)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = nanoseconds // 60_000_000_000
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m{s}s" if s else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = nanoseconds // 3_600_000_000_000
    if hours < 8:
        m = minutes % 60
        return f"{hours}h{m}m" if m else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d{h}h" if h else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def since(stamp: Any, now: float, *, micro: bool = False) -> str:
    """``translateTimestampSince`` of a stored Time (or MicroTime) at the wall time ``now``:
    ``<unknown>`` for an unset (zero) time, else :func:`human_duration` of the time since."""
    instant = parse_or_zero(stamp, micro=micro)
    if instant is None:
        return "<unknown>"
    return human_duration(nanoseconds_since(instant, now))


def parse_or_zero(stamp: Any, *, micro: bool = False) -> datetime.datetime | None:
    """A stored timestamp as an instant, None for Go's zero time (unset, null, or year 1)."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        instant = parse(stamp, micro=micro)
    except TimeFormatError:
        return None
    return None if instant == ZERO else instant


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def nanoseconds_since(instant: datetime.datetime, now: float) -> int:
    delta = instant - _EPOCH
    stamp = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    return round(now * 1e9) - stamp
