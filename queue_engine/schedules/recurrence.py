"""When a schedule fires: cron and interval rules, checked at declaration.

Pure functions of time, no database. Cron expressions have five fields and are
read in an IANA time zone (cronsim does the matching, Debian cron semantics);
intervals are a fixed number of seconds on a grid anchored at the first fire.
"""

from __future__ import annotations

import math
import re
from calendar import month_name, monthrange
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from queue_engine.exceptions import ScheduleError

MAX_CRON_LENGTH = 100
MIN_EVERY = timedelta(seconds=1)
MAX_EVERY = timedelta(days=366)
MAX_MISSED_COUNTED = 1000  # beyond this many missed cron fire times we stop counting
FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
FIELD_HELP = (
    "minute 0-59, hour 0-23, day of month 1-31 (or L), month 1-12 (or JAN-DEC), "
    "day of week 0-7 (or SUN-SAT)"
)
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELD_CHARS = re.compile(r"[0-9A-Za-z*/,#-]+")
TIMEZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*")


def check_timezone(name: object) -> ZoneInfo:
    if not isinstance(name, str) or not 0 < len(name) <= 64 or not TIMEZONE_NAME.fullmatch(name):
        raise ScheduleError(
            f"Unknown time zone {name!r}: give an IANA name such as 'UTC' or 'Europe/Paris'."
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"Unknown time zone {name!r}: give an IANA name such as 'UTC' or 'Europe/Paris'."
        ) from None


