"""Cron schedules as a CronJob's ``spec.schedule`` is read (robfig/cron v3's ``ParseStandard``,
which kube-apiserver validates with and the cronjob controller schedules with).

:func:`parse` takes five fields (minute, hour, day of month, month, day of week; ``*``, ``?``,
lists, ranges, steps and month or weekday names) or a descriptor (``@yearly``, ``@monthly``,
``@weekly``, ``@daily``, ``@midnight``, ``@hourly``, ``@every <duration>``) and raises
:class:`CronError` with the parser's own message for anything else. :meth:`Schedule.next` is the
first activation strictly after a time, in that time's zone, as ``SpecSchedule.Next`` does:
when both day fields are restricted, either one matching is enough.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (minimum, maximum, names) of minute, hour, day of month, month, day of week
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    (0, 6, {d: i for i, d in enumerate(_WEEKDAYS)}),
)
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class CronError(ValueError):
    """A schedule robfig/cron refuses; the message is its error's text."""


@dataclass(frozen=True)
class Schedule:
    """The activation times of a parsed schedule (``every``: a fixed interval instead)."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    any_day: bool = True  # the day-of-month field was * or ?
    any_weekday: bool = True
    every: datetime.timedelta | None = None

    def _day_matches(self, when: datetime.datetime) -> bool:
        dom, dow = when.day in self.days, (when.weekday() + 1) % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def next(self, after: datetime.datetime) -> datetime.datetime:
        """The first activation strictly after ``after`` (within the next five years)."""
        if self.every is not None:
            step = max(self.every, datetime.timedelta(seconds=1))
            return (after + step).replace(microsecond=0)
        when = (after + datetime.timedelta(minutes=1)).replace(second=0, microsecond=0)
        limit = after + datetime.timedelta(days=5 * 366)
        while when <= limit:
            if when.month not in self.months:
                year, month = (when.year + 1, 1) if when.month == 12 else (when.year, when.month + 1)
                when = when.replace(year=year, month=month, day=1, hour=0, minute=0)
            elif not self._day_matches(when):
                when = (when + datetime.timedelta(days=1)).replace(hour=0, minute=0)
            elif when.hour not in self.hours:
                when = (when + datetime.timedelta(hours=1)).replace(minute=0)
            elif when.minute not in self.minutes:
                when += datetime.timedelta(minutes=1)
            else:
                return when
        raise CronError("no activation within five years")


def _number(text: str, names: dict[str, int], expr: str) -> int:
    if text.lower() in names:
        return names[text.lower()]
    try:
        value = int(text, 10)
    except ValueError:
        raise CronError(
            f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax'
        ) from None
    if value < 0:
        raise CronError(f"negative number ({value}) not allowed: {expr}")
    return value


def _range(expr: str, low: int, high: int, names: dict[str, int]) -> tuple[set[int], bool]:
    """``getRange``: the values of one comma-separated part, and whether it was ``*``/``?``."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    star = low_and_high[0] in ("*", "?")
    if star:
        start, end = low, high
    else:
        start = _number(low_and_high[0], names, expr)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _number(low_and_high[1], names, expr)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _number(range_and_step[1], {}, expr)
        if single and not star:
            end = high  # "N/step" means N-max/step
        if step == 0:
            raise CronError(f"step of range should be a positive number: {expr}")
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < low:
        raise CronError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise CronError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    return set(range(start, end + 1, step)), star and step == 1


def _duration(text: str) -> datetime.timedelta:
    """Go's ``time.ParseDuration`` for the ``@every`` descriptor."""
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise CronError(f'failed to parse duration @every {text}: time: invalid duration "{text}"')
    return datetime.timedelta(seconds=sum(float(n) * _UNIT_SECONDS[u] for n, u in parts))


def parse(spec: str) -> Schedule:
    """A standard cron spec (see the module docstring); CronError when robfig/cron refuses it."""
    if not spec:
        raise CronError("empty spec string")
    fields = spec.split()
    if fields and fields[0].startswith(("TZ=", "CRON_TZ=")):
        fields = fields[1:]  # the zone is the CronJob's business (spec.timeZone)
    if fields and fields[0].startswith("@"):
        descriptor = fields[0]
        if descriptor == "@every":
            return Schedule(every=_duration(" ".join(fields[1:])))
        if descriptor not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {descriptor}")
        fields = _DESCRIPTORS[descriptor].split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    values: list[set[int]] = []
    stars: list[bool] = []
    for text, (low, high, names) in zip(fields, _FIELDS, strict=True):
        field_values: set[int] = set()
        field_star = False
        for part in text.split(","):
            part_values, part_star = _range(part, low, high, names)
            field_values |= part_values
            field_star = field_star or part_star
        values.append(field_values)
        stars.append(field_star)
    minutes, hours, days, months, weekdays = (frozenset(v) for v in values)
    return Schedule(minutes, hours, days, months, weekdays, any_day=stars[2], any_weekday=stars[4])