def check_cron(expression: object) -> str:
    """The expression, normalised (aliases expanded, single spaces), or a ScheduleError.

    Cheap checks first (length, field count, characters) so that hostile input
    is refused before any parsing; then cronsim parses each field; then the
    expression must match at least one day in the 28-year calendar cycle.
    """
    if not isinstance(expression, str):
        raise ScheduleError(
            f"A cron expression must be a string such as '*/5 * * * *', not "
            f"{type(expression).__name__}."
        )
    if len(expression) > MAX_CRON_LENGTH:
        raise ScheduleError(
            f"Cron expression is {len(expression)} characters long; the limit is "
            f"{MAX_CRON_LENGTH}: use ranges and steps (1-5, */10) instead of long lists."
        )
    text = ALIASES.get(expression.strip().lower(), expression)
    parts = text.split()
    if len(parts) != 5:
        raise ScheduleError(
            f"Cron expression {expression!r} has {len(parts)} fields; give exactly five "
            f"(minute hour day-of-month month day-of-week), for example '*/5 * * * *'."
        )
    for field, part in zip(FIELDS, parts, strict=True):
        if not FIELD_CHARS.fullmatch(part):
            raise ScheduleError(
                f"Cron expression {expression!r}: the {field} field {part!r} has characters "
                f"cron does not use; write numbers, names, '*', ',', '-', '/' ({FIELD_HELP})."
            )
    normalised = " ".join(parts)
    try:
        sim = CronSim(normalised, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ScheduleError(_field_message(expression, parts, str(exc))) from None
    except (ValueError, IndexError, KeyError):
        raise ScheduleError(
            f"Cron expression {expression!r} cannot be parsed; check each field ({FIELD_HELP})."
        ) from None
    if not _matches_some_day(sim):
        raise ScheduleError(
            f"Cron expression {expression!r} never fires: no date matches its day-of-month, "
            "month and day-of-week together; loosen one of them."
        )
    return normalised


def _field_message(expression: str, parts: list[str], reason: str) -> str:
    bad = reason.removeprefix("Bad ").strip()
    if bad == "day-of-month":
        never = _day_never_occurs(expression, parts)
        if never:
            return never
    if bad in FIELDS:
        part = parts[FIELDS.index(bad)]
        return (
            f"Cron expression {expression!r}: the {bad} field {part!r} is out of range "
            f"or malformed ({FIELD_HELP}); fix that field."
        )
    return f"Cron expression {expression!r} is invalid ({reason}); check each field ({FIELD_HELP})."


def _day_never_occurs(expression: str, parts: list[str]) -> str | None:
    """Why a valid day-of-month was refused: no allowed month is that long (30 in 2, 31 in 4)."""
    minute, hour, day, month, weekday = parts
    try:
        CronSim(f"{minute} {hour} {day} * {weekday}", datetime(2000, 1, 1, tzinfo=UTC))
        months = sorted(CronSim(f"0 0 1 {month} *", datetime(2000, 1, 1, tzinfo=UTC)).months)
    except (CronSimError, ValueError, IndexError, KeyError):
        return None  # the day-of-month field is malformed in any month
    names = ", ".join(month_name[m] for m in months)
    one_day, one_month = day.isdigit(), len(months) == 1
    return (
        f"Cron expression {expression!r}: "
        f"{f'day {day} never occurs' if one_day else f'days {day} never occur'} in "
        f"{'month' if one_month else 'months'} {month} ({names}): this schedule would never "
        f"fire; pick a day {'that month has' if one_month else 'those months have'} "
        "(L is the last day)."
    )


def _matches_some_day(sim: CronSim) -> bool:
    # Whether a date matches depends only on the month's length, the weekday of its
    # first day and the day (the month itself only has to be allowed): so one real
    # month of each (length, first weekday) the allowed months can have is enough.
    lengths = {n for month in sim.months for n in MONTH_LENGTHS[month]}
    for length in sorted(lengths):
        for first_weekday in range(7):
            year, month = MONTHS_BY_SHAPE[(length, first_weekday)]
            for day in range(1, length + 1):
                # With AND semantics a day must also match day-of-month (or be near the end
                # of the month, for L and LW), which skips most of the calls.
                if sim.day_and and day < 26 and day not in sim.days:
                    continue
                if sim.match_day(date(year, month, day)):
                    return True
    return False


MONTH_LENGTHS = {
    1: (31,),
    2: (28, 29),
    3: (31,),
    4: (30,),
    5: (31,),
    6: (30,),
    7: (31,),
    8: (31,),
    9: (30,),
    10: (31,),
    11: (30,),
    12: (31,),
}


def _months_by_shape() -> dict[tuple[int, int], tuple[int, int]]:
    """A real (year, month) for each (length, first weekday); 2000-2027 has them all."""
    shapes: dict[tuple[int, int], tuple[int, int]] = {}
    for year in range(2000, 2028):
        for month in range(1, 13):
            first_weekday, length = monthrange(year, month)
            shapes.setdefault((length, first_weekday), (year, month))
    return shapes


MONTHS_BY_SHAPE = _months_by_shape()


def check_every(every: object) -> timedelta:
    if isinstance(every, bool) or not isinstance(every, int | float | timedelta):
        raise ScheduleError(
            f"every must be a number of seconds or a timedelta, not {type(every).__name__}."
        )
    interval = every if isinstance(every, timedelta) else _seconds(every)
    if not MIN_EVERY <= interval <= MAX_EVERY:
        raise ScheduleError(
            f"every must be from 1 second to 366 days, not {interval.total_seconds():g} "
            "seconds; use a cron expression for rarer schedules."
        )
    return interval


def _seconds(value: float) -> timedelta:
    if not math.isfinite(value):
        raise ScheduleError(f"every must be a finite number of seconds, not {value!r}.")
    try:
        return timedelta(seconds=value)
    except OverflowError:
        raise ScheduleError(f"every is far too large ({value!r} seconds).") from None


@dataclass(frozen=True)
class Due:
    """What to do with a schedule whose next fire time has come."""

    fire_time: datetime  # the latest fire time at or before now
    missed: int  # earlier fire times folded into this one (or skipped)
    next_fire_at: datetime  # the first fire time after now


class ZonedCronSim(CronSim):
    """cronsim, kept from looping for ever where a clock change crosses midnight.

    cronsim steps through wall-clock time by adding seconds in UTC. Where a zone's
    clock goes back across midnight (America/St_Johns fell back at 00:01 until 2011,
    so 00:00 to 00:01 came twice), a step forward from the day's first minute lands on
    the day before; cronsim then steps back to the first minute of the day it wanted,
    and again, for ever (cronsim 2.8). A step that would cross the day boundary
    against its direction goes on, a minute at a time, until it is back on that day.
    """

    def tick(self, seconds: int = 1) -> None:
        before = self.dt.date()
        super().tick(seconds)
        if self.dt.tzinfo in (None, UTC):
            return
        while (self.dt.date() - before).days * self.tick_direction < 0:
            super().tick(60)


@dataclass(frozen=True)
class Recurrence:
    every: timedelta | None = None
    cron: str | None = None
    timezone: str = "UTC"

    def first_after(self, moment: datetime) -> datetime:
        """The first fire time strictly after `moment` (an aware datetime), in UTC."""
        if self.every is not None:
            return (moment + self.every).astimezone(UTC)
        return self._cron_after(moment)

    def due(self, scheduled: datetime, now: datetime) -> Due:
        """For a schedule due at `scheduled` (at or before `now`)."""
        if self.every is not None:
            steps = max(0, math.floor((now - scheduled) / self.every))
            latest = scheduled + steps * self.every
            return Due(latest.astimezone(UTC), steps, (latest + self.every).astimezone(UTC))
        zone = ZoneInfo(self.timezone)
        assert self.cron is not None
        latest, missed = scheduled, 0
        times = ZonedCronSim(self.cron, scheduled.astimezone(zone))
        for candidate in times:
            at = candidate.astimezone(UTC)
            if at <= latest:
                continue  # an ambiguous wall-clock time read twice
            if at > now:
                return Due(latest.astimezone(UTC), missed, at)
            latest, missed = at, missed + 1
            if missed >= MAX_MISSED_COUNTED:
                break
        return Due(self._cron_at_or_before(now, floor=latest), missed, self._cron_after(now))

    def _cron_after(self, moment: datetime) -> datetime:
        assert self.cron is not None
        for candidate in ZonedCronSim(self.cron, moment.astimezone(ZoneInfo(self.timezone))):
            at = candidate.astimezone(UTC)
            if at > moment:  # cronsim may hand back an earlier reading of an ambiguous time
                return at
        raise ScheduleError(f"Cron expression {self.cron!r} does not fire after {moment}.")

    def _cron_at_or_before(self, moment: datetime, *, floor: datetime) -> datetime:
        assert self.cron is not None
        start = moment.astimezone(ZoneInfo(self.timezone)).replace(microsecond=0)
        for candidate in ZonedCronSim(self.cron, start + timedelta(seconds=1), reverse=True):
            at = candidate.astimezone(UTC)
            if floor < at <= moment:
                return at
            if at <= floor:
                break
        return floor.astimezone(UTC)
